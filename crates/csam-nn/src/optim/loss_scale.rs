//! Dynamic loss scaling for float16 training, as `torch.amp.GradScaler`.
//!
//! float16 has 5 exponent bits: gradients below about 6e-8 round to zero in
//! its backward pass. The steps therefore multiply each loss by a scale `S`
//! before backward and divide the gradients by `S` right after it
//! ([`BaseOptimizer::loss_scale`]), so small gradients survive the float16
//! ops and the optimiser sees the true gradient in float32. When `S` was too
//! large, some gradient overflowed: the update then holds an infinity or a
//! NaN, the step is skipped (weights and optimiser state unchanged, as
//! `GradScaler.step` skips `optimizer.step()`), and `S` is multiplied by
//! `backoff_factor`. After `growth_interval` updates in a row without
//! overflow, `S` is multiplied by `growth_factor`. PyTorch's defaults are
//! [`LossScaleConfig::default`].
//!
//! Under SAM both passes' losses are multiplied by the step's `S` and both
//! gradients divided by it; an overflow in either pass skips the step (a
//! non-finite first gradient makes the perturbed weights, hence the second
//! gradient, non-finite). The scale and the count of updates since the last
//! change are optimiser state: checkpointed with it, restored on resume.

use super::{BaseOptimizer, OptimError, Params};
use tch::{Device, Kind, Tensor};

/// State entry names in [`BaseOptimizer::state`].
const SCALE: &str = "loss_scale.scale";
const GROWTH_TRACKER: &str = "loss_scale.growth_tracker";

/// `torch.amp.GradScaler`'s parameters.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LossScaleConfig {
    /// The scale of the first step.
    pub init_scale: f64,
    /// What the scale is multiplied by after `growth_interval` clean updates.
    pub growth_factor: f64,
    /// What the scale is multiplied by after an overflow.
    pub backoff_factor: f64,
    /// Clean updates in a row before the scale grows.
    pub growth_interval: u64,
}

impl Default for LossScaleConfig {
    /// `GradScaler()`'s defaults: `2^16`, x2 every 2000 clean steps, x0.5 on
    /// an overflow.
    fn default() -> Self {
        Self {
            init_scale: 65536.0,
            growth_factor: 2.0,
            backoff_factor: 0.5,
            growth_interval: 2000,
        }
    }
}

impl LossScaleConfig {
    /// Checks the ranges `GradScaler` asserts.
    fn validate(&self) -> Result<(), OptimError> {
        let bad = |what: &str| Err(OptimError::Config(format!("loss scaling: {what}")));
        if !(self.init_scale.is_finite() && self.init_scale > 0.0) {
            return bad(&format!("init_scale must be > 0, got {}", self.init_scale));
        }
        if !(self.growth_factor.is_finite() && self.growth_factor > 1.0) {
            return bad(&format!(
                "growth_factor must be > 1, got {}",
                self.growth_factor
            ));
        }
        if !(self.backoff_factor > 0.0 && self.backoff_factor < 1.0) {
            return bad(&format!(
                "backoff_factor must lie in (0, 1), got {}",
                self.backoff_factor
            ));
        }
        if self.growth_interval == 0 {
            return bad("growth_interval must be >= 1");
        }
        Ok(())
    }
}

/// A base optimiser whose steps run with dynamic loss scaling (module docs).
pub struct LossScaled {
    inner: Box<dyn BaseOptimizer>,
    config: LossScaleConfig,
    scale: f64,
    /// Updates in a row without overflow since the scale last changed.
    growth_tracker: u64,
    skipped_last_step: bool,
}

impl LossScaled {
    /// `inner` with loss scaling from `config.init_scale`.
    pub fn new(inner: Box<dyn BaseOptimizer>, config: LossScaleConfig) -> Result<Self, OptimError> {
        config.validate()?;
        Ok(Self {
            inner,
            config,
            scale: config.init_scale,
            growth_tracker: 0,
            skipped_last_step: false,
        })
    }

    /// The scale the next step multiplies its losses by.
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// Records the step's outcome as `GradScaler.update` does.
    fn update(&mut self, overflowed: bool) {
        self.skipped_last_step = overflowed;
        if overflowed {
            self.scale *= self.config.backoff_factor;
            self.growth_tracker = 0;
            return;
        }
        self.growth_tracker += 1;
        if self.growth_tracker == self.config.growth_interval {
            self.scale *= self.config.growth_factor;
            self.growth_tracker = 0;
        }
    }
}

/// Whether any entry of `grads` is infinite or NaN (one host read).
fn any_non_finite(grads: &[Tensor]) -> Result<bool, OptimError> {
    let _guard = tch::no_grad_guard();
    let flags: Vec<Tensor> = grads
        .iter()
        .map(|g| g.f_isfinite()?.f_all())
        .collect::<Result<_, _>>()?;
    let all_finite = Tensor::f_stack(&flags, 0)?.f_all()?;
    Ok(all_finite.f_int64_value(&[])? == 0)
}

impl BaseOptimizer for LossScaled {
    fn params(&self) -> &Params {
        self.inner.params()
    }

    fn learning_rate(&self) -> f64 {
        self.inner.learning_rate()
    }

    fn set_learning_rate(&mut self, lr: f64) {
        self.inner.set_learning_rate(lr)
    }

    fn loss_scale(&self) -> f64 {
        self.scale
    }

    fn skipped_last_step(&self) -> bool {
        self.skipped_last_step
    }

    fn step(&mut self, grads: &[Tensor]) -> Result<(), OptimError> {
        let overflowed = grads.is_empty() || any_non_finite(grads)?;
        if !overflowed {
            self.inner.step(grads)?;
        }
        self.update(overflowed);
        Ok(())
    }

