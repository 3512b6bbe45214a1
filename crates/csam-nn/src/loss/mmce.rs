//! Maximum mean calibration error.

use tch::{Kind, Tensor};

use super::{gather_true, ExampleLoss, Fields, LossError, Scores};

/// Cross entropy plus the weighted maximum mean calibration error (Kumar,
/// Sarawagi and Jain 2018, "Trainable calibration measures for neural
/// networks from kernel mean embeddings", ICML): `L = mean_i(-log p_y) +
/// lambda * MMCE_w`, a term of the whole batch.
///
/// With `r_i` the confidence (largest softmax probability), `c_i = 1` where
/// the prediction is right, `C` / `W` the right / wrong examples (`m` / `n` of
/// them) and the Laplacian kernel `k(r, r') = exp(-|r - r'| / 0.4)`:
///
/// - `S_cc = sum_{i,j in C} (1 - r_i)(1 - r_j) k(r_i, r_j)`,
/// - `S_ww = sum_{i,j in W} r_i r_j k(r_i, r_j)`,
/// - `S_cw = sum_{i in C, j in W} (1 - r_i) r_j k(r_i, r_j)`,
/// - `e = S_cc / (m^2 (m^2 + 1e-5)) + S_ww / (n^2 (n^2 + 1e-5)) - 2 S_cw / (m n (m n + 1e-5))`,
/// - `MMCE_w = sqrt(e + 1e-10)`, and 0 when `m = 0` or `n = 0`.
///
/// This is MMCE_w as every released implementation computes it (the
/// authors' `calibration_mmce_w_loss`, aviralkumar2907/MMCE; ported line for
/// line by Mukhoti et al., torrvision/focal_calibration `Losses/mmce.py`,
/// whose CIFAR runs used it): each sum is normalised by its count twice (a
/// mean, then the `1 / (m^2 + 1e-5)` factors), which makes it smaller than
/// the paper's `sqrt(S_cc/m^2 + S_ww/n^2 - 2 S_cw/(m n))`. Default
/// `lambda = 2`, Mukhoti et al.'s CIFAR-10/100 scripts. The right/wrong split
/// carries no gradient; the confidences do, in both factors and the kernel.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mmce {
    /// The weight `lambda >= 0` of MMCE_w.
    #[serde(default = "Mmce::default_lambda")]
    pub lambda: f64,
}

impl Mmce {
    /// The Laplacian kernel's width.
    const WIDTH: f64 = 0.4;
    /// The released code's guards of the normalisations and of the root.
    const NORM_EPS: f64 = 1e-5;
    const ROOT_EPS: f64 = 1e-10;

    fn default_lambda() -> f64 {
        2.0
    }

    /// MMCE_w of a batch (a 0-d tensor).
    fn weighted_mmce(&self, scores: &Scores, targets: &Tensor) -> Result<Tensor, LossError> {
        let (log_confidence, predicted) = scores.log_probs.f_max_dim(1, false)?;
        let confidence = log_confidence.f_exp()?;
        let kind = confidence.kind();
        let right = predicted.f_eq_tensor(targets)?.f_to_kind(kind)?;
        let m = right.f_sum(Kind::Double)?.f_double_value(&[])?;
        let n = targets.size()[0] as f64 - m;
        if m == 0.0 || n == 0.0 {
            return Ok(confidence.f_sum(kind)?.f_mul_scalar(0.0)?);
        }
        let kernel = (confidence.f_unsqueeze(1)? - confidence.f_unsqueeze(0)?)
            .f_abs()?
            .f_div_scalar(-Self::WIDTH)?
            .f_exp()?;
        let right_weights = &right * (1.0 - &confidence);
        let wrong_weights = (1.0 - &right) * &confidence;
        let kernel_sum = |a: &Tensor, b: &Tensor| -> Result<Tensor, LossError> {
            Ok((a.f_unsqueeze(1)? * b.f_unsqueeze(0)? * &kernel).f_sum(kind)?)
        };
        let normalised = |count: f64| count * (count + Self::NORM_EPS);
        let error = kernel_sum(&right_weights, &right_weights)? / normalised(m * m)
            + kernel_sum(&wrong_weights, &wrong_weights)? / normalised(n * n)
            - kernel_sum(&right_weights, &wrong_weights)? * (2.0 / normalised(m * n));
        Ok((error + Self::ROOT_EPS).f_sqrt()?)
    }
}

impl Default for Mmce {
    fn default() -> Self {
        Mmce {
            lambda: Mmce::default_lambda(),
        }
    }
}

impl ExampleLoss for Mmce {
    fn validate(&self) -> Result<(), LossError> {
        Fields("mmce").non_negative("lambda", self.lambda)
    }

    fn per_example(&self, scores: &Scores, targets: &Tensor) -> Result<Tensor, LossError> {
        Ok(-gather_true(&scores.log_probs, targets)?)
    }

    fn batch_term(&self, scores: &Scores, targets: &Tensor) -> Result<Option<Tensor>, LossError> {
        Ok(Some(self.weighted_mmce(scores, targets)? * self.lambda))
    }
}
