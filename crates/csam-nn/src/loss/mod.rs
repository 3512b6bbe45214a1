//! Classification losses on logits: the training losses ([`TrainingLoss`],
//! one file each, declared in one table below) and the CSAM factor of the
//! second SAM pass ([`CsamLoss`]).
//!
//! Every loss is computed from `log_softmax(z)` (log-sum-exp, no NaN for a
//! saturated softmax), in the floating-point kind of the logits (float64
//! logits give a float64 loss, unlike `Tensor::cross_entropy_for_logits`,
//! which computes in float32). A training loss is the batch mean of
//! per-example terms `l_i` ([`ExampleLoss::per_example`]), so that CSAM can
//! weight each example's term in its second pass (see [`CsamLoss::weights`]),
//! plus, for the regularisers defined on a whole batch (MMCE, MDCA, CRL), a batch
//! term `R` ([`ExampleLoss::batch_term`]) that CSAM leaves unweighted:
//! `L = (1/B) sum_i l_i + R`.
//!
//! Adding a loss: a file with a struct implementing [`ExampleLoss`] (its
//! formula, source and defaults in the doc comment), one line in
//! `training_losses!` below, and its parameters in the run specification's
//! key table.

mod acls;
mod adafocal;
mod csam;
mod dual_focal;
mod focal;
mod label_smoothing;
mod margin;
mod mdca;
mod mmce;
mod pairwise;
mod ranking;

pub use acls::Acls;
pub use adafocal::{AdaFocal, AdaFocalBins};
pub use csam::CsamLoss;
pub use dual_focal::DualFocal;
pub use focal::{Flsd, Focal};
pub use label_smoothing::LabelSmoothing;
pub use margin::MarginLabelSmoothing;
pub use mdca::Mdca;
pub use mmce::Mmce;
pub use pairwise::PairwiseConstraints;
pub use ranking::{CorrectnessHistory, Crl};

use tch::{Kind, TchError, Tensor};

