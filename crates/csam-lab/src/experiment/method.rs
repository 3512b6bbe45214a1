//! A method of a comparison: a training objective (a loss, how batches are
//! fed: as they are, mixed up, MIT-L, the classifier: linear or BalCAL's
//! two, the members: one network, a BatchEnsemble or a MIMO, and the weights:
//! point estimates, a mean-field posterior or a rank-1 BNN's) under an update
//! rule, named as on the command line, and how it predicts: one network, a
//! deep ensemble of N, or N MC-Dropout passes.
//! `sgd`, `sam`, `asam`, `csam`, `vasso` and `bsam` train cross entropy with
//! that rule; an objective's name alone (`focal`, `mixup`) trains it with SGD,
//! and `NAME+RULE` (`focal+csam`) with the rule. An efficient SAM policy
//! before a SAM-family rule (`rst+sam`, `looksam+csam`, `focal+aesam+csam`)
//! runs the rule's second pass on the steps the policy picks
//! ([`SamPolicy`], at its defaults). `-ensembleN` and
//! `-mc-dropoutN` after any of these (`csam-ensemble5`, `focal+sam-mc-dropout5`;
//! `ensemble5` and `mc-dropout5` alone are SGD's) predict with N members or
//! passes ([`Prediction`]). The objectives take their default parameters
//! (docs/losses.md), except `rank1` and `vi`, which are their authors' CIFAR
//! recipes with the KL annealing scaled to the run's epochs
//! ([`authors_kl_annealing`]); every method of a comparison shares its
//! data, model, epochs, base optimiser and seeds.

use std::fmt;
use std::str::FromStr;

use csam_nn::loss::{
    Acls, AdaFocal, Crl, DualFocal, Flsd, Focal, LabelSmoothing, MarginLabelSmoothing, Mdca, Mmce,
    PairwiseConstraints, TrainingLoss,
};
use csam_nn::mixing::Mixing;
use csam_nn::model::{Bayesian, Ensemble, Head};
use csam_nn::optim::SamPolicy;
use csam_train::spec::{OptimizerFamily, RunSpec};

/// What a method trains besides its rule: a loss, a mixing, a classifier
/// head and the members of the network, at their default parameters.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Objective {
    /// The training loss.
    pub loss: TrainingLoss,
    /// How batches are fed to the model.
    pub mixing: Mixing,
    /// The classifier on the network's features.
    pub head: Head,
    /// One network, or several members in one.
    pub ensemble: Ensemble,
    /// Point estimates of the weights, or a posterior over them.
    pub bayesian: Bayesian,
}

impl Objective {
    /// Sets the run's loss, mixing, head, members and posterior to this
    /// objective's; a posterior's run has no weight decay (its KL term is
    /// the regulariser; Ovadia et al. 2019 train it without decay).
    pub fn apply(self, spec: &mut RunSpec) {
        spec.loss = self.loss;
        spec.mixing = self.mixing;
        spec.model.head = self.head;
        spec.model.ensemble = self.ensemble;
        spec.model.bayesian = self.bayesian;
        if !self.bayesian.is_none() {
            spec.optim.weight_decay = 0.0;
        }
    }
}

/// An objective for a run of this many epochs.
type Recipe = fn(usize) -> Objective;

/// The epochs over which uncertainty-baselines' CIFAR scripts of the rank-1
/// BNN and of VI (`baselines/cifar/rank1_bnn.py`,
/// `variational_inference.py`) anneal the KL term, `kl_annealing_epochs`,
/// of the [`AUTHORS_TRAIN_EPOCHS`] they train.
const AUTHORS_KL_ANNEALING_EPOCHS: usize = 200;

/// The scripts' `train_epochs`.
const AUTHORS_TRAIN_EPOCHS: usize = 250;

/// The authors' KL annealing scaled to a run of `epochs`: the same share
/// of the run, 200 / 250 of `epochs` rounded half up, at least 1 (so that a
/// short run anneals too): 16 of 20 epochs, 1 of 1.
pub fn authors_kl_annealing(epochs: usize) -> usize {
    let (part, whole) = (
        AUTHORS_KL_ANNEALING_EPOCHS as u128,
        AUTHORS_TRAIN_EPOCHS as u128,
    );
    // At most `epochs`, so the conversion back is exact.
    let scaled = (epochs as u128 * part + whole / 2) / whole;
    (scaled as usize).max(1)
}

