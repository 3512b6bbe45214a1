//! LookSAM (Liu, Mai, Chen, Hsieh and You 2022, "Towards Efficient and
//! Scalable Sharpness-Aware Minimization", CVPR, Algorithm 1): the full SAM
//! step every `k` steps, which also keeps the part of the SAM gradient
//! orthogonal to the plain one; in between, that part is added back to the
//! plain gradient at the current gradient's scale.

use crate::loss::{Fields, LossError};
use tch::Tensor;

/// Added to norms in denominators (as the perturbation rules).
const NORM_EPS: f64 = 1e-12;

/// On steps `t` with `t mod k = 0`, the SAM gradient `g_s` (the second pass's,
/// CSAM's loss included) and the plain gradient `g` give
/// `g_v = g_s - ||g_s|| cos(theta) g / ||g||`, `cos(theta) = g.g_s / (||g|| ||g_s||)`,
/// i.e. `g_v = g_s - (g.g_s / ||g||^2) g`, and the update uses `g_s`; on the
/// other steps only `g` is computed and the update uses
/// `g + alpha (||g|| / ||g_v||) g_v`. Norms are global over all trainable
/// weights (the paper's LookSAM; its layer-wise variant is for LAMB).
/// Defaults `k = 5`, `alpha = 0.7`, the paper's. `g_v` is carried from step
/// to step and checkpointed.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LookSam {
    /// Steps between two SAM steps, >= 1 (1 is SAM).
    #[serde(default = "LookSam::default_k")]
    pub k: u64,
    /// Weight alpha >= 0 of the reused direction.
    #[serde(default = "LookSam::default_alpha")]
    pub alpha: f64,
}

impl Default for LookSam {
    fn default() -> Self {
        Self {
            k: Self::default_k(),
            alpha: Self::default_alpha(),
        }
    }
}

impl LookSam {
    fn default_k() -> u64 {
        5
    }

    fn default_alpha() -> f64 {
        0.7
    }

    /// Whether the 0-based `step` is a full SAM step.
    pub fn is_sam_step(&self, step: u64) -> bool {
        step.is_multiple_of(self.k)
    }

    /// `g_v`, the part of the SAM gradient `g_s` orthogonal to `g` (flat).
    pub fn orthogonal(grad: &Tensor, sam_grad: &Tensor) -> Tensor {
        let _guard = tch::no_grad_guard();
        let coefficient = grad.dot(sam_grad) / (grad.dot(grad) + NORM_EPS);
        sam_grad - grad * coefficient
    }

    /// The update of a step between two SAM steps,
    /// `g + alpha (||g|| / ||g_v||) g_v` (flat).
    pub fn reused(&self, grad: &Tensor, direction: &Tensor) -> Tensor {
        let _guard = tch::no_grad_guard();
        let scale = grad.norm() * self.alpha / (direction.norm() + NORM_EPS);
        grad + direction * scale
    }

    pub(super) fn validate(&self, fields: &Fields) -> Result<(), LossError> {
        fields.check(
            "k",
            self.k as f64,
            self.k >= 1,
            "must be >= 1 (steps between SAM steps)",
        )?;
        fields.non_negative("alpha", self.alpha)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Asserts `t` equals `expected` up to the 1e-12 in the denominators.
    /// Float64 on 2-vectors with entries <= 6.5: round-off ~1e-15, the 1e-12
    /// terms shift the result by ~1e-12; 1e-10 is 100x above both.
    fn assert_close(t: &Tensor, expected: [f64; 2]) {
        let got = Vec::<f64>::try_from(t).unwrap();
        let far = got.iter().zip(expected).any(|(a, b)| (a - b).abs() > 1e-10);
        assert!(!far, "{got:?} != {expected:?}");
    }

    #[test]
    fn g_v_is_the_sam_gradient_orthogonal_to_g_and_is_reused_at_the_scale_of_g() {
        let g = Tensor::from_slice(&[1.0f64, 0.0]);
        let g_s = Tensor::from_slice(&[1.0f64, 1.0]);
        assert_close(&LookSam::orthogonal(&g, &g_s), [0.0, 1.0]);
        // g = (3, 4), ||g|| = 5; g_v = (0, 2): g + 0.5 (5 / 2) g_v.
        let look = LookSam { k: 5, alpha: 0.5 };
        let reused = look.reused(
            &Tensor::from_slice(&[3.0f64, 4.0]),
            &Tensor::from_slice(&[0.0f64, 2.0]),
        );
        assert_close(&reused, [3.0, 6.5]);
        assert!((0..12).filter(|&t| look.is_sam_step(t)).eq([0, 5, 10]));
    }
}
