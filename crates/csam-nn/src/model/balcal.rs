//! BalCAL's second classifier: a fixed simplex equiangular tight frame (ETF)
//! behind a trainable adaptor, balanced against the network's linear
//! classifier by a weight `lambda` that each epoch sets from the training
//! logits.
//!
//! Ni, Zhao, Gao, Guo and Zha 2025, "Balancing Two Classifiers via A
//! Simplex ETF Structure for Model Calibration" (arXiv:2504.10007), as the
//! authors' code (JianiNi/BalCAL: `src/models/WRN.py` `WideResNet_BalCAL`
//! and `Adaptor`, `src/lightning_modules/One_Stage.py` `BalCAL_models`:
//! `training_step`, `produce_Ew`, `find_lamd`).

use tch::{nn, nn::Module, nn::ModuleT, Kind, Tensor};

use super::layers::{batch_norm1d, linear, BatchNorm, Linear, TORCH_DEFAULT_INIT};
use super::{Mode, ModelError};
use crate::loss::LossError;

/// The bisection of [`balanced_lambda`] stops when its interval is this
/// narrow (the authors' `tol`).
const TOLERANCE: f64 = 1e-4;
/// The least norm features are divided by (`F.normalize`'s `eps`).
const NORM_EPS: f64 = 1e-12;

/// The ETF classifier of a network with `d`-wide features and `K` classes:
///
/// `h = relu(BN(a))`, `a = f + W2 relu(BN2(W1 relu(BN1(f))))` (the adaptor,
/// a residual block halving the width inside), and the ETF logits
/// `u = (h / max(||h||, 1e-12)) M`, where `M = sqrt(K / (K - 1)) P (I - 1 1^T
/// / K)` is drawn once (`P`: the `d x K` Q factor of a matrix of uniform
/// draws in `[0, 1)`) and never trained: its columns have unit norm and
/// cosine `-1 / (K - 1)` with each other.
///
/// The model predicts `lambda z + (1 - lambda) u` from the linear logits `z`.
/// `lambda` starts at `initial_lambda` (the authors' 0.8) and is set after
/// every epoch by [`balanced_lambda`]; `M` and `lambda` are kept with the
/// weights (`balcal.etf`, `balcal.lambda`), so a saved model predicts as
/// trained.
///
/// The authors' adaptor is two 3x3 convolutions on the last feature map of
/// a Wide ResNet; csam's acts on the pooled features `f` of every
/// architecture (for the MLP, its last hidden layer), so its layers are
/// linear. Weight names, under `balcal.`: `adaptor.bn1`, `adaptor.fc1`,
/// `adaptor.bn2`, `adaptor.fc2`, `bn` (as `nn.BatchNorm1d` / `nn.Linear`
/// modules of those names) and the buffers `etf` `[d, K]` and `lambda` `[1]`;
/// `tests/fixtures/balcal_reference.py` computes the model from them.
#[derive(Debug)]
pub struct BalcalHead {
    bn1: BatchNorm,
    fc1: Linear,
    bn2: BatchNorm,
    fc2: Linear,
    bn: BatchNorm,
    etf: Tensor,
    lambda: Tensor,
}

impl BalcalHead {
    /// Builds the head under `p` for `width`-wide features and `n_classes`
    /// classes, drawing `M` from libtorch's current random state.
    pub fn new(
        p: &nn::Path,
        width: i64,
        n_classes: i64,
        initial_lambda: f64,
    ) -> Result<BalcalHead, ModelError> {
        if width < n_classes {
            return Err(ModelError::InvalidConfig(format!(
                "BalCAL's simplex ETF needs features at least as wide as the classes: the \
                 network's features are {width} wide, the data has {n_classes} classes"
            )));
        }
        let adaptor = p / "adaptor";
        let half = (width / 2).max(1);
        let head = BalcalHead {
            bn1: batch_norm1d(&adaptor / "bn1", width),
            fc1: linear(&adaptor / "fc1", width, half, TORCH_DEFAULT_INIT),
            bn2: batch_norm1d(&adaptor / "bn2", half),
            fc2: linear(&adaptor / "fc2", half, width, TORCH_DEFAULT_INIT),
            bn: batch_norm1d(p / "bn", width),
            etf: p.zeros_no_train("etf", &[width, n_classes]),
            lambda: p.zeros_no_train("lambda", &[1]),
        };
        let (kind, device) = (head.etf.kind(), head.etf.device());
        let etf = simplex_etf(&Tensor::rand([width, n_classes], (kind, device)));
        tch::no_grad(|| {
            head.etf.shallow_clone().copy_(&etf);
            let _ = head.lambda.shallow_clone().fill_(initial_lambda);
        });
        Ok(head)
    }

