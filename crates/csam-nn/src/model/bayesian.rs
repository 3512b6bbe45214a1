//! Bayesian networks trained by variational inference: which posterior a
//! model learns, its KL term, the annealing of that term, and how its
//! predictions average weight samples.
//!
//! A model with a [`Bayesian`] posterior other than `None` learns Gaussians
//! `q = N(mu, softplus(rho)^2)` against a prior `p = N(m_p, sigma_p^2)`:
//! mean-field, over each weight of its convolutions and linear layers
//! (`m_p = 0`, [`super::flipout`] says how a pass samples them); rank-1,
//! over each factor of a BatchEnsemble's rank-1 fast weights (`m_p = 1`,
//! [`super::rank1`]). Then:
//!
//! - **training**: the objective is the loss on the batch plus
//!   `kl_weight(t) KL(q || p) / N` (the negative evidence lower bound per
//!   example, Blundell et al. 2015, eq. 2), with `N` the training set's size
//!   and `kl_weight` [`kl_weight`]'s linear warm-up. The objective asks the
//!   model for `KL(q || p)` ([`super::TrainingPass::kl_divergence`]) without
//!   knowing its layers: every variational layer registers its parameters
//!   with the model's [`Posterior`], which sums their closed-form KL. Every
//!   train-mode pass of one optimizer step samples the same weights (the
//!   noise is a function of the seed the step sets, [`Posterior::set_seed`]),
//!   so SAM's two passes evaluate one sampled network, at `theta` and at
//!   `theta + e`;
//! - **prediction** (every mode but training): the log of the mean
//!   probabilities over `S` weight samples, [`super::mixture_logits`]
//!   (Ovadia et al. 2019, "Can you trust your model's uncertainty?",
//!   NeurIPS: `mean_s softmax(z_s)`), the samples drawn from fixed streams
//!   so that a model's prediction is a function of its weights.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::Ensemble;
use crate::loss::{Fields, LossError};
use tch::Tensor;

/// The posterior a model learns over its weights.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Bayesian {
    /// Point estimates of the weights (no posterior).
    #[default]
    None,
    /// Mean-field variational inference with the Flipout estimator (Wen,
    /// Vicol, Ba, Tran and Grosse 2018, "Flipout: efficient
    /// pseudo-independent weight perturbations on mini-batches", ICLR), as
    /// Ovadia et al. (2019)'s `svi` method (google-research
    /// `uq_benchmark_2019`, TensorFlow Probability's `Convolution2DFlipout`
    /// and `DenseFlipout` with their default posterior and prior): every
    /// convolution and linear weight is `N(mu, softplus(rho)^2)`, `mu`
    /// starting as the architecture's weight and `rho` from
    /// `N(-3, 0.1^2)` (TFP's `default_mean_field_normal_fn`, so
    /// `softplus(rho)` starts near 0.049), biases deterministic (TFP's
    /// default), prior `N(0, prior_std^2)`.
    MeanField {
        /// The prior's standard deviation `sigma_p > 0` (default 1, TFP's
        /// `default_multivariate_normal_fn`).
        #[serde(default = "Bayesian::default_prior_std")]
        prior_std: f64,
        /// The weight samples `S >= 1` a prediction averages (default 5,
        /// uncertainty-baselines' `num_eval_samples`; Ovadia et al. averaged
        /// 300 on MNIST).
        #[serde(default = "Bayesian::default_samples")]
        samples: i64,
        /// The epochs over which the KL term's weight rises linearly from
        /// `1 / (steps per epoch x epochs)` to 1 ([`kl_weight`]); 0 (the
        /// default, Ovadia et al.'s code) weighs it 1 from the first step.
        #[serde(default)]
        kl_annealing_epochs: usize,
    },
    /// Rank-1 Bayesian neural network (Dusenberry, Jerfel, Wen, Ma, Snoek,
    /// Heller, Lakshminarayanan and Tran 2020, "Efficient and scalable
    /// Bayesian neural nets with rank-1 factors", ICML): a BatchEnsemble
    /// ([`super::Ensemble::BatchEnsemble`], which it needs) whose rank-1
    /// factors are random, the shared weights `W` point estimates. Member
    /// `m`'s layer is `W * (s r^T)` with `r ~ N(mu_r_m, softplus(rho_r_m)^2)`
    /// and `s` likewise, one sample per example ([`super::rank1`]): the
    /// posterior a mixture of `M` Gaussians, one per member; each factor's
    /// prior is `N(1, prior_std^2)` (uncertainty-baselines'
    /// `baselines/cifar/rank1_bnn.py`, `prior_mean = 1`). The means start
    /// as BatchEnsemble's fast weights (its `random_sign_init`, default
    /// `N(1, 0.5^2)`; `rank1_bnn.py` draws random signs, `random_sign_init
    /// = 0.5`), `rho` from `N(ln(expm1(sqrt(p / (1 - p)))), 0.1^2)` with
    /// `p = 10^-3` ([`rank1_rho_init_mean`]). Defaults as that script: prior standard
    /// deviation 0.1 (`prior_stddev`), 1 prediction sample
    /// (`num_eval_samples`); its KL annealing over 200 of 250 epochs is
    /// `kl_annealing_epochs = 200`, here 0 by default as for mean-field.
    Rank1 {
        /// The factors' prior standard deviation `sigma_p > 0` (default
        /// 0.1, `prior_stddev` of `rank1_bnn.py`).
        #[serde(default = "Bayesian::default_rank1_prior_std")]
        prior_std: f64,
        /// The factor samples `S >= 1` a prediction averages over, each
        /// of the `M` members' (default 1, `num_eval_samples` of
        /// `rank1_bnn.py`).
        #[serde(default = "Bayesian::default_rank1_samples")]
        samples: i64,
        /// As [`Bayesian::MeanField`]'s (`rank1_bnn.py`: 200 of its 250
        /// epochs; 0 by default here).
        #[serde(default)]
        kl_annealing_epochs: usize,
    },
}

