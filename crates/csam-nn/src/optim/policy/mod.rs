//! When the SAM family's second pass runs, and what a step without it does:
//! the efficient-SAM policies. Each rule is its own module; every one of
//! them wraps the same two-pass step ([`super::SamStep`]), so each composes
//! with every perturbation rule it allows and with CSAM's second-pass loss
//! (CSAM is SAM with another pass-2 loss, so `looksam` with the CSAM loss is
//! LookSAM-CSAM). ESAM and the sub-batch ascent run both passes on every
//! step and save work inside them instead; Momentum-SAM runs only the second
//! pass, perturbing along the base optimiser's momentum.

use crate::loss::{Fields, LossError};
use tch::{Device, Kind, Tensor};

mod aesam;
mod esam;
mod looksam;
mod msam;
mod rst;
mod subbatch;

pub use aesam::{AeSam, GradStatistics};
pub use esam::Esam;
pub use looksam::LookSam;
pub use msam::{MomentumDirection, Msam};
pub use rst::Rst;
pub use subbatch::SubBatch;

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
    /// ESAM ([`Esam`]).
    Esam(Esam),
    /// The ascent on a sub-batch ([`SubBatch`]).
    #[serde(rename = "subbatch")]
    SubBatch(SubBatch),
    /// Momentum-SAM ([`Msam`]).
    Msam(Msam),
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
            SamPolicy::Esam(_) => "esam",
            SamPolicy::SubBatch(_) => "subbatch",
            SamPolicy::Msam(_) => "msam",
        }
    }

    /// Every policy, the efficient ones at their defaults.
    pub fn all() -> [SamPolicy; 7] {
        [
            SamPolicy::Every,
            SamPolicy::Rst(Rst::default()),
            SamPolicy::LookSam(LookSam::default()),
            SamPolicy::AeSam(AeSam::default()),
            SamPolicy::Esam(Esam::default()),
            SamPolicy::SubBatch(SubBatch::default()),
            SamPolicy::Msam(Msam::default()),
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
            SamPolicy::Every | SamPolicy::Msam(_) => Ok(()),
            SamPolicy::Rst(rst) => rst.validate(&fields),
            SamPolicy::LookSam(look) => look.validate(&fields),
            SamPolicy::AeSam(ae) => ae.validate(&fields),
            SamPolicy::Esam(esam) => esam.validate(&fields),
            SamPolicy::SubBatch(sub) => sub.validate(&fields),
        }
    }

    /// Whether the policy schedules over the run, so needs its length.
    pub(crate) fn needs_horizon(&self) -> bool {
        match self {
            SamPolicy::Rst(rst) => rst.p_end.is_some(),
            SamPolicy::AeSam(_) => true,
            SamPolicy::Every
            | SamPolicy::LookSam(_)
            | SamPolicy::Esam(_)
            | SamPolicy::SubBatch(_)
            | SamPolicy::Msam(_) => false,
        }
    }

    /// The expected forward-backward passes of a step, in passes over the
    /// whole batch, for scheduling runs: one, plus the share of steps that
    /// run the second pass, `p` averaged over the run for RST, `1/k` for
    /// LookSAM; AE-SAM's depends on the gradients: one half, what its
    /// default schedule gives for normally distributed `||g||^2` (the
    /// threshold's `P(Z >= c)` averaged over `c` from -1 to 1). ESAM runs
    /// both passes on every step (its second on `gamma B` rows, a saving
    /// not counted here); the sub-batch ascent its first on `fraction` of
    /// the batch. Momentum-SAM has no first pass: one pass a step.
    pub fn expected_passes_per_step(&self, sam_every: u64) -> f64 {
        match self {
            SamPolicy::Every => 1.0 + 1.0 / sam_every.max(1) as f64,
            SamPolicy::Rst(rst) => 1.0 + rst.mean_probability(),
            SamPolicy::LookSam(look) => 1.0 + 1.0 / look.k.max(1) as f64,
            SamPolicy::AeSam(_) => 1.5,
            SamPolicy::Esam(_) => 2.0,
            SamPolicy::SubBatch(sub) => 1.0 + sub.fraction,
            SamPolicy::Msam(_) => 1.0,
        }
    }
}

