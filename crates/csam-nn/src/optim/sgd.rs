//! Stochastic gradient descent with momentum, as `torch.optim.SGD`.

use super::flat::{chunk_views, flatten};
use super::params::load_entries;
use super::update::update_elementwise;
use super::{BaseOptimizer, OptimError, Params};
use tch::{nn::VarStore, Tensor};

/// Hyperparameters of [`Sgd`] (dampening is always 0).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SgdConfig {
    pub lr: f64,
    pub momentum: f64,
    pub nesterov: bool,
    /// L2 penalty coupled into the gradient (`d = g + weight_decay * theta`).
    pub weight_decay: f64,
}

impl Default for SgdConfig {
    /// Momentum 0.9 as in the experiment protocol (docs/conventions.md), lr 0.1
    /// and weight decay 5e-4 from its grid.
    fn default() -> Self {
        Self {
            lr: 0.1,
            momentum: 0.9,
            nesterov: false,
            weight_decay: 5e-4,
        }
    }
}

/// SGD exactly as `torch.optim.SGD` with `dampening = 0`:
///
/// `d = g + wd * theta`; with momentum `mu > 0`: `b = mu * b + d` (b = d on the
/// first step), `d = d + mu * b` if Nesterov else `d = b`; then
/// `theta = theta - lr * d`.
#[derive(Debug)]
pub struct Sgd {
    params: Params,
    config: SgdConfig,
    /// The momentum buffers of all parameters, concatenated (one kernel per
    /// operation instead of one per tensor); zero-initialised (`0 * mu + d = d`
    /// reproduces PyTorch's first-step `b = d` exactly); `None` without momentum.
    momentum_buffer: Option<Tensor>,
}

impl Sgd {
    /// SGD over the trainable variables of `vs`.
    pub fn new(vs: &VarStore, config: SgdConfig) -> Result<Self, OptimError> {
        validate(&config)?;
        let params = Params::from_var_store(vs);
        if params.is_empty() {
            return Err(OptimError::Config("no trainable parameters".into()));
        }
        let momentum_buffer = if config.momentum > 0.0 {
            Some(tch::no_grad(|| flatten(params.tensors()))?.zeros_like())
        } else {
            None
        };
        Ok(Self {
            params,
            config,
            momentum_buffer,
        })
    }

    /// The hyperparameters (with the current learning rate).
    pub fn config(&self) -> &SgdConfig {
        &self.config
    }
}

fn validate(c: &SgdConfig) -> Result<(), OptimError> {
    let bad = |what: &str| Err(OptimError::Config(format!("SGD {what}")));
    if !(c.lr.is_finite() && c.lr >= 0.0) {
        return bad(&format!(
            "learning rate must be finite and >= 0, got {}",
            c.lr
        ));
    }
    if !(0.0..1.0).contains(&c.momentum) {
        return bad(&format!("momentum must be in [0, 1), got {}", c.momentum));
    }
    if !(c.weight_decay.is_finite() && c.weight_decay >= 0.0) {
        return bad(&format!(
            "weight decay must be >= 0, got {}",
            c.weight_decay
        ));
    }
    if c.nesterov && c.momentum == 0.0 {
        return bad("Nesterov momentum requires momentum > 0");
    }
    Ok(())
}

impl BaseOptimizer for Sgd {
    fn params(&self) -> &Params {
        &self.params
    }

    fn learning_rate(&self) -> f64 {
        self.config.lr
    }

    fn set_learning_rate(&mut self, lr: f64) {
        self.config.lr = lr;
    }

    fn step(&mut self, grads: &[Tensor]) -> Result<(), OptimError> {
        self.params.check_aligned(grads, "gradient")?;
        let SgdConfig {
            lr,
            momentum,
            nesterov,
            weight_decay,
        } = self.config;
        let buffers: Vec<&Tensor> = self.momentum_buffer.iter().collect();
        update_elementwise(
            self.params.tensors(),
            grads,
            &buffers,
            |theta, grad, state| {
                let mut direction = match weight_decay {
                    0.0 => grad.shallow_clone(),
                    _ => grad.f_add(&theta.f_mul_scalar(weight_decay)?)?,
                };
                if let [buf] = state {
                    let _ = buf.f_mul_scalar_(momentum)?.f_add_(&direction)?;
                    direction = match nesterov {
                        true => direction.f_add(&buf.f_mul_scalar(momentum)?)?,
                        false => buf.shallow_clone(),
                    };
                }
                let _ = theta.f_add_(&direction.f_mul_scalar(-lr)?)?;
                Ok(())
            },
        )
    }

    fn ascent_momentum(&self) -> Option<&Tensor> {
        match self.config.nesterov {
            true => None,
            false => self.momentum_buffer.as_ref(),
        }
    }

    fn state(&self) -> Vec<(String, Tensor)> {
        let Some(buf) = &self.momentum_buffer else {
            return Vec::new();
        };
        // Views of a buffer shaped like the parameters: an invariant, not input.
        let views = chunk_views(buf, self.params.tensors()).expect("momentum buffer layout");
        self.params
            .names()
            .iter()
            .zip(views)
            .map(|(n, b)| (format!("{n}.momentum_buffer"), b))
            .collect()
    }

    fn load_state(&mut self, state: &[(String, Tensor)]) -> Result<(), OptimError> {
        let Some(buf) = &self.momentum_buffer else {
            return Ok(());
        };
        let mut views = chunk_views(buf, self.params.tensors())?;
        let targets = self
            .params
            .names()
            .iter()
            .zip(views.iter_mut())
            .map(|(name, view)| (format!("{name}.momentum_buffer"), view))
            .collect();
        load_entries(state, targets)
    }
}