/// How `rho` starts: `N(RHO_INIT_MEAN, RHO_INIT_STD^2)`, TFP's
/// `untransformed_scale_initializer`.
pub(crate) const RHO_INIT_MEAN: f64 = -3.0;
/// See [`RHO_INIT_MEAN`]; also the standard deviation of rank-1 factors'
/// `rho` (uncertainty-baselines' `make_initializer('trainable_normal', ..)`,
/// `TruncatedNormal(stddev = 0.1)`, here untruncated).
pub(crate) const RHO_INIT_STD: f64 = 0.1;

/// The mean of a rank-1 factor's starting `rho`, `N(mean, RHO_INIT_STD^2)`:
/// `ln(expm1(sqrt(p / (1 - p))))`, `p = 10^-3` (uncertainty-baselines'
/// `models/rank1_bnn_utils.py`, `make_initializer('trainable_normal', ..)`
/// with `rank1_bnn.py`'s `dropout_rate = 1e-3`): `softplus(rho)` starts
/// near `sqrt(p / (1 - p)) = 0.0316`, the standard deviation of Gaussian
/// dropout of rate `p`.
pub(crate) fn rank1_rho_init_mean() -> f64 {
    let p = RANK1_INIT_DROPOUT_RATE;
    (p / (1.0 - p)).sqrt().exp_m1().ln()
}

/// See [`rank1_rho_init_mean`].
const RANK1_INIT_DROPOUT_RATE: f64 = 1e-3;

/// The prior mean of every rank-1 factor (`prior_mean` of
/// uncertainty-baselines' `rank1_bnn.py`): a factor of 1 leaves `W` as it is.
pub(crate) const RANK1_PRIOR_MEAN: f64 = 1.0;

impl Bayesian {
    fn default_prior_std() -> f64 {
        1.0
    }

    fn default_samples() -> i64 {
        5
    }

    fn default_rank1_prior_std() -> f64 {
        0.1
    }

    fn default_rank1_samples() -> i64 {
        1
    }

    /// Mean-field VI with Flipout at its defaults (prior `N(0, 1)`, 5
    /// prediction samples, no annealing).
    pub fn mean_field() -> Bayesian {
        Bayesian::MeanField {
            prior_std: Bayesian::default_prior_std(),
            samples: Bayesian::default_samples(),
            kl_annealing_epochs: 0,
        }
    }

    /// The rank-1 BNN at its defaults (prior `N(1, 0.1^2)`, 1 prediction
    /// sample per member, no annealing).
    pub fn rank1() -> Bayesian {
        Bayesian::Rank1 {
            prior_std: Bayesian::default_rank1_prior_std(),
            samples: Bayesian::default_rank1_samples(),
            kl_annealing_epochs: 0,
        }
    }