/// `loss` on batches as they are, with the linear classifier.
fn plain(loss: TrainingLoss) -> Objective {
    Objective {
        loss,
        ..Objective::default()
    }
}

/// The objectives a comparison pairs with update rules: the method name of
/// each and what it trains for a run of a given length: the loss, mixing,
/// head and members at their default parameters, the posteriors at their
/// authors' recipes. A new one is one line here.
const OBJECTIVES: &[(&str, Recipe)] = &[
    ("focal", |_| plain(TrainingLoss::Focal(Focal::default()))),
    ("flsd", |_| plain(TrainingLoss::Flsd(Flsd {}))),
    ("adafocal", |_| {
        plain(TrainingLoss::AdaFocal(AdaFocal::default()))
    }),
    ("ls", |_| {
        plain(TrainingLoss::LabelSmoothing(LabelSmoothing::default()))
    }),
    ("dual-focal", |_| {
        plain(TrainingLoss::DualFocal(DualFocal::default()))
    }),
    ("mbls", |_| {
        plain(TrainingLoss::MarginLabelSmoothing(
            MarginLabelSmoothing::default(),
        ))
    }),
    ("acls", |_| plain(TrainingLoss::Acls(Acls::default()))),
    ("cpc", |_| {
        plain(TrainingLoss::PairwiseConstraints(
            PairwiseConstraints::default(),
        ))
    }),
    ("mmce", |_| plain(TrainingLoss::Mmce(Mmce::default()))),
    ("mdca", |_| plain(TrainingLoss::Mdca(Mdca::default()))),
    ("crl", |_| plain(TrainingLoss::Crl(Crl::default()))),
    ("mixup", |_| Objective {
        mixing: Mixing::mixup(),
        ..Objective::default()
    }),
    ("mit-l", |_| Objective {
        mixing: Mixing::mit_l(),
        ..Objective::default()
    }),
    ("balcal", |_| Objective {
        head: Head::balcal(),
        ..Objective::default()
    }),
    ("batchensemble", |_| Objective {
        ensemble: Ensemble::batch_ensemble(),
        ..Objective::default()
    }),
    ("mimo", |_| Objective {
        ensemble: Ensemble::mimo(),
        ..Objective::default()
    }),
    // uncertainty-baselines' baselines/cifar/variational_inference.py:
    // prior_stddev 0.1 with the prior's mean tied to the posterior's
    // (models/wide_resnet_variational.py), stddev_init 1e-3,
    // num_eval_samples 5.
    ("vi", |epochs| Objective {
        bayesian: Bayesian::MeanField {
            prior_std: 0.1,
            tied_prior_mean: true,
            stddev_init: 1e-3,
            samples: 5,
            kl_annealing_epochs: authors_kl_annealing(epochs),
        },
        ..Objective::default()
    }),
    // uncertainty-baselines' baselines/cifar/rank1_bnn.py: ensemble_size 4,
    // random_sign_init 0.5, prior_stddev 0.1, num_eval_samples 1.
    ("rank1", |epochs| Objective {
        ensemble: Ensemble::BatchEnsemble {
            size: 4,
            random_sign_init: 0.5,
        },
        bayesian: Bayesian::Rank1 {
            prior_std: 0.1,
            samples: 1,
            kl_annealing_epochs: authors_kl_annealing(epochs),
        },
        ..Objective::default()
    }),
];

/// The objectives' method names, in declaration order (help texts and shell
/// completions list them).
pub fn objective_names() -> impl Iterator<Item = &'static str> {
    OBJECTIVES.iter().map(|(name, _)| *name)
}

/// How a method predicts from what it trained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Prediction {
    /// One network in evaluation mode.
    #[default]
    Single,
    /// A deep ensemble (Lakshminarayanan et al. 2017): the mean of the
    /// softmax probabilities of this many networks trained alike from
    /// different seeds on one split (the paper's Table 1: 5).
    Ensemble(usize),
    /// MC-Dropout (Gal and Ghahramani 2016): one network trained with
    /// dropout ([`MC_DROPOUT_RATE`]), the mean of the softmax
    /// probabilities of this many passes with dropout active (Table 1: 5).
    McDropout(usize),
}

