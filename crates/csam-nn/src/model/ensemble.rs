//! Several members in one network: which ensemble a model is, and how its
//! members' predictions combine.
//!
//! A model of `M` members runs each batch `[B, ...]` as `M` copies of it
//! stacked member after member (`[M B, ...]`, row `m B + i` is example `i`
//! seen by member `m`), so its output `[M B, K]` reads as per-member logits
//! `z_m` `[M, B, K]`. Then:
//!
//! - **training** ([`super::Outputs::members`]): the objective is the mean
//!   over members of each member's loss against the batch's targets,
//!   `(1 / M) sum_m L(z_m, y)` (`crate::mixing::TrainBatch::forward`), so
//!   any loss, CSAM's second-pass weighting and SAM's two passes apply to
//!   each member unchanged;
//! - **prediction** (every [`super::Mode`], and the training logits the
//!   step's statistics read): the model's logits are the log of the
//!   members' mean probabilities, [`mixture_logits`], so whatever reads
//!   logits downstream (metrics, temperature scaling, `csam eval`, ensembles
//!   of runs) averages the members in probability space without knowing
//!   about them.

use crate::loss::{Fields, LossError};
use tch::Tensor;

/// Whether a model is one network or an ensemble of members inside one.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Ensemble {
    /// One network.
    #[default]
    Single,
    /// BatchEnsemble (Wen, Tran and Ba 2020, "BatchEnsemble: an alternative
    /// approach to efficient ensemble and lifelong learning", ICLR): every
    /// convolution and linear layer holds one shared weight `W` and, per
    /// member `m`, rank-1 fast weights `r_m` (input side) and `s_m` (output
    /// side) and its own bias `b_m`: `y_m = ((x * r_m) W) * s_m + b_m`, the
    /// layer `W * (s_m r_m^T)` for member `m` (Section 3 of the paper).
    /// BatchNorm is shared by the members, as in the authors' CIFAR models
    /// (google/uncertainty-baselines, `wide_resnet_batchensemble.py`).
    /// Defaults as uncertainty-baselines' CIFAR script
    /// (`baselines/cifar/batchensemble.py`): 4 members, fast weights drawn
    /// from `N(1, 0.5^2)` (`random_sign_init = -0.5`).
    BatchEnsemble {
        /// The number of members `M >= 1`.
        #[serde(default = "Ensemble::default_size")]
        size: i64,
        /// How the fast weights start, uncertainty-baselines' convention
        /// (`make_sign_initializer`): `v > 0` draws random signs, `+1` with
        /// probability `v` and `-1` otherwise (edward2's `RandomSign(v)`);
        /// `v <= 0` draws `N(1, v^2)` (so `v = 0` and `v = 1` start every
        /// fast weight at 1).
        #[serde(default = "Ensemble::default_random_sign_init")]
        random_sign_init: f64,
    },
}

impl Ensemble {
    fn default_size() -> i64 {
        4
    }

    fn default_random_sign_init() -> f64 {
        -0.5
    }

    /// BatchEnsemble at its defaults (`M = 4`, fast weights from `N(1, 0.5^2)`).
    pub fn batch_ensemble() -> Ensemble {
        Ensemble::BatchEnsemble {
            size: Ensemble::default_size(),
            random_sign_init: Ensemble::default_random_sign_init(),
        }
    }

    /// The name of the branch (`single`, `batch-ensemble`).
    pub fn name(&self) -> &'static str {
        match self {
            Ensemble::Single => "single",
            Ensemble::BatchEnsemble { .. } => "batch-ensemble",
        }
    }

    /// The number of members: 1 for a single network.
    pub fn members(&self) -> i64 {
        match *self {
            Ensemble::Single => 1,
            Ensemble::BatchEnsemble { size, .. } => size,
        }
    }

    /// Whether it is one network.
    pub fn is_single(&self) -> bool {
        *self == Ensemble::Single
    }

    /// Refuses parameters outside the method's definition.
    pub fn validate(&self) -> Result<(), LossError> {
        match *self {
            Ensemble::Single => Ok(()),
            Ensemble::BatchEnsemble {
                size,
                random_sign_init,
            } => {
                let fields = Fields("batch-ensemble");
                fields.check("size", size as f64, size >= 1, "must be at least 1")?;
                let sign = random_sign_init.is_finite() && random_sign_init <= 1.0;
                fields.check(
                    "random_sign_init",
                    random_sign_init,
                    sign,
                    "must be a probability of +1 in (0, 1], or minus a standard deviation (<= 0)",
                )
            }
        }
    }
}

/// The logits of the members' mean prediction,
/// `log((1 / M) sum_m softmax(z_m)) = logsumexp_m log_softmax(z_m) - log M`
/// for per-member logits `z` `[M, B, K]`, `[B, K]`; one member's logits as
/// they are (the same probabilities, and exactly the single network's
/// logits).
pub fn mixture_logits(members: &Tensor) -> Tensor {
    let m = members.size()[0];
    if m == 1 {
        return members.get(0);
    }
    members
        .log_softmax(-1, None)
        .logsumexp([0i64].as_slice(), false)
        - (m as f64).ln()
}

/// `xs` `[B, ...]` stacked `M` times, member after member: `[M B, ...]`
/// (uncertainty-baselines' `tf.tile(images, [M, 1, 1, 1])`); `xs` itself
/// for one member.
pub(crate) fn tile_members(xs: &Tensor, members: i64) -> Tensor {
    if members == 1 {
        return xs.shallow_clone();
    }
    let mut repeats = vec![1i64; xs.dim()];
    repeats[0] = members;
    xs.repeat(repeats.as_slice())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixture_of_two_members_by_hand() {
        // Member 1 gives (1/2, 1/2), member 2 (3/4, 1/4): the mixture is
        // (5/8, 3/8); averaging the logits would give softmax((ln 3 / 2, 0)).
        let z = Tensor::from_slice(&[0.0f64, 0.0, 3f64.ln(), 0.0]).reshape([2, 1, 2]);
        let logits = mixture_logits(&z);
        let expected = Tensor::from_slice(&[0.625f64.ln(), 0.375f64.ln()]).reshape([1, 2]);
        assert!(logits.allclose(&expected, 1e-15, 1e-15, false), "{logits}");
    }

    #[test]
    fn one_member_keeps_its_logits() {
        let z = Tensor::from_slice(&[2.0f64, -1.0, 0.5]).reshape([1, 1, 3]);
        assert!(mixture_logits(&z).equal(&z.get(0)));
    }

    #[test]
    fn tiling_stacks_the_batch_member_after_member() {
        let xs = Tensor::from_slice(&[1i64, 2, 3]).reshape([3, 1]);
        let tiled = tile_members(&xs, 2).reshape([-1]);
        assert_eq!(Vec::<i64>::try_from(&tiled).unwrap(), [1, 2, 3, 1, 2, 3]);
    }

    #[test]
    fn validation_refuses_what_the_method_does_not_define() {
        let be = |size, random_sign_init| Ensemble::BatchEnsemble {
            size,
            random_sign_init,
        };
        assert!(Ensemble::batch_ensemble().validate().is_ok());
        assert!(be(1, 1.0).validate().is_ok());
        assert!(be(0, -0.5).validate().is_err());
        assert!(be(4, 1.01).validate().is_err());
        assert!(be(4, f64::NAN).validate().is_err());
    }
}