    /// The name of the branch (`none`, `mean-field`, `rank1`).
    pub fn name(&self) -> &'static str {
        match self {
            Bayesian::None => "none",
            Bayesian::MeanField { .. } => "mean-field",
            Bayesian::Rank1 { .. } => "rank1",
        }
    }

    /// Why the posterior cannot apply to a network of `ensemble`'s members,
    /// if it cannot: mean-field is over one network's weights, rank-1 over a
    /// BatchEnsemble's fast weights.
    pub fn ensemble_conflict(&self, ensemble: &Ensemble) -> Option<String> {
        match (self, ensemble) {
            (Bayesian::None, _)
            | (Bayesian::MeanField { .. }, Ensemble::Single)
            | (Bayesian::Rank1 { .. }, Ensemble::BatchEnsemble { .. }) => None,
            (Bayesian::MeanField { .. }, _) => Some(format!(
                "is a posterior over one network's weights; ensemble {} cannot apply to it",
                ensemble.name()
            )),
            (Bayesian::Rank1 { .. }, _) => Some(format!(
                "is a posterior over BatchEnsemble's rank-1 factors: it needs ensemble \
                 batch-ensemble, not {}",
                ensemble.name()
            )),
        }
    }

    /// Whether the weights are point estimates.
    pub fn is_none(&self) -> bool {
        *self == Bayesian::None
    }

    /// The epochs of the KL term's warm-up (0 without a posterior).
    pub fn kl_annealing_epochs(&self) -> usize {
        match *self {
            Bayesian::None => 0,
            Bayesian::MeanField {
                kl_annealing_epochs,
                ..
            }
            | Bayesian::Rank1 {
                kl_annealing_epochs,
                ..
            } => kl_annealing_epochs,
        }
    }

    /// Refuses parameters outside the method's definition.
    pub fn validate(&self) -> Result<(), LossError> {
        let (Bayesian::MeanField {
            prior_std, samples, ..
        }
        | Bayesian::Rank1 {
            prior_std, samples, ..
        }) = *self
        else {
            return Ok(());
        };
        let fields = Fields(self.name());
        let positive = prior_std.is_finite() && prior_std > 0.0;
        fields.check("prior_std", prior_std, positive, "must be finite and > 0")?;
        fields.check(
            "samples",
            samples as f64,
            samples >= 1,
            "must be at least 1",
        )
    }
}

/// The weight of the KL term at the 0-based optimizer step `step` of a
/// warm-up over `annealing_steps` steps: `min(1, (step + 1) /
/// annealing_steps)`, uncertainty-baselines' KL annealing
/// (`baselines/cifar/variational_inference.py`, after Bowman et al. 2016);
/// 1 throughout when `annealing_steps` is 0 (Ovadia et al.'s code, which
/// adds `KL / N` to every step's loss).
pub fn kl_weight(step: u64, annealing_steps: u64) -> f64 {
    if annealing_steps == 0 {
        return 1.0;
    }
    ((step + 1) as f64 / annealing_steps as f64).min(1.0)
}

/// `sum KL(N(mu, softplus(rho)^2) || N(prior_mean, prior_std^2))` over the
/// elements: `ln(sigma_p / sigma) + (sigma^2 + (mu - m_p)^2) / (2 sigma_p^2)
/// - 1/2` each, a scalar of `mu`'s kind.
pub fn gaussian_kl(mu: &Tensor, rho: &Tensor, prior_mean: f64, prior_std: f64) -> Tensor {
    let sigma = rho.softplus();
    let variance_ratio = (sigma.square() + (mu - prior_mean).square()) / (2.0 * prior_std.powi(2));
    (variance_ratio - sigma.log() + (prior_std.ln() - 0.5)).sum(mu.kind())
}

/// One Gaussian factor of a posterior: its mean and untransformed scale
/// (variables of the model) and the prior's mean.
#[derive(Debug)]
struct Factor {
    mu: Tensor,
    rho: Tensor,
    prior_mean: f64,
}

/// A model's variational posterior: the factors its layers registered, the
/// prior's scale, and the seed the layers draw this pass's noise from.
#[derive(Debug)]
pub(crate) struct Posterior {
    prior_std: f64,
    samples: i64,
    seed: AtomicU64,
    factors: Mutex<Vec<Factor>>,
}

/// The seed whose noise prediction sample `sample` (0-based) draws: fixed,
/// so that a model's prediction is a function of its weights and inputs.
pub fn prediction_seed(sample: u64) -> u64 {
    0x7072_6564_6963_7400 + sample
}