/// A uniform draw in [0, 1) that is a pure function of `(seed, step)`
/// (SplitMix64 of the pair, the top 53 bits), so a resumed run draws what
/// the uninterrupted one drew.
pub(crate) fn uniform(seed: u64, step: u64) -> f64 {
    (word(seed, step) >> 11) as f64 / (1u64 << 53) as f64
}

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
const MIX1: u64 = 0xBF58_476D_1CE4_E5B9;
const MIX2: u64 = 0x94D0_49BB_1331_11EB;

/// The SplitMix64 word of `(seed, step)` that [`uniform`] reads.
pub(crate) fn word(seed: u64, step: u64) -> u64 {
    let mut z = seed ^ step.wrapping_add(1).wrapping_mul(GOLDEN);
    z = (z ^ (z >> 30)).wrapping_mul(MIX1);
    z = (z ^ (z >> 27)).wrapping_mul(MIX2);
    z ^ (z >> 31)
}

/// `[uniform(seed, j) for j in 0..n]` as a float64 tensor on `device`: on
/// the CPU computed in one host loop (the tensor form below makes about 15
/// passes over `n` int64 temporaries, several milliseconds a step for a
/// model of a few hundred thousand weights), on an accelerator by
/// [`uniform_tensor`] where the weights live. The same numbers either way.
pub(crate) fn uniforms(seed: u64, n: i64, device: Device) -> Result<Tensor, LossError> {
    match device {
        Device::Cpu => {
            let values: Vec<f64> = (0..n.max(0) as u64).map(|j| uniform(seed, j)).collect();
            Ok(Tensor::f_from_slice(&values)?)
        }
        _ => uniform_tensor(seed, n, device),
    }
}

/// `[uniform(seed, j) for j in 0..n]` (float64) computed on `device` in
/// int64 arithmetic (wrapping products, logical shifts by masking the
/// arithmetic ones), so a mask over millions of weights is drawn where
/// they live.
fn uniform_tensor(seed: u64, n: i64, device: Device) -> Result<Tensor, LossError> {
    let _guard = tch::no_grad_guard();
    let shr = |z: &Tensor, s: i64| -> Result<Tensor, LossError> {
        let low = (1i64 << (64 - s)) - 1;
        Ok(z.f_bitwise_right_shift_tensor_scalar(s)?
            .f_bitwise_and(low)?)
    };
    let mix = |z: Tensor, s: i64, c: u64| -> Result<Tensor, LossError> {
        Ok(z.f_bitwise_xor_tensor(&shr(&z, s)?)?
            .f_mul_scalar(c as i64)?)
    };
    let j = Tensor::f_arange(n, (Kind::Int64, device))?;
    let z = j
        .f_add_scalar(1)?
        .f_mul_scalar(GOLDEN as i64)?
        .f_bitwise_xor(seed as i64)?;
    let z = mix(mix(z, 30, MIX1)?, 27, MIX2)?;
    let z = z.f_bitwise_xor_tensor(&shr(&z, 31)?)?;
    Ok(shr(&z, 11)?
        .f_to_kind(Kind::Double)?
        .f_div_scalar((1u64 << 53) as f64)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tensor_draw_equals_the_host_draw_bit_for_bit() {
        // The accelerator path, run here on the CPU, against the host loop
        // that the CPU path uses.
        for seed in [0, 7, u64::MAX] {
            let tensor = uniform_tensor(seed, 5000, Device::Cpu).unwrap();
            let host = uniforms(seed, 5000, Device::Cpu).unwrap();
            assert_eq!(
                Vec::<f64>::try_from(&tensor).unwrap(),
                Vec::<f64>::try_from(&host).unwrap()
            );
        }
        let first: Vec<f64> = Vec::try_from(uniforms(3, 4, Device::Cpu).unwrap()).unwrap();
        assert_eq!(first, (0..4).map(|j| uniform(3, j)).collect::<Vec<_>>());
    }

    #[test]
    fn expected_passes_count_the_passes_each_policy_runs() {
        let passes = |policy: SamPolicy| policy.expected_passes_per_step(1);
        assert_eq!(passes(SamPolicy::Every), 2.0);
        assert_eq!(SamPolicy::Every.expected_passes_per_step(4), 1.25);
        assert_eq!(
            passes(SamPolicy::LookSam(LookSam { k: 5, alpha: 0.7 })),
            1.2
        );
        assert_eq!(passes(SamPolicy::Esam(Esam::default())), 2.0);
        assert_eq!(
            passes(SamPolicy::SubBatch(SubBatch { fraction: 0.25 })),
            1.25
        );
        assert_eq!(passes(SamPolicy::Msam(Msam::default())), 1.0);
    }
}
