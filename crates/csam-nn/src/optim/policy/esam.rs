//! ESAM (Du, Yan, Feng, Zhou, Zhen, Goh and Tan 2022, "Efficient
//! Sharpness-aware Minimization for Improved Training of Neural Networks",
//! ICLR, arXiv:2110.03141): every step is a SAM step, made cheaper inside
//! its passes by Stochastic Weight Perturbation (SWP) and
//! Sharpness-sensitive Data Selection (SDS).

use super::{uniforms, word};
use crate::loss::{Fields, LossError};
use tch::{Device, Kind, Tensor};

/// With the perturbation `e` of the step's rule (SAM: `rho g / ||g||`, `g`
/// the whole batch's gradient at theta), SWP perturbs
/// `theta~ = theta + m * e / beta`, `m_j ~ Bernoulli(beta)` drawn per
/// coordinate (`E[m * e / beta] = e`); SDS then scores every example of the
/// batch `B` by its loss increase `l_i(theta~) - l_i(theta)` (a no-grad
/// forward at theta~ on the whole batch) and runs the second pass (the
/// training loss, or CSAM's weighted loss) forward and backward on the
/// `ceil(gamma |B|)` examples with the largest increase only:
/// `g' = grad L_{B+}(theta~)`. Ties go to the lower row of the batch (a
/// stable descending sort). `beta = gamma = 1` is the plain SAM step.
///
/// Defaults `beta = 0.6`, `gamma = 0.5`: the authors' ResNet-18 CIFAR
/// setting (their `run.sh`; 0.5 and 0.5 for WideResNet and PyramidNet).
/// Where this differs from the authors' code (`utils/Esam.py`): their mask
/// keeps or drops whole parameter tensors (drawn at the end of the previous
/// step) and normalises by the kept tensors' gradient norm; their selection
/// keeps the rows strictly above the `floor(gamma |B|)`-th largest increase
/// (so one fewer, and none of a tie), and all of them for `gamma >= 0.99`.
/// csam follows the paper: a per-coordinate mask, `||g||` over all weights,
/// `ceil(gamma |B|)` rows.
///
/// The mask of step `t` is a pure function of the run's seed, `t` and the
/// coordinate (its index in the flattened trainable weights), drawn on the
/// weights' device, so a resumed run draws the same masks. A per-coordinate
/// mask saves no backward work; the saving is SDS's: pass 2 runs on `gamma
/// |B|` rows, for one extra no-grad forward on `|B|`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Esam {
    /// SWP's keep probability beta in (0, 1].
    #[serde(default = "Esam::default_beta")]
    pub beta: f64,
    /// SDS's selected share gamma in (0, 1].
    #[serde(default = "Esam::default_gamma")]
    pub gamma: f64,
}

impl Default for Esam {
    fn default() -> Self {
        Self {
            beta: Self::default_beta(),
            gamma: Self::default_gamma(),
        }
    }
}

/// Sets ESAM's mask draws apart from the run's other seeded streams.
const ESAM_SALT: u64 = 0x6573_616d_5f73_7770;

impl Esam {
    fn default_beta() -> f64 {
        0.6
    }

    fn default_gamma() -> f64 {
        0.5
    }

    /// SWP's keep mask `m` (0 or 1, float64 `[n]`) of the 0-based `step` over
    /// `n` coordinates: `m_j = [u_j < beta]`, `u_j` uniform in [0, 1) and a
    /// pure function of `(seed, step, j)`.
    pub fn mask(&self, seed: u64, step: u64, n: i64, device: Device) -> Result<Tensor, LossError> {
        let draws = uniforms(word(seed ^ ESAM_SALT, step), n, device)?;
        Ok(draws.f_lt(self.beta)?.f_to_kind(Kind::Double)?)
    }

