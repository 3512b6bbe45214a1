//! AE-SAM (Jiang, Yang, Zhang and Kwok 2023, "An Adaptive Policy to Employ
//! Sharpness-Aware Minimization", ICLR, Algorithm 1): SAM only where the
//! loss landscape looks sharp, judged by the squared norm of the stochastic
//! gradient against its running mean and deviation.

use super::Horizon;
use crate::loss::{Fields, LossError};

/// With `G_t = ||g_t||^2` of the step's plain gradient,
/// `mu_t = delta mu_{t-1} + (1 - delta) G_t` and
/// `sigma_t^2 = delta sigma_{t-1}^2 + (1 - delta) (G_t - mu_t)^2`
/// (`mu_{-1} = sigma_{-1}^2 = 0`), the step is a SAM step when
/// `G_t >= mu_t + c_t sigma_t`, `c_t = lambda1 + (lambda2 - lambda1) t / T`
/// scheduled linearly over the run's `T` steps, and a plain (ERM) step with
/// `g_t` otherwise. Defaults `delta = 0.9`, `lambda1 = -1`, `lambda2 = 1`,
/// the paper's CIFAR settings (SAM on about half of the steps). `(mu,
/// sigma^2)` are carried from step to step and checkpointed.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AeSam {
    /// The moving averages' factor delta in [0, 1).
    #[serde(default = "AeSam::default_delta")]
    pub delta: f64,
    /// `c_0`.
    #[serde(default = "AeSam::default_lambda1")]
    pub lambda1: f64,
    /// `c_T`.
    #[serde(default = "AeSam::default_lambda2")]
    pub lambda2: f64,
}

impl Default for AeSam {
    fn default() -> Self {
        Self {
            delta: Self::default_delta(),
            lambda1: Self::default_lambda1(),
            lambda2: Self::default_lambda2(),
        }
    }
}

/// AE-SAM's running statistics of `||g||^2`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct GradStatistics {
    /// `mu`.
    pub mean: f64,
    /// `sigma^2`.
    pub variance: f64,
}

impl AeSam {
    fn default_delta() -> f64 {
        0.9
    }

    fn default_lambda1() -> f64 {
        -1.0
    }

    fn default_lambda2() -> f64 {
        1.0
    }

    /// `c_t` of the 0-based `step`.
    pub fn threshold_factor(&self, step: u64, horizon: &Horizon) -> f64 {
        self.lambda1 + (self.lambda2 - self.lambda1) * horizon.progress(step)
    }

    /// Updates `stats` with the step's `||g||^2` and says whether the step
    /// is a SAM step.
    pub fn observe(
        &self,
        squared_norm: f64,
        step: u64,
        horizon: &Horizon,
        stats: &mut GradStatistics,
    ) -> bool {
        let d = self.delta;
        stats.mean = d * stats.mean + (1.0 - d) * squared_norm;
        stats.variance = d * stats.variance + (1.0 - d) * (squared_norm - stats.mean).powi(2);
        squared_norm >= stats.mean + self.threshold_factor(step, horizon) * stats.variance.sqrt()
    }

    pub(super) fn validate(&self, fields: &Fields) -> Result<(), LossError> {
        fields.unit_interval("delta", self.delta)?;
        for (name, value) in [("lambda1", self.lambda1), ("lambda2", self.lambda2)] {
            fields.check(name, value, value.is_finite(), "must be finite")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `G = 4, 4`, `delta = 1/2`: `mu = 2, 3`, `sigma^2 = 2, 1.5`; with
    /// `c = 1` the second step (`4 < 3 + sqrt(1.5)`) is plain, with `c = -1`
    /// it is a SAM step; `c_t` moves linearly from lambda1 to lambda2.
    #[test]
    fn the_threshold_follows_the_moving_statistics_both_ways() {
        let horizon = Horizon {
            seed: 0,
            total_steps: 10,
        };
        for (c, second) in [(1.0, false), (-1.0, true)] {
            let ae = AeSam {
                delta: 0.5,
                lambda1: c,
                lambda2: c,
            };
            let mut stats = GradStatistics::default();
            assert!(ae.observe(4.0, 0, &horizon, &mut stats));
            assert_eq!(
                stats,
                GradStatistics {
                    mean: 2.0,
                    variance: 2.0
                }
            );
            assert_eq!(ae.observe(4.0, 1, &horizon, &mut stats), second, "c = {c}");
            assert_eq!(
                stats,
                GradStatistics {
                    mean: 3.0,
                    variance: 1.5
                }
            );
        }
        let ae = AeSam::default();
        assert_eq!(ae.threshold_factor(0, &horizon), -1.0);
        assert_eq!(ae.threshold_factor(5, &horizon), 0.0);
        assert_eq!(ae.threshold_factor(10, &horizon), 1.0);
    }
}
