//! Bayesian networks trained by variational inference: which posterior a
//! model learns, its KL term, the annealing of that term, and how its
//! predictions average weight samples.
//!
//! A model with a [`Bayesian`] posterior other than `None` learns Gaussians
//! `q = N(mu, sigma^2)`, `sigma = softplus(rho) + 1e-7` ([`posterior_std`]),
//! against a prior `p = N(m_p, sigma_p^2)`: mean-field, over each weight of
//! its convolutions and linear layers (`m_p = 0`, or `m_p = mu` with a tied
//! prior mean; [`super::flipout`] says how a pass samples them); rank-1,
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
use tch::nn::Init;
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
    /// convolution and linear weight is `N(mu, sigma^2)` ([`posterior_std`]),
    /// `mu` starting as the architecture's weight and `rho` from
    /// `N(softplus^-1(stddev_init), 0.1^2)`, biases deterministic (TFP's
    /// default), prior `N(0, prior_std^2)` or, with `tied_prior_mean`,
    /// `N(mu, prior_std^2)`. The defaults are TFP's (`rho` from
    /// `N(-3, 0.1^2)`, `default_mean_field_normal_fn`); uncertainty-baselines'
    /// CIFAR script (`baselines/cifar/variational_inference.py`, edward2's
    /// `TrainableHeNormal` and `NormalKLDivergenceWithTiedMean`) sets
    /// `stddev_init = 1e-3`, `prior_std = 0.1` and ties the prior's mean.
    MeanField {
        /// The prior's standard deviation `sigma_p > 0` (default 1, TFP's
        /// `default_multivariate_normal_fn`).
        #[serde(default = "Bayesian::default_prior_std")]
        prior_std: f64,
        /// The prior's mean is the posterior's, `N(mu, sigma_p^2)` (edward2's
        /// `NormalKLDivergenceWithTiedMean`): the KL term then constrains
        /// only `sigma`, not the weights' means; false (the default, TFP's
        /// prior) centres the prior at 0.
        #[serde(default)]
        tied_prior_mean: bool,
        /// Where `sigma` starts: `rho` is drawn from
        /// `N(ln(expm1(stddev_init)), 0.1^2)` (edward2's `stddev_init`
        /// convention), so `sigma` starts near `stddev_init`. Default
        /// `softplus(-3) = 0.0486`, TFP's `rho` from `N(-3, 0.1^2)`.
        #[serde(default = "Bayesian::default_stddev_init")]
        stddev_init: f64,
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
    /// `m`'s layer is `W * (s r^T)` with `r ~ N(mu_r_m, sigma_r_m^2)`,
    /// `sigma = softplus(rho) + 1e-7` ([`posterior_std`]), and `s` likewise, one sample per example ([`super::rank1`]): the
    /// posterior a mixture of `M` Gaussians, one per member; each factor's
    /// prior is `N(1, prior_std^2)` (uncertainty-baselines'
    /// `baselines/cifar/rank1_bnn.py`, `prior_mean = 1`). The means start
    /// as BatchEnsemble's fast weights (its `random_sign_init`, default
    /// `N(1, 0.5^2)`; `rank1_bnn.py` draws random signs, `random_sign_init
    /// = 0.5`), `rho` from `N(ln(expm1(sqrt(p / (1 - p)))), 0.1^2)` with
    /// `p = 10^-3` ([`rank1_stddev_init`]). Defaults as that script: prior
    /// standard deviation 0.1 (`prior_stddev`), 1 prediction sample
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

/// The standard deviation of the normal `rho` starts from, about the
/// mean its posterior asks for ([`Posterior::rho_init`]): TFP's
/// `untransformed_scale_initializer` and edward2's
/// `TruncatedNormal(stddev = 0.1)` in uncertainty-baselines' models (here
/// untruncated).
const RHO_INIT_STD: f64 = 0.1;

/// What every posterior scale adds to `softplus(rho)`: edward2's `softplus`
/// constraint (`constraints.Softplus`, `softplus(w) + epsilon` with Keras'
/// `backend.epsilon()`, 1e-7), which the authors' rank-1 BNN and VI apply to
/// every `stddev`; it keeps `sigma` and `ln sigma` finite however negative
/// `rho` grows.
pub const SIGMA_EPSILON: f64 = 1e-7;

/// `sigma = softplus(rho) + SIGMA_EPSILON`, the standard deviation of a
/// posterior factor of scale parameter `rho`.
pub fn posterior_std(rho: &Tensor) -> Tensor {
    rho.softplus() + SIGMA_EPSILON
}

/// `softplus^-1(sigma) = ln(expm1(sigma))`: the `rho` whose softplus is
/// `sigma` (edward2's `np.log(np.expm1(stddev_init))`); not finite unless
/// `0 < sigma < 709.78`.
fn softplus_inverse(sigma: f64) -> f64 {
    sigma.exp_m1().ln()
}

/// The standard deviation a rank-1 factor starts near, `sqrt(p / (1 - p))`
/// with `p = 10^-3`, that of Gaussian dropout of rate `p`
/// (uncertainty-baselines' `models/rank1_bnn_utils.py`,
/// `make_initializer('trainable_normal', ..)` with `rank1_bnn.py`'s
/// `dropout_rate = 1e-3`): 0.0316.
pub(crate) fn rank1_stddev_init() -> f64 {
    let p = RANK1_INIT_DROPOUT_RATE;
    (p / (1.0 - p)).sqrt()
}

/// See [`rank1_stddev_init`].
const RANK1_INIT_DROPOUT_RATE: f64 = 1e-3;

/// The prior mean of every rank-1 factor (`prior_mean` of
/// uncertainty-baselines' `rank1_bnn.py`): a factor of 1 leaves `W` as it is.
const RANK1_PRIOR_MEAN: f64 = 1.0;

impl Bayesian {
    fn default_prior_std() -> f64 {
        1.0
    }

    fn default_samples() -> i64 {
        5
    }

    fn default_stddev_init() -> f64 {
        (-3f64).exp().ln_1p()
    }

    fn default_rank1_prior_std() -> f64 {
        0.1
    }

    fn default_rank1_samples() -> i64 {
        1
    }

    /// Mean-field VI with Flipout at its defaults (prior `N(0, 1)`, `rho`
    /// from `N(-3, 0.1^2)`, 5 prediction samples, no annealing).
    pub fn mean_field() -> Bayesian {
        Bayesian::MeanField {
            prior_std: Bayesian::default_prior_std(),
            tied_prior_mean: false,
            stddev_init: Bayesian::default_stddev_init(),
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
        )?;
        match *self {
            Bayesian::MeanField { stddev_init, .. } => fields.check(
                "stddev_init",
                stddev_init,
                stddev_init > 0.0 && stddev_init <= 700.0,
                "must be > 0 and at most 700 (ln(expm1(stddev_init)) overflows above 709.78)",
            ),
            _ => Ok(()),
        }
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

/// `sum KL(N(mu, sigma^2) || N(m_p, prior_std^2))` over the elements,
/// `sigma` [`posterior_std`]`(rho)`: `ln(sigma_p / sigma) + (sigma^2 +
/// (mu - m_p)^2) / (2 sigma_p^2) - 1/2` each, a scalar of `mu`'s kind.
pub fn gaussian_kl(mu: &Tensor, rho: &Tensor, prior_mean: PriorMean, prior_std: f64) -> Tensor {
    let sigma = posterior_std(rho);
    let spread = match prior_mean {
        PriorMean::Fixed(mean) => sigma.square() + (mu - mean).square(),
        PriorMean::Tied => sigma.square(),
    };
    (spread / (2.0 * prior_std.powi(2)) - sigma.log() + (prior_std.ln() - 0.5)).sum(mu.kind())
}

/// The mean of a factor's prior.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PriorMean {
    /// This value for every element (0 for mean-field's weights, 1 for
    /// rank-1 factors).
    Fixed(f64),
    /// The posterior's own mean `mu`, so `(mu - m_p)^2 = 0` and the KL
    /// term leaves `mu` free (edward2's `NormalKLDivergenceWithTiedMean`).
    Tied,
}

/// One Gaussian factor of a posterior: its mean and untransformed scale
/// (variables of the model) and the prior's mean.
#[derive(Debug)]
struct Factor {
    mu: Tensor,
    rho: Tensor,
    prior_mean: PriorMean,
}

/// A model's variational posterior: the factors its layers registered, the
/// prior's scale and mean, where `rho` starts, and the seed the layers draw
/// this pass's noise from.
#[derive(Debug)]
pub(crate) struct Posterior {
    prior_std: f64,
    prior_mean: PriorMean,
    stddev_init: f64,
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
        let (prior_std, prior_mean, stddev_init, samples) = match *bayesian {
            Bayesian::None => return None,
            Bayesian::MeanField {
                prior_std,
                tied_prior_mean,
                stddev_init,
                samples,
                ..
            } => {
                let mean = match tied_prior_mean {
                    true => PriorMean::Tied,
                    false => PriorMean::Fixed(0.0),
                };
                (prior_std, mean, stddev_init, samples)
            }
            Bayesian::Rank1 {
                prior_std, samples, ..
            } => (
                prior_std,
                PriorMean::Fixed(RANK1_PRIOR_MEAN),
                rank1_stddev_init(),
                samples,
            ),
        };
        Some(Posterior {
            prior_std,
            prior_mean,
            stddev_init,
            samples,
            seed: AtomicU64::new(0),
            factors: Mutex::new(Vec::new()),
        })
    }

    /// How a layer's `rho` starts: `N(softplus^-1(stddev_init), 0.1^2)`.
    pub(crate) fn rho_init(&self) -> Init {
        Init::Randn {
            mean: softplus_inverse(self.stddev_init),
            stdev: RHO_INIT_STD,
        }
    }

    /// Adds a factor `N(mu, posterior_std(rho)^2)` against this posterior's
    /// prior.
    pub(crate) fn register(&self, mu: &Tensor, rho: &Tensor) {
        let mut factors = self.factors.lock().unwrap_or_else(|e| e.into_inner());
        factors.push(Factor {
            mu: mu.shallow_clone(),
            rho: rho.shallow_clone(),
            prior_mean: self.prior_mean,
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
        // sigma = softplus(rho) + 1e-7 (edward2's epsilon) = 2 when
        // softplus(rho) = 2 - 1e-7.
        let rho = Tensor::from_slice(&[softplus_inverse(2.0 - 1e-7)]);
        let mu = Tensor::from_slice(&[0.0f64]);
        let zero = PriorMean::Fixed(0.0);
        let at_prior = f64::try_from(gaussian_kl(&mu, &rho, zero, 2.0)).unwrap();
        // Float64 scalars: ~5 roundings of terms <= 0.7 (<= 1.1e-16 each), and
        // sigma's few-ulp error enters only at second order (KL is flat
        // there: sigma = 2 (1 + u) gives u^2). Without the 1e-7, u = 5e-8
        // and u^2 = 2.5e-15.
        assert!(at_prior.abs() < 1e-15, "{at_prior}");
        // N(1, 2^2) against N(0, 1): ln(1/2) + (4 + 1)/2 - 1/2 = 2 - ln 2.
        let shifted = f64::try_from(gaussian_kl(&(&mu + 1.0), &rho, zero, 1.0)).unwrap();
        // ~6 float64 roundings of terms <= 5 (<= 4.4e-16 each): ~3e-15 at most.
        assert!((shifted - (2.0 - 2f64.ln())).abs() < 1e-14, "{shifted}");
        // A tied prior mean leaves the mean free: N(1, 2^2) against N(1, 2^2).
        let tied = f64::try_from(gaussian_kl(&(mu + 1.0), &rho, PriorMean::Tied, 2.0)).unwrap();
        assert!(tied.abs() < 1e-15, "{tied}");
    }

    #[test]
    fn validation_refuses_what_the_method_does_not_define() {
        let mf = |prior_std, samples, stddev_init| Bayesian::MeanField {
            prior_std,
            tied_prior_mean: false,
            stddev_init,
            samples,
            kl_annealing_epochs: 0,
        };
        assert!(Bayesian::mean_field().validate().is_ok());
        assert!(Bayesian::None.validate().is_ok());
        assert!(mf(0.0, 5, 0.1).validate().is_err());
        assert!(mf(f64::NAN, 5, 0.1).validate().is_err());
        assert!(mf(1.0, 0, 0.1).validate().is_err());
        assert!(mf(1.0, 5, 1e-3).validate().is_ok());
        assert!(mf(1.0, 5, 700.0).validate().is_ok());
        for stddev_init in [0.0, -1e-3, 700.5, f64::INFINITY, f64::NAN] {
            let error = mf(1.0, 5, stddev_init).validate().unwrap_err();
            assert!(error.to_string().contains("stddev_init"), "{error}");
        }
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
    fn rho_starts_where_each_posterior_asks() {
        let rho_mean = |bayesian: Bayesian| match Posterior::of(&bayesian).unwrap().rho_init() {
            Init::Randn { mean, stdev } => {
                assert_eq!(stdev, 0.1);
                mean
            }
            other => panic!("{other:?}"),
        };
        // TFP's default, exactly: ln(expm1(ln(1 + e^-3))) rounds back to -3.
        assert_eq!(rho_mean(Bayesian::mean_field()), -3.0);
        let sigma = |rho: f64| Tensor::from_slice(&[rho]).softplus().double_value(&[0]);
        let vi = Bayesian::MeanField {
            prior_std: 0.1,
            tied_prior_mean: true,
            stddev_init: 1e-3,
            samples: 5,
            kl_annealing_epochs: 0,
        };
        // Float64 ln/expm1/softplus round-trip: a few ulps relative, ~1e-18
        // on 1e-3 and ~1e-17 on 0.0316; 1e-16 and 1e-15 leave 100x room.
        assert!((sigma(rho_mean(vi)) - 1e-3).abs() < 1e-16);
        let dropout = (1e-3f64 / 0.999).sqrt();
        assert!((sigma(rho_mean(Bayesian::rank1())) - dropout).abs() < 1e-15);
    }
}
