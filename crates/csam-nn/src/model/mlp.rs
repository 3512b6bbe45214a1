//! Multi-layer perceptron on flattened inputs.

use super::batch_ensemble::Members;
use super::layers::{dropout, Linear, TORCH_DEFAULT_INIT};
use super::{Mode, ModelError, Network};
use tch::{nn, nn::Module, Tensor};

/// Fully connected ReLU network on the flattened input (`C * H * W` features).
///
/// PyTorch twin (`twins.py::mlp`):
/// `nn.Sequential(nn.Flatten(), nn.Linear(d, h1), nn.ReLU(), [nn.Dropout(r)],
/// nn.Linear(h1, h2), nn.ReLU(), [nn.Dropout(r)], ..., nn.Linear(hk, n_classes))`,
/// where the `Dropout` modules exist only when the rate `r > 0`. Parameter names
/// are therefore `1.weight`, `1.bias`, `3.weight`, ... without dropout and
/// `1.weight`, `4.weight`, ... with it. Initialisation is PyTorch's default.
/// With BatchEnsemble members every layer is a BatchEnsemble layer
/// (`1.weight`, `1.r`, `1.s`, `1.bias` `[M, h1]`, ...).
#[derive(Debug)]
pub struct Mlp {
    layers: Vec<Linear>,
    dropout: f64,
    /// The output layer's index in the twin's `Sequential`.
    output_index: usize,
}

impl Mlp {
    /// Builds the network under `p` for `d_in` input features.
    pub fn new(
        p: &nn::Path,
        d_in: i64,
        hidden: &[i64],
        n_classes: i64,
        dropout: f64,
    ) -> Result<Self, ModelError> {
        Self::with_members(p, (d_in, hidden, n_classes), dropout, Members::one())
    }

    /// [`Mlp::new`] with layers built as `members` says.
    pub(crate) fn with_members(
        p: &nn::Path,
        (d_in, hidden, n_classes): (i64, &[i64], i64),
        dropout: f64,
        members: Members,
    ) -> Result<Self, ModelError> {
        if let Some(bad) = hidden.iter().find(|&&h| h < 1) {
            return Err(ModelError::InvalidConfig(format!(
                "MLP hidden sizes must be >= 1, got {bad}"
            )));
        }
        // Sequential indices: Flatten, then per hidden layer Linear, ReLU [, Dropout].
        let stride = if dropout > 0.0 { 3 } else { 2 };
        let widths: Vec<i64> = std::iter::once(d_in)
            .chain(hidden.iter().copied())
            .chain(std::iter::once(n_classes))
            .collect();
        let index = |layer: usize| 1 + layer * stride;
        let layers = widths
            .windows(2)
            .enumerate()
            .map(|(i, w)| members.linear(&(p / index(i)), w[0], w[1], TORCH_DEFAULT_INIT))
            .collect();
        Ok(Self {
            layers,
            dropout,
            output_index: index(hidden.len()),
        })
    }
}

impl Network for Mlp {
    fn features(&self, xs: &Tensor, mode: Mode) -> Tensor {
        let (_, hidden) = self.split_last();
        hidden.iter().fold(xs.flatten(1, -1), |h, layer| {
            dropout(
                layer.forward(&h).relu(),
                self.dropout,
                mode.dropout_active(),
            )
        })
    }

    fn classify(&self, features: &Tensor) -> Tensor {
        self.split_last().0.forward(features)
    }

    fn feature_width(&self) -> i64 {
        self.split_last().0.weight().size()[1]
    }

    fn classifier_name(&self) -> Option<String> {
        Some(self.output_index.to_string())
    }
}

impl Mlp {
    /// The output layer and the hidden layers before it.
    fn split_last(&self) -> (&Linear, &[Linear]) {
        // Invariant: `new` builds at least the output layer.
        self.layers
            .split_last()
            .expect("an MLP has an output layer")
    }
}
