//! Which classifier sits on a network's features.

use crate::loss::{Fields, LossError};

/// The classifier on a network's features: its own linear layer, or BalCAL's
/// balance of that layer with a fixed simplex ETF ([`super::BalcalHead`]).
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Head {
    /// The linear classifier alone.
    #[default]
    Linear,
    /// BalCAL (Ni et al. 2025): the linear classifier and the ETF classifier,
    /// weighted `lambda` and `1 - lambda`; after each epoch `lambda` is set so
    /// that the training logits' mean confidence meets `delta` times their
    /// accuracy ([`super::balcal::balanced_lambda`]). Defaults as the
    /// authors' code (JianiNi/BalCAL): `lambda` starts at 0.8
    /// (`WideResNet_BalCAL`), `delta = 0.95` (what their training script,
    /// `train_BalCAL.sh`, passes; the argument's own default is 1).
    Balcal {
        /// `lambda` before the first epoch's update, in `[0, 1]`.
        #[serde(default = "Head::default_lambda")]
        lambda: f64,
        /// The factor `delta > 0` of the accuracy the confidence is balanced
        /// against.
        #[serde(default = "Head::default_delta")]
        delta: f64,
    },
}

impl Head {
    fn default_lambda() -> f64 {
        0.8
    }

    fn default_delta() -> f64 {
        0.95
    }

    /// BalCAL at its defaults.
    pub fn balcal() -> Head {
        Head::Balcal {
            lambda: Head::default_lambda(),
            delta: Head::default_delta(),
        }
    }

    /// The name of the branch (`linear`, `balcal`).
    pub fn name(&self) -> &'static str {
        match self {
            Head::Linear => "linear",
            Head::Balcal { .. } => "balcal",
        }
    }

    /// Whether it is the linear classifier alone.
    pub fn is_linear(&self) -> bool {
        *self == Head::Linear
    }

    /// Refuses parameters outside the method's definition.
    pub fn validate(&self) -> Result<(), LossError> {
        match *self {
            Head::Linear => Ok(()),
            Head::Balcal { lambda, delta } => {
                let fields = Fields("balcal");
                let unit = (0.0..=1.0).contains(&lambda);
                fields.check("lambda", lambda, unit, "must lie in [0, 1]")?;
                fields.positive("delta", delta)
            }
        }
    }
}