    fn reduce_gradient(&self, grads: Vec<Tensor>, rows: usize) -> Result<Vec<Tensor>, OptimError> {
        self.inner.reduce_gradient(grads, rows)
    }

    fn ascent_momentum(&self) -> Option<&Tensor> {
        self.inner.ascent_momentum()
    }

    fn reduced_backward(
        &self,
        objective: &Tensor,
        params: &[Tensor],
        rows: usize,
    ) -> Result<Vec<Tensor>, OptimError> {
        self.inner.reduced_backward(objective, params, rows)
    }

    fn state(&self) -> Vec<(String, Tensor)> {
        let mut state = self.inner.state();
        let on_host = (Kind::Double, Device::Cpu);
        state.push((SCALE.into(), Tensor::full([], self.scale, on_host)));
        state.push((
            GROWTH_TRACKER.into(),
            Tensor::full([], self.growth_tracker as f64, on_host),
        ));
        state
    }

    fn load_state(&mut self, state: &[(String, Tensor)]) -> Result<(), OptimError> {
        let entry = |name: &str| -> Result<f64, OptimError> {
            let (_, t) = state.iter().find(|(n, _)| n == name).ok_or_else(|| {
                OptimError::Mismatch(format!(
                    "state entry '{name}' is missing (a float16 run's checkpoint holds the \
                     loss scale; this one was not written by one)"
                ))
            })?;
            Ok(t.f_double_value(&[])?)
        };
        let (scale, tracker) = (entry(SCALE)?, entry(GROWTH_TRACKER)?);
        if !(scale.is_finite() && scale > 0.0) || tracker < 0.0 || tracker.fract() != 0.0 {
            return Err(OptimError::Mismatch(format!(
                "loss scale state out of range: scale {scale}, growth tracker {tracker}"
            )));
        }
        let inner: Vec<(String, Tensor)> = state
            .iter()
            .filter(|(n, _)| n != SCALE && n != GROWTH_TRACKER)
            .map(|(n, t)| (n.clone(), t.shallow_clone()))
            .collect();
        self.inner.load_state(&inner)?;
        self.scale = scale;
        self.growth_tracker = tracker as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optim::{Sgd, SgdConfig};
    use tch::nn::VarStore;

    fn scaled(config: LossScaleConfig) -> LossScaled {
        let vs = VarStore::new(Device::Cpu);
        let _w = vs.root().zeros("w", &[2]);
        LossScaled::new(
            Box::new(Sgd::new(&vs, SgdConfig::default()).unwrap()),
            config,
        )
        .unwrap()
    }

    #[test]
    fn overflow_skips_and_backs_off_clean_steps_grow_the_scale() {
        let config = LossScaleConfig {
            init_scale: 8.0,
            growth_interval: 2,
            ..LossScaleConfig::default()
        };
        let mut opt = scaled(config);
        let w = opt.params().tensors()[0].shallow_clone();
        let inf = Tensor::from_slice(&[1.0f32, f32::INFINITY]);
        opt.step(&[inf]).unwrap();
        assert!(opt.skipped_last_step());
        assert_eq!(opt.scale(), 4.0);
        assert_eq!(Vec::<f32>::try_from(&w).unwrap(), [0.0, 0.0]);
        let g = Tensor::from_slice(&[1.0f32, 1.0]);
        opt.step(&[g.shallow_clone()]).unwrap();
        assert!(!opt.skipped_last_step());
        assert_eq!(opt.scale(), 4.0);
        assert_ne!(Vec::<f32>::try_from(&w).unwrap(), [0.0, 0.0]);
        opt.step(&[g]).unwrap();
        assert_eq!(opt.scale(), 8.0);
        let nan = Tensor::from_slice(&[f32::NAN, 1.0]);
        opt.step(&[nan]).unwrap();
        assert_eq!(opt.scale(), 4.0);
    }

    #[test]
    fn state_round_trips_and_is_required() {
        let config = LossScaleConfig {
            init_scale: 8.0,
            growth_interval: 3,
            ..LossScaleConfig::default()
        };
        let mut opt = scaled(config);
        opt.step(&[Tensor::from_slice(&[1.0f32, 1.0])]).unwrap();
        opt.step(&[Tensor::from_slice(&[f32::INFINITY, 1.0])])
            .unwrap();
        opt.step(&[Tensor::from_slice(&[1.0f32, 1.0])]).unwrap();
        let state: Vec<(String, Tensor)> = opt
            .state()
            .into_iter()
            .map(|(n, t)| (n, t.copy()))
            .collect();
        let mut fresh = scaled(config);
        fresh.load_state(&state).unwrap();
        assert_eq!((fresh.scale, fresh.growth_tracker), (4.0, 1));
        let without: Vec<(String, Tensor)> =
            state.into_iter().filter(|(n, _)| n != SCALE).collect();
        let error = fresh.load_state(&without).unwrap_err().to_string();
        assert!(error.contains("loss_scale.scale"), "{error}");
    }

    #[test]
    fn bad_settings_are_refused() {
        for config in [
            LossScaleConfig {
                init_scale: 0.0,
                ..LossScaleConfig::default()
            },
            LossScaleConfig {
                growth_factor: 1.0,
                ..LossScaleConfig::default()
            },
            LossScaleConfig {
                backoff_factor: 1.0,
                ..LossScaleConfig::default()
            },
            LossScaleConfig {
                growth_interval: 0,
                ..LossScaleConfig::default()
            },
        ] {
            let vs = VarStore::new(Device::Cpu);
            let _w = vs.root().zeros("w", &[2]);
            let sgd = Sgd::new(&vs, SgdConfig::default()).unwrap();
            assert!(
                LossScaled::new(Box::new(sgd), config).is_err(),
                "{config:?}"
            );
        }
    }
}
