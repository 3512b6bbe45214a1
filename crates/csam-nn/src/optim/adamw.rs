//! Adam with decoupled weight decay, as `torch.optim.AdamW`.

use super::flat::{chunk_views, flatten};
use super::params::load_entries;
use super::update::update_elementwise;
use super::{BaseOptimizer, OptimError, Params};
use tch::{nn::VarStore, Tensor};

/// Hyperparameters of [`AdamW`] (no AMSGrad).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AdamWConfig {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    /// Decoupled decay: `theta = theta * (1 - lr * weight_decay)` before the Adam update.
    pub weight_decay: f64,
}

impl Default for AdamWConfig {
    /// PyTorch's defaults: lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 1e-2.
    fn default() -> Self {
        Self {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 1e-2,
        }
    }
}

/// AdamW exactly as `torch.optim.AdamW` (single-tensor path): at step t,
/// `theta *= 1 - lr * wd`; `m = lerp(m, g, 1 - beta1)`;
/// `v = beta2 * v + (1 - beta2) g^2`;
/// `theta -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)`.
#[derive(Debug)]
pub struct AdamW {
    params: Params,
    config: AdamWConfig,
    /// First and second moments of all parameters, each concatenated into one
    /// buffer (one kernel per operation instead of one per tensor).
    exp_avg: Tensor,
    exp_avg_sq: Tensor,
    /// Number of steps taken.
    steps: u64,
}

impl AdamW {
    /// AdamW over the trainable variables of `vs`.
    pub fn new(vs: &VarStore, config: AdamWConfig) -> Result<Self, OptimError> {
        validate(&config)?;
        let params = Params::from_var_store(vs);
        if params.is_empty() {
            return Err(OptimError::Config("no trainable parameters".into()));
        }
        let zeros = tch::no_grad(|| flatten(params.tensors()))?.zeros_like();
        Ok(Self {
            exp_avg: zeros.zeros_like(),
            exp_avg_sq: zeros,
            params,
            config,
            steps: 0,
        })
    }

    /// The hyperparameters (with the current learning rate).
    pub fn config(&self) -> &AdamWConfig {
        &self.config
    }
}

fn validate(c: &AdamWConfig) -> Result<(), OptimError> {
    let bad = |what: String| Err(OptimError::Config(format!("AdamW {what}")));
    if !(c.lr.is_finite() && c.lr >= 0.0) {
        return bad(format!(
            "learning rate must be finite and >= 0, got {}",
            c.lr
        ));
    }
    for (name, beta) in [("beta1", c.beta1), ("beta2", c.beta2)] {
        if !(0.0..1.0).contains(&beta) {
            return bad(format!("{name} must be in [0, 1), got {beta}"));
        }
    }
    if !(c.eps.is_finite() && c.eps > 0.0) {
        return bad(format!("eps must be > 0, got {}", c.eps));
    }
    if !(c.weight_decay.is_finite() && c.weight_decay >= 0.0) {
        return bad(format!("weight decay must be >= 0, got {}", c.weight_decay));
    }
    Ok(())
}

impl BaseOptimizer for AdamW {
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
        let AdamWConfig {
            lr,
            beta1,
            beta2,
            eps,
            weight_decay,
        } = self.config;
        self.steps += 1;
        // Step counts beyond i32::MAX make both powers 0 anyway.
        let t = i32::try_from(self.steps).unwrap_or(i32::MAX);
        let step_size = lr / (1.0 - beta1.powi(t));
        let bias_correction2_sqrt = (1.0 - beta2.powi(t)).sqrt();
        let moments = [&self.exp_avg, &self.exp_avg_sq];
        update_elementwise(
            self.params.tensors(),
            grads,
            &moments,
            |theta, grad, state| {
                let [m, v] = state else {
                    return Err(OptimError::Mismatch("AdamW keeps two moments".into()));
                };
                if weight_decay != 0.0 {
                    let _ = theta.f_mul_scalar_(1.0 - lr * weight_decay)?;
                }
                let _ = m.f_lerp_(grad, 1.0 - beta1)?;
                let _ = v
                    .f_mul_scalar_(beta2)?
                    .f_addcmul_(&grad.f_mul_scalar(1.0 - beta2)?, grad)?;
                let denom = (v.f_sqrt()? / bias_correction2_sqrt) + eps;
                let _ = theta.f_addcdiv_(&m.f_mul_scalar(-step_size)?, &denom)?;
                Ok(())
            },
        )
    }

    fn state(&self) -> Vec<(String, Tensor)> {
        // f64 holds every step count below 2^53 exactly.
        let step = Tensor::from_slice(&[self.steps as f64]).to_device(self.exp_avg.device());
        let mut state = vec![("step".to_string(), step)];
        // Views of buffers shaped like the parameters: an invariant, not input.
        let like = self.params.tensors();
        let m = chunk_views(&self.exp_avg, like).expect("moment buffer layout");
        let v = chunk_views(&self.exp_avg_sq, like).expect("moment buffer layout");
        for (name, (m, v)) in self.params.names().iter().zip(m.into_iter().zip(v)) {
            state.push((format!("{name}.exp_avg"), m));
            state.push((format!("{name}.exp_avg_sq"), v));
        }
        state
    }

    fn load_state(&mut self, state: &[(String, Tensor)]) -> Result<(), OptimError> {
        let step = state
            .iter()
            .find(|(n, _)| n == "step")
            .ok_or_else(|| OptimError::Mismatch("state entry 'step' is missing".into()))?;
        let steps = match step.1.numel() {
            1 => step.1.f_double_value(&[0])?,
            n => {
                return Err(OptimError::Mismatch(format!(
                    "state entry 'step' must hold one value, has {n}"
                )))
            }
        };
        if !(steps >= 0.0 && steps.fract() == 0.0) {
            return Err(OptimError::Mismatch(format!(
                "state entry 'step' must be a non-negative integer, got {steps}"
            )));
        }
        let like = self.params.tensors();
        let mut m = chunk_views(&self.exp_avg, like)?;
        let mut v = chunk_views(&self.exp_avg_sq, like)?;
        let mut targets = Vec::with_capacity(2 * like.len());
        for (name, (m, v)) in self
            .params
            .names()
            .iter()
            .zip(m.iter_mut().zip(v.iter_mut()))
        {
            targets.push((format!("{name}.exp_avg"), m));
            targets.push((format!("{name}.exp_avg_sq"), v));
        }
        load_entries(state, targets)?;
        self.steps = steps as u64;
        Ok(())
    }
}
