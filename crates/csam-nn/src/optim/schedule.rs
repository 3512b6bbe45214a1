//! Learning-rate schedules: pure functions `lr(step)` of the 0-based step index.
//!
//! The unit of a step (iteration or epoch) is the caller's choice; the training
//! loop calls [`LrSchedule::lr`] and passes the value to
//! [`super::BaseOptimizer::set_learning_rate`].

use super::OptimError;
use std::f64::consts::PI;

/// A learning-rate schedule.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LrSchedule {
    /// `lr(t) = lr`.
    Constant { lr: f64 },
    /// Linear warm-up then cosine decay (the experiment protocol's schedule,
    /// docs/conventions.md):
    /// `lr(t) = base_lr * (t + 1) / warmup_steps` for `t < warmup_steps`, then
    /// `min_lr + (base_lr - min_lr) * (1 + cos(pi * (t - w) / (total_steps - w))) / 2`,
    /// and `min_lr` from `total_steps` on. The warm-up ramps from
    /// `base_lr / warmup_steps` (which may lie below `min_lr`). Without warm-up this is
    /// `torch.optim.lr_scheduler.CosineAnnealingLR(T_max = total_steps, eta_min = min_lr)`.
    Cosine {
        base_lr: f64,
        min_lr: f64,
        warmup_steps: u64,
        total_steps: u64,
    },
    /// `lr(t) = base_lr * gamma^floor(t / step_size)` (`torch.optim.lr_scheduler.StepLR`).
    Step {
        base_lr: f64,
        step_size: u64,
        gamma: f64,
    },
}

impl LrSchedule {
    /// Checks the parameters: rates finite and >= 0, `warmup_steps < total_steps`,
    /// `step_size >= 1`, `gamma` in `(0, 1]`.
    pub fn validate(&self) -> Result<(), OptimError> {
        let rate_ok = |lr: f64| lr.is_finite() && lr >= 0.0;
        let problem = match *self {
            Self::Constant { lr } if !rate_ok(lr) => Some(format!("lr {lr} must be >= 0")),
            Self::Cosine {
                base_lr, min_lr, ..
            } if !(rate_ok(base_lr) && rate_ok(min_lr)) => Some(format!(
                "cosine rates base {base_lr} and min {min_lr} must be >= 0"
            )),
            Self::Cosine {
                warmup_steps,
                total_steps,
                ..
            } if warmup_steps >= total_steps => Some(format!(
                "cosine warm-up ({warmup_steps} steps) must be shorter than the run ({total_steps} steps)"
            )),
            Self::Step { base_lr, .. } if !rate_ok(base_lr) => {
                Some(format!("step base lr {base_lr} must be >= 0"))
            }
            Self::Step { step_size: 0, .. } => Some("step_size must be >= 1".to_string()),
            Self::Step { gamma, .. } if !(gamma > 0.0 && gamma <= 1.0) => {
                Some(format!("step gamma {gamma} must be in (0, 1]"))
            }
            _ => None,
        };
        match problem {
            Some(p) => Err(OptimError::Config(format!("learning-rate schedule: {p}"))),
            None => Ok(()),
        }
    }

