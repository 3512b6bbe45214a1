//! When the SAM family's second pass runs, and what a step without it does:
//! the efficient-SAM policies. Each rule is its own module; every one of
//! them wraps the same two-pass step ([`super::SamStep`]), so each composes
//! with every perturbation rule it allows and with CSAM's second-pass loss
//! (CSAM is SAM with another pass-2 loss, so `looksam` with the CSAM loss is
//! LookSAM-CSAM).

use crate::loss::{Fields, LossError};

mod aesam;
mod looksam;
mod rst;

pub use aesam::{AeSam, GradStatistics};
pub use looksam::LookSam;
pub use rst::Rst;

/// The policy of a SAM-family step (serde-tagged by `kind`).
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum SamPolicy {
    /// The two passes on every `sam_every`-th step, a plain step otherwise.
    #[default]
    Every,
    /// Randomized sharpness-aware training ([`Rst`]).
    Rst(Rst),
    /// LookSAM ([`LookSam`]).
    #[serde(rename = "looksam")]
    LookSam(LookSam),
    /// AE-SAM ([`AeSam`]).
    #[serde(rename = "aesam")]
    AeSam(AeSam),
}

/// Where a step stands in its run: what [`Rst`]'s draws and schedule and
/// [`AeSam`]'s threshold schedule depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Horizon {
    /// The run's seed (RST's draws are a pure function of it and the step).
    pub seed: u64,
    /// The run's number of steps `T` (0: unknown, refused by the policies
    /// that schedule over it).
    pub total_steps: u64,
}

impl Horizon {
    /// `t / T` of the 0-based `step`, in [0, 1].
    pub(crate) fn progress(&self, step: u64) -> f64 {
        match self.total_steps {
            0 => 0.0,
            total => (step as f64 / total as f64).min(1.0),
        }
    }
}

impl SamPolicy {
    /// The policy's name, as the run specification writes it.
    pub fn name(&self) -> &'static str {
        match self {
            SamPolicy::Every => "every",
            SamPolicy::Rst(_) => "rst",
            SamPolicy::LookSam(_) => "looksam",
            SamPolicy::AeSam(_) => "aesam",
        }
    }

    /// Every policy, the efficient ones at their defaults.
    pub fn all() -> [SamPolicy; 4] {
        [
            SamPolicy::Every,
            SamPolicy::Rst(Rst::default()),
            SamPolicy::LookSam(LookSam::default()),
            SamPolicy::AeSam(AeSam::default()),
        ]
    }

    /// The policy called `name` ([`SamPolicy::name`]) at its defaults.
    pub fn named(name: &str) -> Option<SamPolicy> {
        Self::all().into_iter().find(|policy| policy.name() == name)
    }

    /// Checks the policy's own parameters (named by their fields).
    pub fn validate(&self) -> Result<(), LossError> {
        let fields = Fields(self.name());
        match self {
            SamPolicy::Every => Ok(()),
            SamPolicy::Rst(rst) => rst.validate(&fields),
            SamPolicy::LookSam(look) => look.validate(&fields),
            SamPolicy::AeSam(ae) => ae.validate(&fields),
        }
    }

    /// Whether the policy schedules over the run, so needs its length.
    pub(crate) fn needs_horizon(&self) -> bool {
        match self {
            SamPolicy::Rst(rst) => rst.p_end.is_some(),
            SamPolicy::AeSam(_) => true,
            SamPolicy::Every | SamPolicy::LookSam(_) => false,
        }
    }

    /// The expected share of steps that run the second pass, for
    /// scheduling runs: `p` averaged over the run for RST, `1/k` for
    /// LookSAM; AE-SAM's depends on the gradients: one half, what its
    /// default schedule gives for normally distributed `||g||^2` (the
    /// threshold's `P(Z >= c)` averaged over `c` from -1 to 1).
    pub fn expected_second_pass_share(&self, sam_every: u64) -> f64 {
        match self {
            SamPolicy::Every => 1.0 / sam_every.max(1) as f64,
            SamPolicy::Rst(rst) => rst.mean_probability(),
            SamPolicy::LookSam(look) => 1.0 / look.k.max(1) as f64,
            SamPolicy::AeSam(_) => 0.5,
        }
    }
}

/// A uniform draw in [0, 1) that is a pure function of `(seed, step)`
/// (SplitMix64 of the pair, the top 53 bits), so a resumed run draws what
/// the uninterrupted one drew.
pub(crate) fn uniform(seed: u64, step: u64) -> f64 {
    let mut z = seed ^ step.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}