/// The dropout rate of the networks an MC-Dropout method trains (before the
/// classifier, csam's `dropout` option): 0.1, as Ovadia et al. 2019's
/// CIFAR-10 baselines; a methods file's `dropout` key sets another.
pub const MC_DROPOUT_RATE: f64 = 0.1;

/// The largest ensemble or number of MC-Dropout passes a method may name.
const MAX_MEMBERS: usize = 100;

impl Prediction {
    /// The runs a replicate trains: the ensemble's size, else 1.
    pub fn members(self) -> usize {
        match self {
            Prediction::Ensemble(members) => members,
            Prediction::Single | Prediction::McDropout(_) => 1,
        }
    }

    /// The name's suffix (`ensemble5`, `mc-dropout5`), or None.
    fn suffix(self) -> Option<String> {
        match self {
            Prediction::Single => None,
            Prediction::Ensemble(n) => Some(format!("ensemble{n}")),
            Prediction::McDropout(n) => Some(format!("mc-dropout{n}")),
        }
    }

    /// Splits `text` into what it trains and how it predicts: `csam-ensemble5`
    /// is (`csam`, an ensemble of 5), `ensemble5` (`sgd`, an ensemble of 5);
    /// a name without such a suffix predicts with one network.
    fn split_off(text: &str) -> Result<(&str, Prediction), String> {
        for (word, made) in [
            (
                "mc-dropout",
                Prediction::McDropout as fn(usize) -> Prediction,
            ),
            ("ensemble", Prediction::Ensemble),
        ] {
            let Some(at) = text.rfind(word) else {
                continue;
            };
            let (base, digits) = (&text[..at], &text[at + word.len()..]);
            let base = match base {
                "" => "sgd",
                _ => match base.strip_suffix('-') {
                    Some(base) => base,
                    None => continue,
                },
            };
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let count = digits
                .parse()
                .ok()
                .filter(|n| (1..=MAX_MEMBERS).contains(n))
                .ok_or_else(|| {
                    format!("method {text:?}: the {word} size must lie in 1..={MAX_MEMBERS}")
                })?;
            return Ok((base, made(count)));
        }
        Ok((text, Prediction::Single))
    }
}

/// A training objective (cross entropy on batches as they are when `loss`
/// is None, otherwise a name of [`OBJECTIVES`]) under an update rule, and
/// how it predicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Method {
    loss: Option<&'static str>,
    /// The efficient SAM policy's name ([`SamPolicy::name`]); None: every step.
    policy: Option<&'static str>,
    /// The update rule.
    pub rule: OptimizerFamily,
    /// One network, an ensemble, or MC-Dropout.
    pub prediction: Prediction,
}

/// What one run of a method trains: its objective and rule, with dropout
/// for MC-Dropout. Methods that train alike share their runs (`csam` and
/// `csam-ensemble5` the first member; `mc-dropout5` and `mc-dropout10` all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Training {
    /// The method, predicting with one network.
    pub method: Method,
    /// Trained with [`MC_DROPOUT_RATE`] dropout.
    pub dropout: bool,
}

impl fmt::Display for Training {
    /// The method's name, `-dropout` after it when it trains with dropout.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.dropout {
            true => write!(f, "{}-dropout", self.method),
            false => write!(f, "{}", self.method),
        }
    }
}

impl Method {
    /// Cross entropy under `rule`, predicting with one network: the methods
    /// of the paper's main table.
    pub const fn cross_entropy(rule: OptimizerFamily) -> Method {
        Method {
            loss: None,
            policy: None,
            rule,
            prediction: Prediction::Single,
        }
    }

    /// What it trains in a run of `epochs` epochs: the training loss, the
    /// mixing, the head, the members and the posterior ([`OBJECTIVES`]).
    pub fn objective(&self, epochs: usize) -> Objective {
        OBJECTIVES
            .iter()
            .find(|(name, _)| Some(*name) == self.loss)
            .map_or_else(|| plain(TrainingLoss::default()), |(_, made)| made(epochs))
    }