/// Errors of the loss functions.
#[derive(Debug, thiserror::Error)]
pub enum LossError {
    /// Logits or targets have the wrong shape or kind.
    #[error("loss input: {0}")]
    Shape(String),
    /// A field of a [`TrainingLoss`] is out of range.
    #[error("invalid {loss} {field} = {value}: {reason}")]
    Field {
        loss: &'static str,
        field: &'static str,
        value: f64,
        reason: &'static str,
    },
    /// An efficient-SAM policy that does not combine with the update rule's
    /// perturbation.
    #[error("sam_policy {policy} does not combine with {rule}: {reason}")]
    Policy {
        policy: &'static str,
        rule: &'static str,
        reason: &'static str,
    },
    /// libtorch rejected an operation (for example a target outside
    /// `0..n_classes`), shown without its C++ stack trace.
    #[error("{}", crate::torch_message::message(.0))]
    Torch(#[from] TchError),
}

/// The parameter checks of one loss (named `.0` in errors), each refusing a
/// field with its value and the rule it breaks.
pub(crate) struct Fields(pub &'static str);

impl Fields {
    /// Refuses `field` = `value` unless `holds`, saying `reason`.
    pub(crate) fn check(
        &self,
        field: &'static str,
        value: f64,
        holds: bool,
        reason: &'static str,
    ) -> Result<(), LossError> {
        match holds {
            true => Ok(()),
            false => Err(LossError::Field {
                loss: self.0,
                field,
                value,
                reason,
            }),
        }
    }

    /// Refuses `field` unless it is finite and >= 0.
    pub(crate) fn non_negative(&self, field: &'static str, value: f64) -> Result<(), LossError> {
        let holds = value.is_finite() && value >= 0.0;
        self.check(field, value, holds, "must be finite and >= 0")
    }

    /// Refuses `field` unless it lies in `[0, 1)`.
    pub(crate) fn unit_interval(&self, field: &'static str, value: f64) -> Result<(), LossError> {
        let holds = (0.0..1.0).contains(&value);
        self.check(field, value, holds, "must lie in [0, 1)")
    }

    /// Refuses `field` unless it is finite and > 0.
    pub(crate) fn positive(&self, field: &'static str, value: f64) -> Result<(), LossError> {
        let holds = value.is_finite() && value > 0.0;
        self.check(field, value, holds, "must be finite and > 0")
    }
}

/// `log p_y` per example: `log_softmax(logits, 1)` gathered at the targets.
///
/// `logits` is `[B, K]` (float), `targets` is `[B]` (int64, values in `0..K`).
/// Returns a `[B]` tensor that keeps the autograd graph.
pub fn true_class_log_probs(logits: &Tensor, targets: &Tensor) -> Result<Tensor, LossError> {
    gather_true(&Scores::new(logits, targets)?.log_probs, targets)
}

/// A batch's logits `z` `[B, K]`, checked against their targets `[B]`, with
/// `log_softmax(z)`: what every loss reads, the log-softmax computed once per
/// forward pass. Both keep the autograd graph. A training run that keeps
/// its examples' histories of correct predictions adds them (CRL ranks by
/// them).
#[derive(Debug)]
pub struct Scores {
    /// The logits `z`.
    pub logits: Tensor,
    /// `log_softmax(z, 1)`.
    pub log_probs: Tensor,
    /// Each example's normalised history of correct predictions `[B]`
    /// ([`CorrectnessHistory::normalised`]), when the run keeps one.
    pub correctness: Option<Tensor>,
}

impl Scores {
    /// The scores of `logits` `[B, K]` for int64 `targets` `[B]`.
    pub fn new(logits: &Tensor, targets: &Tensor) -> Result<Scores, LossError> {
        check_inputs(logits, targets)?;
        Ok(Scores {
            logits: logits.shallow_clone(),
            log_probs: logits.f_log_softmax(1, None)?,
            correctness: None,
        })
    }

    /// The same tensors, sharing storage and autograd graph.
    pub fn shallow_clone(&self) -> Scores {
        Scores {
            logits: self.logits.shallow_clone(),
            log_probs: self.log_probs.shallow_clone(),
            correctness: self.correctness.as_ref().map(Tensor::shallow_clone),
        }
    }

    /// The same tensors, sharing storage, without the autograd graph.
    pub fn detached(&self) -> Scores {
        Scores {
            logits: self.logits.detach(),
            log_probs: self.log_probs.detach(),
            correctness: self.correctness.as_ref().map(Tensor::detach),
        }
    }
}

/// Refuses logits that are not `[B >= 1, K >= 1]` and targets that are not
/// int64 `[B]`.
fn check_inputs(logits: &Tensor, targets: &Tensor) -> Result<(), LossError> {
    let (l, t) = (logits.size(), targets.size());
    if l.len() != 2 || l[0] < 1 || l[1] < 1 {
        return Err(LossError::Shape(format!(
            "logits must be [batch >= 1, classes >= 1], got {l:?}"
        )));
    }
    if t.len() != 1 || t[0] != l[0] {
        return Err(LossError::Shape(format!(
            "targets must be [{}] to match logits {l:?}, got {t:?}",
            l[0]
        )));
    }
    if targets.kind() != Kind::Int64 {
        return Err(LossError::Shape(format!(
            "targets must be int64, got {:?}",
            targets.kind()
        )));
    }
    Ok(())
}

/// Mean cross entropy `-(1/B) sum_i log p_{y_i}` of logits `[B, K]` and targets `[B]`.
pub fn cross_entropy(logits: &Tensor, targets: &Tensor) -> Result<Tensor, LossError> {
    Ok(cross_entropy_from_log_probs(&true_class_log_probs(
        logits, targets,
    )?))
}

/// Mean cross entropy from the true-class log-probabilities `[B]`.
pub fn cross_entropy_from_log_probs(log_p_true: &Tensor) -> Tensor {
    -log_p_true.mean(None)
}

/// `log p_y` from log-probabilities `[B, K]` and targets `[B]`.
pub(crate) fn gather_true(log_probs: &Tensor, targets: &Tensor) -> Result<Tensor, LossError> {
    Ok(log_probs
        .f_gather(1, &targets.f_unsqueeze(1)?, false)?
        .f_squeeze_dim(1)?)
}

/// A training loss as per-example terms.
pub trait ExampleLoss {
    /// Refuses parameters outside the loss's definition.
    fn validate(&self) -> Result<(), LossError>;

    /// The per-example terms `l_i` `[B]` (keeping the autograd graph) from a
    /// batch's [`Scores`] and int64 targets `[B]`.
    fn per_example(&self, scores: &Scores, targets: &Tensor) -> Result<Tensor, LossError>;

    /// The fewest classes the loss is defined for (CPC compares pairs of
    /// non-target classes, ACLS the largest logit with the others).
    fn min_classes(&self) -> usize {
        1
    }

    /// The term `R` of the whole batch added to the mean of the per-example
    /// terms (a 0-d tensor keeping the autograd graph), for losses whose
    /// regulariser compares examples with each other or with batch
    /// statistics; `None` for losses made of per-example terms only.
    fn batch_term(&self, _scores: &Scores, _targets: &Tensor) -> Result<Option<Tensor>, LossError> {
        Ok(None)
    }
}

/// Cross entropy: `l_i = -log p_{y_i}`.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrossEntropy {}

impl ExampleLoss for CrossEntropy {
    fn validate(&self) -> Result<(), LossError> {
        Ok(())
    }

    fn per_example(&self, scores: &Scores, targets: &Tensor) -> Result<Tensor, LossError> {
        Ok(-gather_true(&scores.log_probs, targets)?)
    }
}

/// Declares the training losses once: `Variant => "name", Type;` adds the
/// variant to [`TrainingLoss`] (tagged `kind = "name"` in TOML and JSON) and
/// to its dispatch.
macro_rules! training_losses {
    ($($variant:ident => $name:literal, $loss:ty;)+) => {
        /// The loss minimised in training, with its parameters.
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(tag = "kind")]
        pub enum TrainingLoss {
            $(
                #[doc = concat!("`", $name, "`: [`", stringify!($loss), "`].")]
                #[serde(rename = $name)]
                $variant($loss),
            )+
        }

        impl TrainingLoss {
            /// Every loss's name, in the order of help texts.
            pub const NAMES: &'static [&'static str] = &[$($name),+];

            /// The loss's name (its `kind`).
            pub fn name(&self) -> &'static str {
                match self {
                    $(Self::$variant(_) => $name,)+
                }
            }

            fn as_example_loss(&self) -> &dyn ExampleLoss {
                match self {
                    $(Self::$variant(loss) => loss,)+
                }
            }
        }
    };
}

