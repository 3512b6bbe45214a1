//! A method of a comparison: a training loss under an update rule, named as
//! on the command line. `sgd`, `sam`, `asam` and `csam` train cross entropy
//! with that rule; a loss's name alone (`focal`) trains it with SGD, and
//! `LOSS+RULE` (`focal+csam`) with the rule. The losses take their default
//! parameters (docs/losses.md); every method of a comparison shares its
//! data, model, epochs, base optimiser, radius, gamma and seeds.

use std::fmt;
use std::str::FromStr;

use csam_nn::loss::{DualFocal, Flsd, Focal, LabelSmoothing, MarginLabelSmoothing, TrainingLoss};
use csam_train::spec::OptimizerFamily;

/// A loss with its default parameters.
type WithDefaults = fn() -> TrainingLoss;

/// The losses a comparison pairs with update rules: the method name of each
/// and the loss with its default parameters. A new loss is one line here.
const LOSSES: &[(&str, WithDefaults)] = &[
    ("focal", || TrainingLoss::Focal(Focal::default())),
    ("flsd", || TrainingLoss::Flsd(Flsd {})),
    ("ls", || {
        TrainingLoss::LabelSmoothing(LabelSmoothing::default())
    }),
    ("dual-focal", || {
        TrainingLoss::DualFocal(DualFocal::default())
    }),
    ("mbls", || {
        TrainingLoss::MarginLabelSmoothing(MarginLabelSmoothing::default())
    }),
];

/// A training loss (cross entropy when `loss` is None, otherwise a name of
/// [`LOSSES`]) under an update rule.
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

    /// The training loss, with its default parameters.
    pub fn loss(&self) -> TrainingLoss {
        LOSSES
            .iter()
            .find(|(name, _)| Some(*name) == self.loss)
            .map_or_else(TrainingLoss::default, |(_, loss)| loss())
    }

    /// Whether the loss is cross entropy (the paper's theory is about it).
    pub fn is_cross_entropy(&self) -> bool {
        self.loss.is_none()
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
                LOSSES
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
    let losses: Vec<&str> = LOSSES.iter().map(|(name, _)| *name).collect();
    format!(
        "unknown method {text:?}: a rule (sgd, sam, asam, csam, vasso), a loss ({}) or LOSS+RULE \
         such as focal+csam",
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
        ] {
            let method: Method = text.parse().unwrap();
            assert_eq!(method.to_string(), text);
            assert_eq!((method.loss().name(), method.rule), (loss, rule), "{text}");
            let json = serde_json::to_string(&method).unwrap();
            assert_eq!(serde_json::from_str::<Method>(&json).unwrap(), method);
        }
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
