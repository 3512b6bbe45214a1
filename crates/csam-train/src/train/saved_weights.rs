//! The choice between a run's saved weights, apart from the code that
//! reads them so that errors can name it without depending on that code.

/// Which saved weights of a run to load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Checkpoint {
    /// `model.safetensors`: the best epoch by the validation metric.
    #[default]
    Best,
    /// `last.safetensors`: the last finished epoch.
    Last,
}