    /// The ETF logits `u` `[B, K]` of features `[B, d]`.
    pub fn etf_logits(&self, features: &Tensor, mode: Mode) -> Tensor {
        let train = mode.batch_statistics();
        let inner = self.bn1.forward_t(features, train).relu();
        let inner = self.bn2.forward_t(&self.fc1.forward(&inner), train).relu();
        let adapted = features + self.fc2.forward(&inner);
        let h = self.bn.forward_t(&adapted, train).relu();
        let norm = h.norm_scalaropt_dim(2, [1], true).clamp_min(NORM_EPS);
        (h / norm).matmul(&self.etf)
    }

    /// `lambda z + (1 - lambda) u`: the model's logits.
    pub fn balance(&self, linear: &Tensor, etf: &Tensor) -> Tensor {
        linear * &self.lambda + etf * (1.0 - &self.lambda)
    }

    /// The weight `lambda` of the linear classifier.
    pub fn lambda(&self) -> f64 {
        self.lambda.double_value(&[0])
    }

    /// Sets `lambda` (after an epoch, from [`balanced_lambda`]).
    pub fn set_lambda(&self, lambda: f64) {
        tch::no_grad(|| {
            let _ = self.lambda.shallow_clone().fill_(lambda);
        });
    }
}

/// `sqrt(K / (K - 1)) Q (I - 1 1^T / K)` with `Q` the reduced Q factor of
/// `draws` `[d, K]`.
pub fn simplex_etf(draws: &Tensor) -> Tensor {
    let classes = draws.size()[1];
    let (q, _) = Tensor::linalg_qr(draws, "reduced");
    let centre = Tensor::eye(classes, (draws.kind(), draws.device()))
        - Tensor::ones([classes, classes], (draws.kind(), draws.device())) / classes as f64;
    q.matmul(&centre) * (classes as f64 / (classes - 1) as f64).sqrt()
}

/// The two classifiers' logits of a training pass and the weight between
/// them.
#[derive(Debug)]
pub struct TwoHeads {
    /// The linear classifier's logits `z` `[B, K]`.
    pub linear: Tensor,
    /// The ETF classifier's logits `u` `[B, K]`.
    pub etf: Tensor,
    /// The weight `lambda` of the linear classifier.
    pub lambda: f64,
}

impl TwoHeads {
    /// The logits each classifier is trained on, with its weight in the
    /// loss: `(z, lambda)` and `(u * e, 1 - lambda)`, so that a loss `L`
    /// trains `lambda L(z, y) + (1 - lambda) L(u * e, y)` (the authors' loss
    /// is cross entropy, any training loss may take its place as in their
    /// code). Column `c` of the ETF logits is scaled by `e_c = sqrt(gamma /
    /// n_c)`, `n_c` the count of class `c` among `targets` and `gamma = B /
    /// U` the batch size over the number of classes present; `e_c = 1` for a
    /// class absent from the batch (`produce_Ew`).
    pub fn terms(&self, targets: &Tensor) -> Result<[(Tensor, f64); 2], LossError> {
        let (_, classes) = self.linear.size2()?;
        let kind = self.etf.kind();
        let counts = targets
            .f_bincount(None::<Tensor>, classes)?
            .f_to_kind(kind)?;
        let present = counts.f_gt(0.0)?;
        let present_classes = present.f_sum(Kind::Double)?.double_value(&[]);
        let gamma = targets.size1()? as f64 / present_classes;
        let scale = counts
            .f_clamp_min(1.0)?
            .f_reciprocal()?
            .f_mul_scalar(gamma)?
            .f_sqrt()?;
        let scale = scale.f_where_self(&present, &Tensor::ones_like(&scale))?;
        Ok([
            (self.linear.shallow_clone(), self.lambda),
            (self.etf.f_mul(&scale.f_unsqueeze(0)?)?, 1.0 - self.lambda),
        ])
    }
}

