//! Momentum-SAM (Becker, Altrock and Fischer 2024, "Momentum-SAM:
//! Sharpness Aware Minimization without Computational Overhead",
//! arXiv:2401.12033; the authors' code: MarlonBecker/MSAM,
//! `optimizer/msam.py`): the perturbation follows the base optimiser's
//! momentum instead of a first pass's gradient, so a step runs one forward
//! and backward pass, at `theta~ = theta - rho v / (||v|| + 1e-12)` with `v`
//! SGD's momentum buffer, and takes SGD's step with that pass's gradient.
//! The second-pass loss is the rule's: CSAM's reweighting composes as it
//! does with SAM's ascent.
//!
//! What the step follows from the authors' code:
//! - the direction is minus the momentum buffer (`b = mu b + g + wd theta`),
//!   normalised by its global L2 norm plus 1e-12; on the first step the
//!   buffer is zero, so is the perturbation, and the step is SGD's;
//! - the base optimiser's step is taken at `theta~` (its weight decay reads
//!   `theta~`, as the authors' in-place update does), then the perturbation
//!   is taken back: `theta' = theta~ - lr b' + rho v / ||v||`.
//!
//! The authors keep the weights at `theta~` between steps and move them back
//! before evaluating; csam keeps them at `theta`, so checkpoints and
//! evaluations read `theta` without that call. BatchNorm's running
//! statistics move with the one pass, at `theta~`: the authors recompute
//! them with a forward epoch at `theta` after training, csam does not.
//!
//! [`MomentumDirection::Ascent`] is csam's own variant, with no published
//! source: `theta~ = theta + rho v / ||v||`, SAM's ascent with the momentum
//! (a running sum of past gradients) standing in for the batch's gradient,
//! so SAM's and CSAM's second pass at no first pass. RESULTS.md section 5
//! measures both directions.

use crate::loss::LossError;
use tch::Tensor;

/// Momentum-SAM's perturbation. Its radius is the rule's `rho` (the authors
/// use 3 on CIFAR with SGD at lr 0.5; their class's default is 0.3), its
/// momentum the base optimiser's.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Msam {
    /// Which way along the momentum the weights are perturbed.
    #[serde(default)]
    pub direction: MomentumDirection,
}

/// The sign of Momentum-SAM's perturbation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MomentumDirection {
    /// `-rho v / ||v||`, where SGD is heading (the authors' rule).
    #[default]
    Descent,
    /// `+rho v / ||v||`, against it: SAM's ascent along the momentum.
    Ascent,
}

impl MomentumDirection {
    /// The direction's name, as the run specification writes it.
    pub fn name(self) -> &'static str {
        match self {
            MomentumDirection::Descent => "descent",
            MomentumDirection::Ascent => "ascent",
        }
    }
}

/// The guard of the momentum's norm (the authors' `ascent_norm + 1e-12`).
const NORM_EPS: f64 = 1e-12;

impl Msam {
    /// The perturbation `-+ rho v / (||v||_2 + 1e-12)` of the flat momentum
    /// buffer `v` (a new tensor: the base optimiser's step changes `v` in
    /// place before the step takes the perturbation back).
    pub(crate) fn perturbation(&self, momentum: &Tensor, rho: f64) -> Result<Tensor, LossError> {
        let _guard = tch::no_grad_guard();
        let signed = match self.direction {
            MomentumDirection::Descent => -rho,
            MomentumDirection::Ascent => rho,
        };
        let norm = momentum.f_norm()?.f_add_scalar(NORM_EPS)?;
        Ok(momentum.f_mul(&norm.f_reciprocal()?.f_mul_scalar(signed)?)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind};

    #[test]
    fn the_perturbation_is_rho_times_the_unit_momentum_signed_and_zero_without_momentum() {
        let v = Tensor::from_slice(&[3.0f64, -4.0]);
        for (direction, sign) in [
            (MomentumDirection::Descent, -1.0),
            (MomentumDirection::Ascent, 1.0),
        ] {
            let e = Msam { direction }.perturbation(&v, 2.0).unwrap();
            // ||v|| = 5: e = -+2 (0.6, -0.8) up to the 1e-12 guard (a relative
            // 2e-13 change; float64's rounding of these few operations is
            // ~1e-16).
            let got = Vec::<f64>::try_from(&e).unwrap();
            for (g, x) in got.iter().zip([1.2, -1.6]) {
                assert!((g - sign * x).abs() < 1e-12, "{direction:?}: {got:?}");
            }
        }
        let zero = Tensor::zeros([4], (Kind::Double, Device::Cpu));
        let e = Msam::default().perturbation(&zero, 2.0).unwrap();
        assert_eq!(Vec::<f64>::try_from(&e).unwrap(), [0.0; 4]);
    }
}
