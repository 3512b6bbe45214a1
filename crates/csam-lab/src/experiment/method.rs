//! A method of a comparison: a training objective (a loss, how batches are
//! fed: as they are, mixed up, MIT-L, the classifier: linear or BalCAL's
//! two, and the members: one network or a BatchEnsemble) under an update
//! rule, named as on
//! the command line. `sgd`, `sam`, `asam`, `csam` and `vasso` train cross
//! entropy with that rule; an objective's name alone (`focal`, `mixup`)
//! trains it with SGD, and `NAME+RULE` (`focal+csam`) with the rule. The
//! objectives take their default parameters (docs/losses.md); every method
//! of a comparison shares its data, model, epochs, base optimiser and seeds.

use std::fmt;
use std::str::FromStr;

use csam_nn::loss::{
    Acls, AdaFocal, Crl, DualFocal, Flsd, Focal, LabelSmoothing, MarginLabelSmoothing, Mdca, Mmce,
    PairwiseConstraints, TrainingLoss,
};
use csam_nn::mixing::Mixing;
use csam_nn::model::{Ensemble, Head};
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
}

impl Objective {
    /// Sets the run's loss, mixing, head and members to this objective's.
    pub fn apply(self, spec: &mut RunSpec) {
        spec.loss = self.loss;
        spec.mixing = self.mixing;
        spec.model.head = self.head;
        spec.model.ensemble = self.ensemble;
    }
}

type WithDefaults = fn() -> Objective;

/// `loss` on batches as they are, with the linear classifier.
fn plain(loss: TrainingLoss) -> Objective {
    Objective {
        loss,
        ..Objective::default()
    }
}

/// The objectives a comparison pairs with update rules: the method name of
/// each and its loss and mixing with their default parameters. A new one is
/// one line here.
const OBJECTIVES: &[(&str, WithDefaults)] = &[
    ("focal", || plain(TrainingLoss::Focal(Focal::default()))),
    ("flsd", || plain(TrainingLoss::Flsd(Flsd {}))),
    ("adafocal", || {
        plain(TrainingLoss::AdaFocal(AdaFocal::default()))
    }),
    ("ls", || {
        plain(TrainingLoss::LabelSmoothing(LabelSmoothing::default()))
    }),
    ("dual-focal", || {
        plain(TrainingLoss::DualFocal(DualFocal::default()))
    }),
    ("mbls", || {
        plain(TrainingLoss::MarginLabelSmoothing(
            MarginLabelSmoothing::default(),
        ))
    }),
    ("acls", || plain(TrainingLoss::Acls(Acls::default()))),
    ("cpc", || {
        plain(TrainingLoss::PairwiseConstraints(
            PairwiseConstraints::default(),
        ))
    }),
    ("mmce", || plain(TrainingLoss::Mmce(Mmce::default()))),
    ("mdca", || plain(TrainingLoss::Mdca(Mdca::default()))),
    ("crl", || plain(TrainingLoss::Crl(Crl::default()))),
    ("mixup", || Objective {
        mixing: Mixing::mixup(),
        ..Objective::default()
    }),
    ("mit-l", || Objective {
        mixing: Mixing::mit_l(),
        ..Objective::default()
    }),
    ("balcal", || Objective {
        head: Head::balcal(),
        ..Objective::default()
    }),
    ("batchensemble", || Objective {
        ensemble: Ensemble::batch_ensemble(),
        ..Objective::default()
    }),
];

/// A training objective (cross entropy on batches as they are when `loss`
/// is None, otherwise a name of [`OBJECTIVES`]) under an update rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Method {
    loss: Option<&'static str>,
    /// The update rule.
    pub rule: OptimizerFamily,
}

impl Method {
    /// Cross entropy under `rule`: the methods of the paper's main table.
    pub const fn cross_entropy(rule: OptimizerFamily) -> Method {
        Method { loss: None, rule }
    }

    /// The training loss, the mixing and the head, with their default
    /// parameters.
    pub fn objective(&self) -> Objective {
        OBJECTIVES
            .iter()
            .find(|(name, _)| Some(*name) == self.loss)
            .map_or_else(|| plain(TrainingLoss::default()), |(_, made)| made())
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.loss, self.rule) {
            (None, rule) => write!(f, "{rule}"),
            (Some(loss), OptimizerFamily::Sgd) => f.write_str(loss),
            (Some(loss), rule) => write!(f, "{loss}+{rule}"),
        }
    }
}

impl FromStr for Method {
    type Err = String;

    fn from_str(text: &str) -> Result<Method, String> {
        let text = text.trim().to_ascii_lowercase();
        let (loss, rule) = match text.split_once('+') {
            Some((loss, rule)) => (Some(loss), Some(rule)),
            None if text.parse::<OptimizerFamily>().is_ok() => (None, Some(text.as_str())),
            None => (Some(text.as_str()), None),
        };
        let loss = loss
            .map(|name| {
                OBJECTIVES
                    .iter()
                    .find(|(known, _)| *known == name)
                    .map(|(known, _)| *known)
                    .ok_or_else(|| unknown(&text))
            })
            .transpose()?;
        let rule = match rule {
            Some(rule) => rule.parse().map_err(|_| unknown(&text))?,
            None => OptimizerFamily::Sgd,
        };
        Ok(Method { loss, rule })
    }
}

fn unknown(text: &str) -> String {
    let losses: Vec<&str> = OBJECTIVES.iter().map(|(name, _)| *name).collect();
    format!(
        "unknown method {text:?}: a rule (sgd, sam, asam, csam, vasso), a loss, mixing, head or ensemble ({}) \
         or NAME+RULE such as focal+csam",
        losses.join(", ")
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
        ] {
            let method: Method = text.parse().unwrap();
            assert_eq!(method.to_string(), text);
            assert_eq!(
                (method.objective().loss.name(), method.rule),
                (loss, rule),
                "{text}"
            );
            let json = serde_json::to_string(&method).unwrap();
            assert_eq!(serde_json::from_str::<Method>(&json).unwrap(), method);
        }
        assert_eq!(
            "mixup".parse::<Method>().unwrap().objective().mixing,
            Mixing::mixup()
        );
        assert_eq!(
            "mit-l+sam".parse::<Method>().unwrap().objective().mixing,
            Mixing::mit_l()
        );
        assert_eq!(
            "focal".parse::<Method>().unwrap().objective().mixing,
            Mixing::None
        );
        assert_eq!(
            "balcal".parse::<Method>().unwrap().objective().head,
            Head::balcal()
        );
        assert_eq!(
            "focal+sam".parse::<Method>().unwrap().objective().head,
            Head::Linear
        );
        assert_eq!(
            "batchensemble+sam"
                .parse::<Method>()
                .unwrap()
                .objective()
                .ensemble,
            Ensemble::batch_ensemble()
        );
        assert!("balcal"
            .parse::<Method>()
            .unwrap()
            .objective()
            .ensemble
            .is_single());
        assert_eq!(
            "Focal+CSAM".parse::<Method>().unwrap().to_string(),
            "focal+csam"
        );
        for bad in ["hinge", "focal+lamb", "focal+", "+csam", "sgd+focal", ""] {
            let error = bad.parse::<Method>().unwrap_err();
            assert!(error.contains("unknown method"), "{bad}: {error}");
        }
    }
}
