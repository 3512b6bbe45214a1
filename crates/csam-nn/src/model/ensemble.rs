//! Several members in one network: which ensemble a model is, and how its
//! members' predictions combine.
//!
//! A model of `M` members runs each batch `[B, ...]` as `M` copies of it
//! stacked member after member (`[M B, ...]`, row `m B + i` is example `i`
//! seen by member `m`), so its output `[M B, K]` reads as per-member logits
//! `z_m` `[M, B, K]`. Then:
//!
//! - **training** ([`super::Outputs::members`]): each member's loss against
//!   the targets of the examples it read, BatchEnsemble's mean over members
//!   `(1 / M) sum_m L(z_m, y)`, MIMO's sum over its members' own shuffles of
//!   the batch `sum_m L(z_m, y_{pi_m})` ([`super::mimo`],
//!   `crate::mixing::TrainBatch::forward`), so any loss, CSAM's second-pass
//!   weighting and SAM's two passes apply to each member unchanged;
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
    /// MIMO, multi-input multi-output (Havasi et al. 2021, "Training
    /// independent subnetworks for robust prediction", ICLR): one plain
    /// network whose input layer reads the `M` members' images concatenated
    /// along channels (`[B, M C, H, W]`, member after member; the MLP's
    /// features likewise) and whose classifier gives `M K` logits, read as
    /// `M` heads `[M, B, K]`. In training member `m` reads its own shuffle
    /// `pi_m` of the batch and its head is trained on those targets, the
    /// objective the sum `sum_m L(z_m, y_{pi_m})` (the authors' code sums
    /// the heads' cross entropies; [`super::mimo`] says how the shuffles
    /// are drawn); in prediction every
    /// input reads the same image and the heads' probabilities are averaged.
    /// Defaults as uncertainty-baselines' CIFAR script
    /// (`baselines/cifar/mimo.py`): 3 members, input repetition 0, batch
    /// repetitions 4.
    Mimo {
        /// The number of members `M >= 1`.
        #[serde(default = "Ensemble::default_mimo_size")]
        size: i64,
        /// The input repetition probability `rho` in `[0, 1]` (Section 3.4
        /// of the paper, uncertainty-baselines'
        /// `input_repetition_probability`): the fraction of the training
        /// rows that every member reads in the same order.
        #[serde(default)]
        input_repetition: f64,
        /// The batch repetitions `r >= 1` (uncertainty-baselines'
        /// `batch_repetitions`): each member reads a shuffle of the batch
        /// repeated `r` times, `r B` rows.
        #[serde(default = "Ensemble::default_batch_repetitions")]
        batch_repetitions: i64,
    },
}

impl Ensemble {
    fn default_size() -> i64 {
        4
    }

    fn default_random_sign_init() -> f64 {
        -0.5
    }

    fn default_mimo_size() -> i64 {
        3
    }

    fn default_batch_repetitions() -> i64 {
        4
    }

    /// BatchEnsemble at its defaults (`M = 4`, fast weights from `N(1, 0.5^2)`).
    pub fn batch_ensemble() -> Ensemble {
        Ensemble::BatchEnsemble {
            size: Ensemble::default_size(),
            random_sign_init: Ensemble::default_random_sign_init(),
        }
    }

    /// MIMO at its defaults (`M = 3`, no input repetition, 4 batch
    /// repetitions).
    pub fn mimo() -> Ensemble {
        Ensemble::Mimo {
            size: Ensemble::default_mimo_size(),
            input_repetition: 0.0,
            batch_repetitions: Ensemble::default_batch_repetitions(),
        }
    }

    /// The name of the branch (`single`, `batch-ensemble`, `mimo`).
    pub fn name(&self) -> &'static str {
        match self {
            Ensemble::Single => "single",
            Ensemble::BatchEnsemble { .. } => "batch-ensemble",
            Ensemble::Mimo { .. } => "mimo",
        }
    }

    /// The number of members: 1 for a single network.
    pub fn members(&self) -> i64 {
        match *self {
            Ensemble::Single => 1,
            Ensemble::BatchEnsemble { size, .. } | Ensemble::Mimo { size, .. } => size,
        }
    }

    /// The rows each member of a training batch of `batch` examples reads,
    /// `[M, r B]` indices into the batch, drawn from `seed`
    /// ([`super::mimo::draw_rows`]); `None` where every member reads the
    /// batch as it is (one network, BatchEnsemble).
    pub fn member_rows(&self, batch: usize, seed: u64) -> Option<Tensor> {
        match *self {
            Ensemble::Mimo {
                size,
                input_repetition,
                batch_repetitions,
            } => {
                let shuffles = super::mimo::Shuffles {
                    members: size as usize,
                    input_repetition,
                    batch_repetitions: batch_repetitions as usize,
                };
                Some(shuffles.draw_rows(batch, seed))
            }
            Ensemble::Single | Ensemble::BatchEnsemble { .. } => None,
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
            Ensemble::Mimo {
                size,
                input_repetition,
                batch_repetitions,
            } => {
                let fields = Fields("mimo");
                fields.check("size", size as f64, size >= 1, "must be at least 1")?;
                fields.check(
                    "input_repetition",
                    input_repetition,
                    (0.0..=1.0).contains(&input_repetition),
                    "must be a probability in [0, 1]",
                )?;
                fields.check(
                    "batch_repetitions",
                    batch_repetitions as f64,
                    batch_repetitions >= 1,
                    "must be at least 1",
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
        // Float64: ~8 roundings (log_softmax, logsumexp, - ln 2) of values <= 1.4,
        // <= 1e-15 in all, within the 1e-15 + 1e-15 |expected| allowed.
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
        let mimo = |size, input_repetition, batch_repetitions| Ensemble::Mimo {
            size,
            input_repetition,
            batch_repetitions,
        };
        assert!(Ensemble::mimo().validate().is_ok());
        assert!(mimo(1, 1.0, 1).validate().is_ok());
        assert!(mimo(0, 0.0, 4).validate().is_err());
        assert!(mimo(3, -0.1, 4).validate().is_err());
        assert!(mimo(3, f64::NAN, 4).validate().is_err());
        assert!(mimo(3, 0.5, 0).validate().is_err());
    }
}