impl Posterior {
    /// The posterior `bayesian` asks for; `None` for point estimates.
    pub(crate) fn of(bayesian: &Bayesian) -> Option<Posterior> {
        match *bayesian {
            Bayesian::None => None,
            Bayesian::MeanField {
                prior_std, samples, ..
            }
            | Bayesian::Rank1 {
                prior_std, samples, ..
            } => Some(Posterior {
                prior_std,
                samples,
                seed: AtomicU64::new(0),
                factors: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Adds a factor `N(mu, softplus(rho)^2)` with prior mean `prior_mean`.
    pub(crate) fn register(&self, mu: &Tensor, rho: &Tensor, prior_mean: f64) {
        let mut factors = self.factors.lock().unwrap_or_else(|e| e.into_inner());
        factors.push(Factor {
            mu: mu.shallow_clone(),
            rho: rho.shallow_clone(),
            prior_mean,
        });
    }

    /// `KL(q || p)` summed over every registered factor; `None` when no
    /// layer registered one.
    pub(crate) fn kl(&self) -> Option<Tensor> {
        let factors = self.factors.lock().unwrap_or_else(|e| e.into_inner());
        factors
            .iter()
            .map(|f| gaussian_kl(&f.mu, &f.rho, f.prior_mean, self.prior_std))
            .reduce(|a, b| a + b)
    }

    /// The seed this pass's noise is drawn from.
    pub(crate) fn seed(&self) -> u64 {
        self.seed.load(Ordering::Relaxed)
    }

    /// Draws the next passes' noise from `seed`.
    pub(crate) fn set_seed(&self, seed: u64) {
        self.seed.store(seed, Ordering::Relaxed);
    }

    /// `logits()` `[B, K]` for each of the `S` prediction samples, stacked
    /// `[S, B, K]`; the training seed is kept.
    pub(crate) fn predictive_samples(&self, logits: impl Fn() -> Tensor) -> Tensor {
        let kept = self.seed();
        let samples: Vec<Tensor> = (0..self.samples as u64)
            .map(|s| {
                self.set_seed(prediction_seed(s));
                logits()
            })
            .collect();
        self.set_seed(kept);
        Tensor::stack(&samples, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kl_weight_rises_linearly_then_stays_at_one() {
        assert_eq!(kl_weight(0, 0), 1.0);
        assert_eq!(kl_weight(7, 0), 1.0);
        assert_eq!(kl_weight(0, 4), 0.25);
        assert_eq!(kl_weight(2, 4), 0.75);
        assert_eq!(kl_weight(3, 4), 1.0);
        assert_eq!(kl_weight(100, 4), 1.0);
    }

    #[test]
    fn kl_of_the_prior_itself_is_zero_and_grows_away_from_it() {
        // softplus(rho) = 2 exactly when rho = ln(e^2 - 1).
        let rho = Tensor::from_slice(&[(2f64.exp() - 1.0).ln()]);
        let mu = Tensor::from_slice(&[0.0f64]);
        let at_prior = f64::try_from(gaussian_kl(&mu, &rho, 0.0, 2.0)).unwrap();
        // Float64 scalars: ~5 roundings of terms <= 0.7 (<= 1.1e-16 each), and
        // sigma's few-ulp error enters only at second order (KL is flat there).
        assert!(at_prior.abs() < 1e-15, "{at_prior}");
        // N(1, 2^2) against N(0, 1): ln(1/2) + (4 + 1)/2 - 1/2 = 2 - ln 2.
        let shifted = f64::try_from(gaussian_kl(&(mu + 1.0), &rho, 0.0, 1.0)).unwrap();
        // ~6 float64 roundings of terms <= 5 (<= 4.4e-16 each): ~3e-15 at most.
        assert!((shifted - (2.0 - 2f64.ln())).abs() < 1e-14, "{shifted}");
    }

    #[test]
    fn validation_refuses_what_the_method_does_not_define() {
        let mf = |prior_std, samples| Bayesian::MeanField {
            prior_std,
            samples,
            kl_annealing_epochs: 0,
        };
        assert!(Bayesian::mean_field().validate().is_ok());
        assert!(Bayesian::None.validate().is_ok());
        assert!(mf(0.0, 5).validate().is_err());
        assert!(mf(f64::NAN, 5).validate().is_err());
        assert!(mf(1.0, 0).validate().is_err());
        let rank1 = |prior_std, samples| Bayesian::Rank1 {
            prior_std,
            samples,
            kl_annealing_epochs: 0,
        };
        assert!(Bayesian::rank1().validate().is_ok());
        assert!(rank1(-0.1, 1).validate().is_err());
        assert!(rank1(f64::INFINITY, 1).validate().is_err());
        assert!(rank1(0.1, 0).validate().is_err());
    }

    #[test]
    fn rank1_needs_batch_ensemble_and_mean_field_one_network() {
        let be = Ensemble::batch_ensemble();
        assert!(Bayesian::rank1().ensemble_conflict(&be).is_none());
        for other in [Ensemble::Single, Ensemble::mimo()] {
            let why = Bayesian::rank1().ensemble_conflict(&other).unwrap();
            assert!(why.contains("needs ensemble batch-ensemble"), "{why}");
        }
        assert!(Bayesian::mean_field()
            .ensemble_conflict(&Ensemble::Single)
            .is_none());
        assert!(Bayesian::mean_field().ensemble_conflict(&be).is_some());
    }

    #[test]
    fn rank1_rho_starts_at_the_scale_of_gaussian_dropout_of_rate_one_in_a_thousand() {
        let sigma = Tensor::from_slice(&[rank1_rho_init_mean()]).softplus();
        let expected = (1e-3f64 / 0.999).sqrt();
        // Float64 ln/expm1/softplus round-trip: a few ulps relative on 0.0316,
        // ~1e-17; 1e-15 leaves 100x room.
        assert!((sigma.double_value(&[0]) - expected).abs() < 1e-15);
    }
}
