//! The multiply-adds of a forward pass, counted as it runs.
//!
//! Every convolution and linear layer of csam's architectures is a
//! [`Conv2d`] or [`Linear`] of this module, which adds its multiply-adds to
//! a per-thread counter while [`count_macs`] runs a forward pass; attention
//! adds its two matrix products through [`add`]. So the count follows the
//! architectures' code by construction, as PyTorch's `FlopCounterMode` does
//! (`bench/torch_reference.py --flops`, compared in
//! `tests/model_flops.rs`). BatchNorm, LayerNorm, activations, pooling and
//! the loss are not counted, as is customary (< 2% of these models).

use std::cell::Cell;

use tch::{nn, nn::Module, Tensor};

use super::batch_ensemble::FastWeights;
use super::flipout::Flipout;

thread_local! {
    /// The multiply-adds counted so far, while counting.
    static COUNTED: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Adds `macs()` multiply-adds to the count, when counting; outside a count
/// (every training step) `macs` is not evaluated, so layers pay one
/// thread-local read.
pub(crate) fn add(macs: impl FnOnce() -> i64) {
    COUNTED.with(|counted| {
        if let Some(total) = counted.get() {
            counted.set(Some(total + macs().max(0) as u64));
        }
    });
}

/// Runs `forward` and returns the multiply-adds its layers counted.
pub(crate) fn count_macs(forward: impl FnOnce()) -> u64 {
    let outer = COUNTED.with(|counted| counted.replace(Some(0)));
    forward();
    COUNTED.with(|counted| counted.replace(outer)).unwrap_or(0)
}

/// A 2-D convolution that counts `output elements x c_in / groups x kh x kw`;
/// with [`FastWeights`], a BatchEnsemble convolution (the count is the
/// shared convolution's on the members' stacked batch; the fast weights'
/// products are elementwise, not counted); with [`Flipout`], a mean-field
/// Gaussian convolution (its perturbation's convolution counted as the
/// mean's).
#[derive(Debug)]
pub(crate) struct Conv2d {
    conv: nn::Conv2D,
    fast: Option<FastWeights>,
    flipout: Option<Flipout>,
}

impl Conv2d {
    /// The convolution itself.
    pub(crate) fn plain(conv: nn::Conv2D) -> Self {
        Self {
            conv,
            fast: None,
            flipout: None,
        }
    }

    /// The convolution as the mean of a Gaussian one with this scale.
    pub(crate) fn with_flipout(self, flipout: Flipout) -> Self {
        Self {
            flipout: Some(flipout),
            ..self
        }
    }

    /// The weight `[c_out, c_in, kh, kw]` (the mean, with Flipout).
    pub(crate) fn weight(&self) -> &Tensor {
        &self.conv.ws
    }

    /// The convolution, shared by members with these fast weights.
    pub(crate) fn with_fast_weights(self, fast: FastWeights) -> Self {
        Self {
            fast: Some(fast),
            ..self
        }
    }
}

impl Module for Conv2d {
    fn forward(&self, xs: &Tensor) -> Tensor {
        let shared = |xs: &Tensor| {
            let out = self.conv.forward(xs);
            add(|| out.numel() as i64 * self.conv.ws.size()[1..].iter().product::<i64>());
            out
        };
        match (&self.fast, &self.flipout) {
            (Some(fast), _) => fast.forward(xs, shared),
            (None, Some(flipout)) => shared(xs) + perturbation(flipout, xs, &self.conv.ws),
            (None, None) => shared(xs),
        }
    }
}

/// `flipout`'s perturbation of `xs` for the layer of mean `mu`, counted as
/// the layer's own product (`output elements x` the weight's fan-in).
fn perturbation(flipout: &Flipout, xs: &Tensor, mu: &Tensor) -> Tensor {
    let out = flipout.perturbation(xs, mu);
    add(|| out.numel() as i64 * mu.size()[1..].iter().product::<i64>());
    out
}

/// A linear layer that counts `output elements x d_in`; with
/// [`FastWeights`], a BatchEnsemble linear layer, with [`Flipout`], a
/// mean-field Gaussian one (counted as [`Conv2d`]).
#[derive(Debug)]
pub(crate) struct Linear {
    linear: nn::Linear,
    fast: Option<FastWeights>,
    flipout: Option<Flipout>,
}

impl Linear {
    /// The linear layer itself.
    pub(crate) fn plain(linear: nn::Linear) -> Self {
        Self {
            linear,
            fast: None,
            flipout: None,
        }
    }

    /// The layer as the mean of a Gaussian one with this scale.
    pub(crate) fn with_flipout(self, flipout: Flipout) -> Self {
        Self {
            flipout: Some(flipout),
            ..self
        }
    }

    /// The layer (without bias), shared by members with these fast
    /// weights and biases.
    pub(crate) fn with_fast_weights(self, fast: FastWeights) -> Self {
        Self {
            fast: Some(fast),
            ..self
        }
    }

    /// The (shared) weight `[d_out, d_in]`.
    pub(crate) fn weight(&self) -> &Tensor {
        &self.linear.ws
    }
}

impl Module for Linear {
    fn forward(&self, xs: &Tensor) -> Tensor {
        let shared = |xs: &Tensor| {
            let out = self.linear.forward(xs);
            add(|| out.numel() as i64 * self.linear.ws.size()[1]);
            out
        };
        match (&self.fast, &self.flipout) {
            (Some(fast), _) => fast.forward(xs, shared),
            (None, Some(flipout)) => shared(xs) + perturbation(flipout, xs, &self.linear.ws),
            (None, None) => shared(xs),
        }
    }
}
