//! The training loss as a function of the weights, with exact
//! Hessian-vector products by double backward (docs/theory.md).
//!
//! `L(theta) = sum_b (n_b / n) CE_b(theta)`, the mean cross entropy over a
//! fixed list of batches (n examples in all), with the model in eval mode
//! (dropout off, BatchNorm on its running statistics) so that `L` is a
//! deterministic function of theta. Vectors over the weights are flat 1-D
//! tensors in the order of the parameter list.

use tch::{nn::ModuleT, Kind, Tensor};

use super::{CurvatureError, Result};
use crate::loss::cross_entropy;
use crate::optim::flat::{chunk_views, flatten, scatter};

/// A model's training loss over fixed batches, as a function of `params`.
pub struct LossSurface<'a, M: ModuleT + ?Sized> {
    model: &'a M,
    params: Vec<Tensor>,
    /// `(inputs, targets, n_b / n)`.
    batches: Vec<(Tensor, Tensor, f64)>,
}

impl<'a, M: ModuleT + ?Sized> LossSurface<'a, M> {
    /// The loss of `model` over `batches` (inputs `[B, ...]`, int64 targets
    /// `[B]`), differentiated with respect to `params` (the trainable
    /// variables the model reads, e.g. `VarStore::trainable_variables`).
    pub fn new(model: &'a M, params: Vec<Tensor>, batches: Vec<(Tensor, Tensor)>) -> Result<Self> {
        let n: i64 = batches.iter().map(|(_, y)| y.size()[0]).sum();
        if n == 0 || params.is_empty() {
            return Err(CurvatureError::Invalid(
                "the loss surface needs at least one example and one parameter".into(),
            ));
        }
        let batches = batches
            .into_iter()
            .map(|(x, y)| {
                let share = y.size()[0] as f64 / n as f64;
                (x, y, share)
            })
            .collect();
        Ok(LossSurface {
            model,
            params,
            batches,
        })
    }

    /// Number of weights (the dimension of the Hessian).
    pub fn dim(&self) -> i64 {
        self.params.iter().map(|p| p.numel() as i64).sum()
    }

    /// The floating-point kind and device of the weights.
    pub fn options(&self) -> (Kind, tch::Device) {
        (self.params[0].kind(), self.params[0].device())
    }

    /// The current weights, flattened (a copy).
    pub fn weights(&self) -> Result<Tensor> {
        Ok(tch::no_grad(|| flatten(&self.params))?)
    }

    /// Overwrites the weights with the flat `values`.
    pub fn set_weights(&self, values: &Tensor) -> Result<()> {
        Ok(scatter(values, &self.params)?)
    }

    /// `L(theta)` at the current weights.
    pub fn loss(&self) -> Result<f64> {
        let _guard = tch::no_grad_guard();
        let mut total = 0.0;
        for (x, y, share) in &self.batches {
            total += share * self.batch_loss(x, y)?.double_value(&[]);
        }
        Ok(total)
    }

    /// `grad L(theta)`, flattened.
    pub fn gradient(&self) -> Result<Tensor> {
        let mut sum: Option<Tensor> = None;
        for (x, y, share) in &self.batches {
            let loss = self.differentiable_loss(x, y, *share)?;
            let grads = Tensor::f_run_backward(&[&loss], &self.params, false, false)?;
            sum = Some(self.accumulate(sum, grads)?);
        }
        // Invariant: `new` refuses an empty batch list.
        Ok(sum.expect("at least one batch"))
    }

    /// `H v` with `H = hess L(theta)`, exactly: for each batch, `g_b` with its
    /// graph (create_graph), then the gradient of `<g_b, v>`, weighted by the
    /// batch's share.
    pub fn hessian_vector_product(&self, v: &Tensor) -> Result<Tensor> {
        let v_parts = chunk_views(v, &self.params)?;
        let mut sum: Option<Tensor> = None;
        for (x, y, share) in &self.batches {
            let loss = self.differentiable_loss(x, y, *share)?;
            let grads = Tensor::f_run_backward(&[&loss], &self.params, true, true)?;
            let dot = grads
                .iter()
                .zip(&v_parts)
                .filter(|(g, _)| g.defined())
                .map(|(g, v)| (g * v).sum(None))
                .fold(Tensor::zeros([], (g_kind(&grads), v.device())), |a, b| {
                    a + b
                });
            let hv = if dot.requires_grad() {
                Tensor::f_run_backward(&[&dot], &self.params, false, false)?
            } else {
                // The loss is linear in every weight: the Hessian is 0.
                Vec::new()
            };
            sum = Some(self.accumulate(sum, hv)?);
        }
        Ok(sum.expect("at least one batch"))
    }

    fn batch_loss(&self, x: &Tensor, y: &Tensor) -> Result<Tensor> {
        let logits = self.model.forward_t(x, false);
        Ok(cross_entropy(&logits, y)?)
    }

    /// `share * batch loss` with its autograd graph; refused without one
    /// (under a no_grad guard), where libtorch's backward would crash.
    fn differentiable_loss(&self, x: &Tensor, y: &Tensor, share: f64) -> Result<Tensor> {
        let loss = self.batch_loss(x, y)? * share;
        if !loss.requires_grad() {
            return Err(CurvatureError::Invalid(
                "the loss has no gradient graph (called under no_grad, or it does not \
                 depend on the weights)"
                    .into(),
            ));
        }
        Ok(loss)
    }

    /// `sum + flatten(grads)`; a gradient the backward pass left undefined
    /// (a weight the output does not depend on) counts as zero.
    fn accumulate(&self, sum: Option<Tensor>, grads: Vec<Tensor>) -> Result<Tensor> {
        let _guard = tch::no_grad_guard();
        let grads: Vec<Tensor> = self
            .params
            .iter()
            .enumerate()
            .map(|(i, p)| match grads.get(i) {
                Some(g) if g.defined() => g.detach(),
                _ => p.zeros_like(),
            })
            .collect();
        let flat = flatten(&grads)?;
        Ok(match sum {
            Some(sum) => sum + flat,
            None => flat,
        })
    }
}

fn g_kind(grads: &[Tensor]) -> Kind {
    grads.first().map_or(Kind::Float, Tensor::kind)
}