    /// The learning rate at 0-based step `t`.
    pub fn lr(&self, t: u64) -> f64 {
        match *self {
            Self::Constant { lr } => lr,
            Self::Cosine {
                base_lr,
                min_lr,
                warmup_steps,
                total_steps,
            } => {
                if t < warmup_steps {
                    return base_lr * (t + 1) as f64 / warmup_steps as f64;
                }
                if t >= total_steps {
                    return min_lr;
                }
                let progress = (t - warmup_steps) as f64 / (total_steps - warmup_steps) as f64;
                min_lr + (base_lr - min_lr) * (1.0 + (PI * progress).cos()) / 2.0
            }
            Self::Step {
                base_lr,
                step_size,
                gamma,
            } => {
                let decays = (t / step_size.max(1)).min(i32::MAX as u64) as i32;
                base_lr * gamma.powi(decays)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::LrSchedule;

    // Pure-Rust f64: a learning rate <= 1 is a handful of operations and one
    // cos (< 1 ulp in libm), a few ulps (~1e-15); 1e-12 leaves 1000x room.
    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn cosine_with_warmup_hand_values() {
        let s = LrSchedule::Cosine {
            base_lr: 0.1,
            min_lr: 0.0,
            warmup_steps: 4,
            total_steps: 14,
        };
        s.validate().unwrap();
        // Warm-up: 0.1 * (t + 1) / 4.
        for (t, lr) in [(0, 0.025), (1, 0.05), (2, 0.075), (3, 0.1)] {
            assert!(close(s.lr(t), lr), "t={t}: {}", s.lr(t));
        }
        // Decay over 10 steps: 0.05 (1 + cos(pi k / 10)).
        assert!(close(s.lr(4), 0.1));
        assert!(close(s.lr(9), 0.05)); // k = 5: cos(pi/2) = 0
        assert!(close(s.lr(6), 0.05 * (1.0 + 0.809_016_994_374_947_5))); // cos(pi/5)
        assert!(close(s.lr(14), 0.0));
        assert!(close(s.lr(1000), 0.0));
    }

    #[test]
    fn cosine_without_warmup_has_a_floor() {
        let s = LrSchedule::Cosine {
            base_lr: 1.0,
            min_lr: 0.2,
            warmup_steps: 0,
            total_steps: 4,
        };
        // 0.2 + 0.4 (1 + cos(pi t / 4)).
        let expected = [
            1.0,
            0.2 + 0.4 * (1.0 + std::f64::consts::FRAC_1_SQRT_2),
            0.6,
        ];
        for (t, lr) in expected.iter().enumerate() {
            assert!(close(s.lr(t as u64), *lr), "t={t}");
        }
        assert!(close(s.lr(4), 0.2));
    }

    #[test]
    fn step_decay_hand_values() {
        let s = LrSchedule::Step {
            base_lr: 0.1,
            step_size: 30,
            gamma: 0.1,
        };
        for (t, lr) in [
            (0, 0.1),
            (29, 0.1),
            (30, 0.01),
            (59, 0.01),
            (60, 0.001),
            (95, 0.0001),
        ] {
            assert!(close(s.lr(t), lr), "t={t}: {}", s.lr(t));
        }
        assert_eq!(LrSchedule::Constant { lr: 0.3 }.lr(12345), 0.3);
    }

    #[test]
    fn invalid_schedules_are_errors() {
        let bad = [
            LrSchedule::Constant { lr: -1.0 },
            LrSchedule::Cosine {
                base_lr: 0.1,
                min_lr: 0.0,
                warmup_steps: 5,
                total_steps: 5,
            },
            LrSchedule::Step {
                base_lr: 0.1,
                step_size: 0,
                gamma: 0.1,
            },
            LrSchedule::Step {
                base_lr: 0.1,
                step_size: 3,
                gamma: 0.0,
            },
        ];
        for s in bad {
            assert!(s.validate().is_err(), "{s:?}");
        }
    }

    #[test]
    fn serde_round_trip() {
        let s = LrSchedule::Cosine {
            base_lr: 0.1,
            min_lr: 0.0,
            warmup_steps: 2,
            total_steps: 10,
        };
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains("\"kind\":\"cosine\""), "{json}");
        assert_eq!(serde_json::from_str::<LrSchedule>(&json).unwrap(), s);
    }
}

#[cfg(test)]
mod properties {
    use super::LrSchedule;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn cosine_rises_during_warmup_then_decays_within_its_bounds(
            base in 1e-4f64..1.0,
            min_frac in 0.0f64..1.0,
            warmup in 0u64..20,
            extra in 1u64..200,
        ) {
            let min_lr = base * min_frac;
            let s = LrSchedule::Cosine { base_lr: base, min_lr, warmup_steps: warmup, total_steps: warmup + extra };
            prop_assert!(s.validate().is_ok());
            let lrs: Vec<f64> = (0..warmup + extra + 5).map(|t| s.lr(t)).collect();
            for (t, w) in lrs.windows(2).enumerate() {
                let t = t as u64 + 1;
                if t < warmup {
                    prop_assert!(w[1] > w[0], "warm-up must rise at {}", t);
                } else {
                    // Rates < 1 from ~5 f64 operations and a cos: each within
                    // ~3 ulps (<= 7e-16), so 1e-15 absorbs round-off only.
                    prop_assert!(w[1] <= w[0] + 1e-15, "must not rise at {}", t);
                }
            }
            // Warm-up ramps from base / warmup (possibly below min_lr) up to base.
            prop_assert!(lrs.iter().all(|&lr| lr > 0.0 || min_lr == 0.0));
            let after_warmup = &lrs[warmup as usize..];
            // Same few-ulp round-off of rates < 1 as above; at the warm-up's end
            // cos(0) = 1 is exact and min + (base - min) is within 1 ulp of base.
            prop_assert!(after_warmup.iter().all(|&lr| lr >= min_lr - 1e-15 && lr <= base + 1e-15));
            prop_assert!((s.lr(warmup) - base).abs() < 1e-15);
        }
    }
}