    /// `theta + m * (theta~ - theta) / beta` (flat), the rule's perturbation
    /// masked and rescaled; `theta~` itself when `beta = 1`.
    pub(crate) fn masked(
        &self,
        theta: &Tensor,
        theta_tilde: Tensor,
        seed: u64,
        step: u64,
    ) -> Result<Tensor, LossError> {
        if self.beta == 1.0 {
            return Ok(theta_tilde);
        }
        let _guard = tch::no_grad_guard();
        let mask = self
            .mask(seed, step, theta.numel() as i64, theta.device())?
            .f_to_kind(theta.kind())?;
        let scaled = theta_tilde
            .f_sub(theta)?
            .f_mul(&mask)?
            .f_div_scalar(self.beta)?;
        Ok(theta.f_add(&scaled)?)
    }

    /// `ceil(gamma B)` of a batch of `B` rows, at least 1.
    pub fn selected_rows(&self, batch: i64) -> i64 {
        ((self.gamma * batch as f64).ceil() as i64).clamp(1, batch.max(1))
    }

    /// Whether SDS selects rows (`gamma < 1` keeps fewer than the batch).
    pub fn selects(&self) -> bool {
        self.gamma < 1.0
    }

    /// The rows (int64, ascending) of the `ceil(gamma B)` largest entries of
    /// `increase` `[B]`, ties to the lower row.
    pub(crate) fn select(&self, increase: &Tensor) -> Result<Tensor, LossError> {
        let _guard = tch::no_grad_guard();
        let rows = increase.size().first().copied().unwrap_or(0);
        let (_, order) = increase.f_sort_stable(true, 0, true)?;
        let (kept, _) = order
            .f_narrow(0, 0, self.selected_rows(rows))?
            .f_sort(0, false)?;
        Ok(kept)
    }

    pub(super) fn validate(&self, fields: &Fields) -> Result<(), LossError> {
        let unit = |v: f64| v > 0.0 && v <= 1.0;
        fields.check("beta", self.beta, unit(self.beta), "must lie in (0, 1]")?;
        fields.check("gamma", self.gamma, unit(self.gamma), "must lie in (0, 1]")
    }
}

#[cfg(test)]
mod tests {
    use super::super::uniform;
    use super::*;

    #[test]
    fn masks_are_bernoulli_beta_and_a_function_of_seed_step_and_coordinate() {
        let esam = Esam {
            beta: 0.3,
            gamma: 1.0,
        };
        let n = 20_000;
        let mask = |seed, step| {
            Vec::<f64>::try_from(esam.mask(seed, step, n, Device::Cpu).unwrap()).unwrap()
        };
        let first = mask(1, 4);
        let rate = first.iter().sum::<f64>() / n as f64;
        // 4 standard errors of a Bernoulli(0.3) mean over n draws: sqrt(0.21 / n).
        assert!(
            (rate - 0.3).abs() < 4.0 * (0.21f64 / n as f64).sqrt(),
            "{rate}"
        );
        // The device draw is the host's SplitMix64, coordinate by coordinate.
        let key = word(1 ^ ESAM_SALT, 4);
        for (j, &m) in first.iter().enumerate() {
            assert_eq!(m, f64::from(u8::from(uniform(key, j as u64) < 0.3)), "{j}");
        }
        assert_eq!(mask(1, 4), first);
        assert_ne!(mask(1, 5), first);
        assert_ne!(mask(2, 4), first);
    }

    #[test]
    fn selection_keeps_the_ceil_gamma_b_largest_with_ties_to_the_lower_row() {
        let esam = Esam {
            beta: 1.0,
            gamma: 0.5,
        };
        let increase = Tensor::from_slice(&[0.1, 0.5, -0.2, 0.5, 0.3]);
        // ceil(2.5) = 3: 0.5 (row 1), 0.5 (row 3), 0.3 (row 4).
        let rows = Vec::<i64>::try_from(esam.select(&increase).unwrap()).unwrap();
        assert_eq!(rows, [1, 3, 4]);
        let tie = Tensor::from_slice(&[0.2, 0.7, 0.2, 0.2]);
        let rows = Vec::<i64>::try_from(esam.select(&tie).unwrap()).unwrap();
        assert_eq!(rows, [0, 1]);
        assert_eq!(
            Esam {
                beta: 1.0,
                gamma: 0.01
            }
            .selected_rows(4),
            1
        );
        assert_eq!(
            Esam {
                beta: 1.0,
                gamma: 1.0
            }
            .selected_rows(4),
            4
        );
    }
}
