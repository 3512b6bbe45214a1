//! Randomized sharpness-aware training (Zhao, Zhang and Hu 2022,
//! "Randomized Sharpness-Aware Training for Boosting Computational
//! Efficiency in Deep Learning", arXiv:2203.09962): each step is a SAM step
//! with probability `p(t)` and a plain (SGD) step otherwise, one Bernoulli
//! trial per step, `p(t)` given by a scheduling function of the training
//! progress.

use super::{uniform, Horizon};
use crate::loss::{Fields, LossError};

/// RST's Bernoulli schedule: `p(t) = p + (p_end - p) t / T`, the linear
/// scheduling function of the paper (constant when `p_end` is absent, the
/// paper's constant schedule). Default `p = 0.5`, the paper's headline
/// setting (half of SAM's extra passes saved). The draw of step `t` is a
/// pure function of the run's seed and `t` (not a stateful generator), so
/// a resumed run takes the same steps.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rst {
    /// `p(0)` in [0, 1].
    #[serde(default = "Rst::default_p")]
    pub p: f64,
    /// `p(T)` in [0, 1]; None: constant `p`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_end: Option<f64>,
}

impl Default for Rst {
    fn default() -> Self {
        Self {
            p: Self::default_p(),
            p_end: None,
        }
    }
}

/// Sets RST's draws apart from the run's other seeded streams.
const RST_SALT: u64 = 0x7273_745f_6472_6177;

impl Rst {
    fn default_p() -> f64 {
        0.5
    }

    /// `p(t)` of the 0-based `step`.
    pub fn probability(&self, step: u64, horizon: &Horizon) -> f64 {
        match self.p_end {
            None => self.p,
            Some(end) => self.p + (end - self.p) * horizon.progress(step),
        }
    }

    /// Whether `step` is a SAM step: its uniform draw is below `p(t)`.
    pub fn perturbs(&self, step: u64, horizon: &Horizon) -> bool {
        uniform(horizon.seed ^ RST_SALT, step) < self.probability(step, horizon)
    }

    /// `p(t)` averaged over the run.
    pub(super) fn mean_probability(&self) -> f64 {
        (self.p + self.p_end.unwrap_or(self.p)) / 2.0
    }

    pub(super) fn validate(&self, fields: &Fields) -> Result<(), LossError> {
        let unit = |p: f64| (0.0..=1.0).contains(&p);
        fields.check("p", self.p, unit(self.p), "must lie in [0, 1]")?;
        match self.p_end {
            Some(end) => fields.check("p_end", end, unit(end), "must lie in [0, 1]"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_bernoulli_p_and_a_function_of_seed_and_step() {
        let horizon = |seed| Horizon {
            seed,
            total_steps: 20_000,
        };
        let rst = Rst {
            p: 0.3,
            p_end: None,
        };
        let taken = |seed| -> Vec<bool> {
            (0..20_000)
                .map(|t| rst.perturbs(t, &horizon(seed)))
                .collect()
        };
        let first = taken(1);
        // 0.3 +- 4 standard deviations of the mean of 20,000 trials.
        let rate = first.iter().filter(|&&b| b).count() as f64 / first.len() as f64;
        assert!(
            (rate - 0.3).abs() < 4.0 * (0.21f64 / 20_000.0).sqrt(),
            "{rate}"
        );
        assert_eq!(taken(1), first);
        assert_ne!(taken(2), first);
        // The linear schedule: always at p = 1, never at p = 0.
        let linear = Rst {
            p: 1.0,
            p_end: Some(0.0),
        };
        assert_eq!(linear.probability(5_000, &horizon(1)), 0.75);
        assert!(linear.perturbs(0, &horizon(1)));
        assert!(!linear.perturbs(20_000, &horizon(1)));
        let half = (0..20_000)
            .filter(|&t| linear.perturbs(t, &horizon(1)))
            .count();
        // p(t) falls linearly 1 -> 0: the count's variance is sum p(1 - p) ~
        // 20,000 / 6, a standard error of 0.003 on the rate; 0.02 is ~7 of them.
        assert!((half as f64 / 20_000.0 - 0.5).abs() < 0.02, "{half}");
    }
}