    /// On which steps its rule runs the second pass, at the policy's defaults.
    pub fn policy(&self) -> SamPolicy {
        self.policy
            .and_then(SamPolicy::named)
            .unwrap_or(SamPolicy::Every)
    }

    /// What each of its runs trains.
    pub fn training(&self) -> Training {
        Training {
            method: Method {
                prediction: Prediction::Single,
                ..*self
            },
            dropout: matches!(self.prediction, Prediction::McDropout(_)),
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rule = self.rule.to_string();
        let base = match (self.loss, self.policy, self.rule) {
            (Some(loss), None, OptimizerFamily::Sgd) => loss.to_string(),
            (loss, policy, _) => loss
                .into_iter()
                .chain(policy)
                .chain([rule.as_str()])
                .collect::<Vec<_>>()
                .join("+"),
        };
        match self.prediction.suffix() {
            None => f.write_str(&base),
            Some(suffix) if base == "sgd" => f.write_str(&suffix),
            Some(suffix) => write!(f, "{base}-{suffix}"),
        }
    }
}

impl FromStr for Method {
    type Err = String;

    fn from_str(text: &str) -> Result<Method, String> {
        let lowered = text.trim().to_ascii_lowercase();
        let (text, prediction) = Prediction::split_off(&lowered)?;
        let (text, rule) = match text.rsplit_once('+') {
            Some((rest, rule)) => (Some(rest), Some(rule)),
            None if text.parse::<OptimizerFamily>().is_ok() => (None, Some(text)),
            None => (Some(text), None),
        };
        // What comes before the rule: an objective, a policy, or both.
        let efficient = |name: &str| SamPolicy::named(name).filter(|p| *p != SamPolicy::Every);
        let (loss, policy) = match text.map(|text| text.split_once('+').unwrap_or(("", text))) {
            None => (None, None),
            Some((loss, last)) if efficient(last).is_some() && rule.is_some() => {
                (Some(loss).filter(|loss| !loss.is_empty()), Some(last))
            }
            Some(("", loss)) => (Some(loss), None),
            Some(_) => return Err(unknown(&lowered)),
        };
        let policy = policy.and_then(efficient).map(|policy| policy.name());
        let loss = loss
            .map(|name| {
                OBJECTIVES
                    .iter()
                    .find(|(known, _)| *known == name)
                    .map(|(known, _)| *known)
                    .ok_or_else(|| unknown(&lowered))
            })
            .transpose()?;
        let rule = match rule {
            Some(rule) => rule.parse().map_err(|_| unknown(&lowered))?,
            None => OptimizerFamily::Sgd,
        };
        Ok(Method {
            loss,
            policy,
            rule,
            prediction,
        })
    }
}

fn unknown(text: &str) -> String {
    let losses: Vec<&str> = objective_names().collect();
    let policies: Vec<&str> = SamPolicy::all()[1..].iter().map(SamPolicy::name).collect();
    format!(
        "unknown method {text:?}: a rule (sgd, sam, asam, csam, vasso, bsam), a loss, mixing, \
         head, ensemble or posterior ({}) or NAME+RULE such as focal+csam, with an efficient \
         SAM policy ({}) before a SAM-family rule (looksam+csam, focal+rst+sam), each \
         optionally followed by -ensembleN or -mc-dropoutN (csam-ensemble5; ensemble5 and \
         mc-dropout5 alone are SGD's)",
        losses.join(", "),
        policies.join(", ")
    )
}

impl serde::Serialize for Method {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Method {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Method, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The length of the runs these tests ask objectives for.
    const EPOCHS: usize = 20;