/// The weight `lambda` after an epoch whose training passes gave the linear
/// logits `linear` `[N, K]` and the scaled ETF logits `etf` `[N, K]`
/// ([`TwoHeads::terms`]) for `targets` `[N]` (the authors' `find_lamd`).
///
/// With `conf(Z)` the mean largest softmax probability of `Z` and `acc(Z)`
/// its accuracy: `lambda = 1` when the linear classifier alone is not
/// over-confident, `delta acc(z) > conf(z)`. Otherwise bisection on `[0, 1]`
/// until the interval is narrower than `1e-4`, at each midpoint `m` with
/// `Z = m z + (1 - m) u`: the upper end moves down while `Z` is
/// over-confident (`delta acc(Z) <= conf(Z)`), the lower end up otherwise,
/// and the result is the last midpoint whose gap `|delta acc(Z) - conf(Z)|`
/// was below the gap of `lambda = 1` (as the authors' code, which compares
/// each midpoint with that first gap, not with the best one so far); 1 when
/// none was.
pub fn balanced_lambda(
    linear: &Tensor,
    etf: &Tensor,
    targets: &Tensor,
    delta: f64,
) -> Result<f64, LossError> {
    let gap = |logits: &Tensor| -> Result<(f64, f64), LossError> {
        let (confidence, predicted) = logits.f_softmax(1, Kind::Double)?.f_max_dim(1, false)?;
        let confidence = confidence.f_mean(Kind::Double)?.double_value(&[]);
        let accuracy = predicted
            .f_eq_tensor(targets)?
            .f_mean(Kind::Double)?
            .double_value(&[]);
        Ok((delta * accuracy, confidence))
    };
    let (target, confidence) = gap(linear)?;
    if target > confidence {
        return Ok(1.0);
    }
    let first_gap = (target - confidence).abs();
    let (mut best, mut low, mut high) = (1.0, 0.0, 1.0);
    while high - low > TOLERANCE {
        let middle = (low + high) / 2.0;
        let (target, confidence) = gap(&(linear * middle + etf * (1.0 - middle)))?;
        if (target - confidence).abs() < first_gap {
            best = middle;
        }
        match target > confidence {
            true => low = middle,
            false => high = middle,
        }
    }
    Ok(best)
}

/// A training pass's logits of both classifiers, on the host: what
/// [`EpochLogits`] collects.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HeadLogits {
    /// The number of classes `K` (the width of a row).
    pub classes: usize,
    /// The linear logits `z`, row-major `[B, K]`.
    pub linear: Vec<f64>,
    /// The scaled ETF logits `u * e`, row-major `[B, K]`.
    pub etf: Vec<f64>,
    /// The targets `[B]`.
    pub targets: Vec<i64>,
}

impl HeadLogits {
    /// Reads `(linear, etf)` `[B, K]` and `targets` `[B]` back to the host.
    pub fn read(linear: &Tensor, etf: &Tensor, targets: &Tensor) -> Result<HeadLogits, LossError> {
        let host = |t: &Tensor| -> Result<Vec<f64>, LossError> {
            let flat = t.f_detach()?.f_to_kind(Kind::Double)?.f_flatten(0, -1)?;
            Ok(Vec::<f64>::try_from(flat.f_to_device(tch::Device::Cpu)?)?)
        };
        let (_, classes) = linear.size2()?;
        Ok(HeadLogits {
            classes: classes as usize,
            linear: host(linear)?,
            etf: host(etf)?,
            targets: Vec::<i64>::try_from(targets.f_to_device(tch::Device::Cpu)?)?,
        })
    }

    /// Appends `more`'s rows.
    pub fn extend(&mut self, more: HeadLogits) {
        self.classes = more.classes;
        self.linear.extend(more.linear);
        self.etf.extend(more.etf);
        self.targets.extend(more.targets);
    }

    /// [`balanced_lambda`] of the rows collected; `None` when there are none.
    pub fn balanced_lambda(&self, delta: f64) -> Result<Option<f64>, LossError> {
        if self.targets.is_empty() {
            return Ok(None);
        }
        let rows = [self.targets.len() as i64, self.classes as i64];
        let linear = Tensor::from_slice(&self.linear).f_reshape(rows)?;
        let etf = Tensor::from_slice(&self.etf).f_reshape(rows)?;
        let targets = Tensor::from_slice(&self.targets);
        balanced_lambda(&linear, &etf, &targets, delta).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etf_columns_are_unit_vectors_at_equal_obtuse_angles() {
        tch::manual_seed(3);
        let m = simplex_etf(&Tensor::rand([12, 5], (Kind::Double, tch::Device::Cpu)));
        let gram = m.transpose(0, 1).matmul(&m);
        let expected = Tensor::eye(5, (Kind::Double, tch::Device::Cpu)) * 1.25 - 0.25;
        let error = (gram - expected).abs().max().double_value(&[]);
        // Float64 QR of a 12 x 5 matrix and two 5-term products: round-off
        // ~ 12 * 2.2e-16 per step, ~1e-14 on O(1) entries; 1e-12 leaves 100x.
        assert!(error < 1e-12, "Gram matrix off by {error}");
    }
}