training_losses! {
    CrossEntropy => "cross-entropy", CrossEntropy;
    Focal => "focal", Focal;
    Flsd => "flsd", Flsd;
    AdaFocal => "adafocal", AdaFocal;
    LabelSmoothing => "label-smoothing", LabelSmoothing;
    DualFocal => "dual-focal", DualFocal;
    MarginLabelSmoothing => "mbls", MarginLabelSmoothing;
    Acls => "acls", Acls;
    PairwiseConstraints => "cpc", PairwiseConstraints;
    Mmce => "mmce", Mmce;
    Mdca => "mdca", Mdca;
    Crl => "crl", Crl;
}

impl Default for TrainingLoss {
    /// Cross entropy.
    fn default() -> Self {
        TrainingLoss::CrossEntropy(CrossEntropy {})
    }
}

impl TrainingLoss {
    /// Refuses parameters outside the loss's definition.
    pub fn validate(&self) -> Result<(), LossError> {
        self.as_example_loss().validate()
    }

    /// Whether this is plain cross entropy (whose mean is also the step's
    /// reported loss).
    pub fn is_cross_entropy(&self) -> bool {
        matches!(self, TrainingLoss::CrossEntropy(_))
    }

    /// The per-example terms `[B]` from a batch's [`Scores`] and targets `[B]`.
    pub fn per_example(&self, scores: &Scores, targets: &Tensor) -> Result<Tensor, LossError> {
        self.as_example_loss().per_example(scores, targets)
    }

    /// Whether the loss reads the examples' histories of correct
    /// predictions ([`Scores::correctness`]): CRL.
    pub fn needs_correctness_history(&self) -> bool {
        matches!(self, TrainingLoss::Crl(_))
    }

    /// The fewest classes the loss is defined for.
    pub fn min_classes(&self) -> usize {
        self.as_example_loss().min_classes()
    }

    /// The batch term `R` of a loss with one ([`ExampleLoss::batch_term`]).
    pub fn batch_term(
        &self,
        scores: &Scores,
        targets: &Tensor,
    ) -> Result<Option<Tensor>, LossError> {
        self.as_example_loss().batch_term(scores, targets)
    }

    /// `mean_i(terms) + R`: the batch loss from per-example terms `[B]` (the
    /// loss's own, or CSAM's weighted ones) and the loss's batch term.
    pub fn with_batch_term(
        &self,
        terms: &Tensor,
        scores: &Scores,
        targets: &Tensor,
    ) -> Result<Tensor, LossError> {
        let mean = terms.f_mean(None)?;
        Ok(match self.batch_term(scores, targets)? {
            Some(term) => mean.f_add(&term)?,
            None => mean,
        })
    }

    /// The loss of a batch of logits `[B, K]` and targets `[B]`: the mean of
    /// the per-example terms plus the batch term.
    pub fn mean(&self, logits: &Tensor, targets: &Tensor) -> Result<Tensor, LossError> {
        self.mean_of(&Scores::new(logits, targets)?, targets)
    }

    /// [`TrainingLoss::mean`] from [`Scores`]. Cross entropy is computed as
    /// [`cross_entropy`], bit for bit.
    pub fn mean_of(&self, scores: &Scores, targets: &Tensor) -> Result<Tensor, LossError> {
        match self {
            TrainingLoss::CrossEntropy(_) => Ok(cross_entropy_from_log_probs(&gather_true(
                &scores.log_probs,
                targets,
            )?)),
            _ => self.with_batch_term(&self.per_example(scores, targets)?, scores, targets),
        }
    }
}