    #[test]
    fn rank1_and_vi_are_their_authors_cifar_recipes_scaled_to_the_run() {
        // rank1_bnn.py and variational_inference.py anneal over 200 of their
        // 250 epochs: 4/5 of the run, rounded half up, at least 1.
        for (epochs, annealing) in [(0, 1), (1, 1), (2, 2), (3, 2), (7, 6), (20, 16), (250, 200)] {
            assert_eq!(authors_kl_annealing(epochs), annealing, "{epochs}");
            for name in ["rank1", "rank1+csam"] {
                let rank1 = name.parse::<Method>().unwrap().objective(epochs);
                let members = Ensemble::BatchEnsemble {
                    size: 4,
                    random_sign_init: 0.5,
                };
                let posterior = Bayesian::Rank1 {
                    prior_std: 0.1,
                    samples: 1,
                    kl_annealing_epochs: annealing,
                };
                assert_eq!((rank1.ensemble, rank1.bayesian), (members, posterior));
            }
            for name in ["vi", "vi+csam"] {
                let vi = name.parse::<Method>().unwrap().objective(epochs);
                let posterior = Bayesian::MeanField {
                    prior_std: 0.1,
                    tied_prior_mean: true,
                    stddev_init: 1e-3,
                    samples: 5,
                    kl_annealing_epochs: annealing,
                };
                assert_eq!((vi.ensemble, vi.bayesian), (Ensemble::Single, posterior));
            }
        }
        // The scaling cannot overflow: it is at most the run's length.
        // usize::MAX is a multiple of 5 (2^32 - 1 and 2^64 - 1 both are).
        assert_eq!(authors_kl_annealing(usize::MAX), usize::MAX / 5 * 4);
    }

    #[test]
    fn ensemble_and_mc_dropout_names_round_trip_and_train_like_their_base() {
        for (text, base, prediction) in [
            ("ensemble5", "sgd", Prediction::Ensemble(5)),
            ("csam-ensemble5", "csam", Prediction::Ensemble(5)),
            ("focal+sam-ensemble2", "focal+sam", Prediction::Ensemble(2)),
            ("mc-dropout5", "sgd", Prediction::McDropout(5)),
            ("csam-mc-dropout10", "csam", Prediction::McDropout(10)),
            ("mixup-mc-dropout1", "mixup", Prediction::McDropout(1)),
        ] {
            let method: Method = text.parse().unwrap();
            assert_eq!(method.to_string(), text);
            assert_eq!(method.prediction, prediction, "{text}");
            let training = method.training();
            assert_eq!(training.method.to_string(), base);
            assert_eq!(training.method.objective(EPOCHS), method.objective(EPOCHS));
            let dropout = matches!(prediction, Prediction::McDropout(_));
            assert_eq!(training.dropout, dropout);
            let expected = match dropout {
                true => format!("{base}-dropout"),
                false => base.to_string(),
            };
            assert_eq!(training.to_string(), expected);
        }
        assert_eq!(
            "sgd-ensemble3".parse::<Method>().unwrap().to_string(),
            "ensemble3"
        );
        assert_eq!(Prediction::Ensemble(4).members(), 4);
        assert_eq!(Prediction::McDropout(4).members(), 1);
        for bad in ["ensemble0", "csam-mc-dropout0", "ensemble101"] {
            let error = bad.parse::<Method>().unwrap_err();
            assert!(error.contains("must lie in 1..=100"), "{bad}: {error}");
        }
    }

    #[test]
    fn an_efficient_policy_goes_before_a_sam_family_rule() {
        for (text, loss, policy, rule) in [
            (
                "looksam+csam",
                "cross-entropy",
                "looksam",
                OptimizerFamily::Csam,
            ),
            ("rst+sam", "cross-entropy", "rst", OptimizerFamily::Sam),
            ("focal+aesam+csam", "focal", "aesam", OptimizerFamily::Csam),
            ("esam+csam", "cross-entropy", "esam", OptimizerFamily::Csam),
            ("esam+sam", "cross-entropy", "esam", OptimizerFamily::Sam),
            (
                "looksam+asam-ensemble2",
                "cross-entropy",
                "looksam",
                OptimizerFamily::Asam,
            ),
        ] {
            let method: Method = text.parse().unwrap();
            assert_eq!(method.to_string(), text);
            assert_eq!(method.objective(EPOCHS).loss.name(), loss, "{text}");
            assert_eq!(
                (method.policy().name(), method.rule),
                (policy, rule),
                "{text}"
            );
            assert_eq!(method.training().method.policy(), method.policy());
        }
        assert_eq!("csam".parse::<Method>().unwrap().policy(), SamPolicy::Every);
        for bad in [
            "looksam",
            "every+sam",
            "looksam+focal+csam",
            "focal+mixup+csam",
            "looksam+rst+sam",
        ] {
            let error = bad.parse::<Method>().unwrap_err();
            assert!(error.contains("unknown method"), "{bad}: {error}");
        }
    }

    #[test]
    fn names_round_trip_and_choose_loss_and_rule() {
        for (text, loss, rule) in [
            ("sgd", "cross-entropy", OptimizerFamily::Sgd),
            ("csam", "cross-entropy", OptimizerFamily::Csam),
            ("focal", "focal", OptimizerFamily::Sgd),
            ("focal+csam", "focal", OptimizerFamily::Csam),
            ("ls+sam", "label-smoothing", OptimizerFamily::Sam),
            ("flsd+asam", "flsd", OptimizerFamily::Asam),
            ("dual-focal+csam", "dual-focal", OptimizerFamily::Csam),
            ("mbls+sam", "mbls", OptimizerFamily::Sam),
            ("acls+csam", "acls", OptimizerFamily::Csam),
            ("cpc", "cpc", OptimizerFamily::Sgd),
            ("mmce+sam", "mmce", OptimizerFamily::Sam),
            ("mdca+csam", "mdca", OptimizerFamily::Csam),
            ("mixup", "cross-entropy", OptimizerFamily::Sgd),
            ("adafocal+csam", "adafocal", OptimizerFamily::Csam),
            ("crl+sam", "crl", OptimizerFamily::Sam),
            ("mit-l+csam", "cross-entropy", OptimizerFamily::Csam),
            ("balcal+csam", "cross-entropy", OptimizerFamily::Csam),
            ("batchensemble+csam", "cross-entropy", OptimizerFamily::Csam),
            ("mimo+sam", "cross-entropy", OptimizerFamily::Sam),
        ] {
            let method: Method = text.parse().unwrap();
            assert_eq!(method.to_string(), text);
            assert_eq!(
                (method.objective(EPOCHS).loss.name(), method.rule),
                (loss, rule),
                "{text}"
            );
            let json = serde_json::to_string(&method).unwrap();
            assert_eq!(serde_json::from_str::<Method>(&json).unwrap(), method);
        }
        assert_eq!(
            "mixup".parse::<Method>().unwrap().objective(EPOCHS).mixing,
            Mixing::mixup()
        );
        assert_eq!(
            "mit-l+sam"
                .parse::<Method>()
                .unwrap()
                .objective(EPOCHS)
                .mixing,
            Mixing::mit_l()
        );
        assert_eq!(
            "focal".parse::<Method>().unwrap().objective(EPOCHS).mixing,
            Mixing::None
        );
        assert_eq!(
            "balcal".parse::<Method>().unwrap().objective(EPOCHS).head,
            Head::balcal()
        );
        assert_eq!(
            "focal+sam"
                .parse::<Method>()
                .unwrap()
                .objective(EPOCHS)
                .head,
            Head::Linear
        );
        assert_eq!(
            "batchensemble+sam"
                .parse::<Method>()
                .unwrap()
                .objective(EPOCHS)
                .ensemble,
            Ensemble::batch_ensemble()
        );
        assert_eq!(
            "mimo".parse::<Method>().unwrap().objective(EPOCHS).ensemble,
            Ensemble::mimo()
        );
        assert!("balcal"
            .parse::<Method>()
            .unwrap()
            .objective(EPOCHS)
            .ensemble
            .is_single());
        assert_eq!(
            "Focal+CSAM".parse::<Method>().unwrap().to_string(),
            "focal+csam"
        );
        for bad in [
            "hinge",
            "focal+lamb",
            "focal+",
            "+csam",
            "sgd+focal",
            "",
            "csam-ensemble",
            "csamensemble5",
            "csam-ensemble5x",
            "hinge-ensemble5",
            "-ensemble5",
        ] {
            let error = bad.parse::<Method>().unwrap_err();
            assert!(error.contains("unknown method"), "{bad}: {error}");
        }
    }
}
