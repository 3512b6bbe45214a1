//! Mixed precision: a model's forward passes under libtorch's autocast, as
//! `torch.autocast(device_type, dtype)` runs them.
//!
//! Inside the region, the ops autocast lists as lower-precision (matrix
//! products, convolutions, linear layers) cast their inputs to bfloat16 or
//! float16 and compute in it; the ops it lists as float32 (softmax, log-softmax,
//! norms, losses) compute in float32; the others follow their inputs. The
//! weights stay float32 (the master copy the optimiser updates), and so do
//! their gradients and the optimiser state: autocast casts a weight when an
//! op reads it, and backward returns gradients in the weight's type.
//!
//! A model returns its logits in float32 ([`super::Model::outputs`]), so
//! every loss, SAM's perturbation norm and CSAM's factor are computed in
//! float32, outside the region. The region is entered through a C++ shim
//! (`csrc/autocast.cpp`) because tch's `autocast` turns on CUDA's only.

use std::ffi::c_int;

use tch::{Device, Kind};

extern "C" {
    fn csam_autocast_enter(
        device_type: c_int,
        scalar_type: c_int,
        was_enabled: *mut c_int,
        was_scalar_type: *mut c_int,
    );
    fn csam_autocast_leave(device_type: c_int, was_enabled: c_int, was_scalar_type: c_int);
}

/// The precision of a model's forward passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Precision {
    /// Everything in float32.
    #[default]
    Fp32,
    /// Autocast to bfloat16 (float32's range, 8 bits of mantissa): no loss
    /// scaling needed.
    Bf16,
    /// Autocast to float16 (5 exponent bits): small gradients underflow
    /// without loss scaling.
    Fp16,
}

impl Precision {
    /// Its name in a run specification.
    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Bf16 => "bf16",
            Precision::Fp16 => "fp16",
        }
    }

    /// The type autocast computes eligible ops in; None for float32.
    pub fn autocast_kind(self) -> Option<Kind> {
        match self {
            Precision::Fp32 => None,
            Precision::Bf16 => Some(Kind::BFloat16),
            Precision::Fp16 => Some(Kind::Half),
        }
    }

    /// `f()` under autocast for `device`'s type at this precision (as is
    /// for float32). Regions nest, as `torch.autocast` contexts do.
    pub fn autocast<T>(self, device: Device, f: impl FnOnce() -> T) -> T {
        let Some(kind) = self.autocast_kind() else {
            return f();
        };
        let _region = Region::enter(device, kind);
        f()
    }
}

/// `t` in float32 when autocast left it in a lower precision, else as it is
/// (a float64 model's outputs stay float64).
pub fn widened(t: tch::Tensor) -> tch::Tensor {
    match t.kind() {
        Kind::BFloat16 | Kind::Half => t.to_kind(Kind::Float),
        _ => t,
    }
}

impl std::str::FromStr for Precision {
    type Err = String;

    fn from_str(name: &str) -> Result<Precision, String> {
        [Precision::Fp32, Precision::Bf16, Precision::Fp16]
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| format!("unknown precision {name:?}: fp32, bf16 or fp16"))
    }
}

/// An autocast region, left when dropped (also when `f` panics).
struct Region {
    device_type: c_int,
    was_enabled: c_int,
    was_scalar_type: c_int,
}

impl Region {
    fn enter(device: Device, kind: Kind) -> Region {
        let device_type = match device {
            Device::Cpu | Device::Mps | Device::Vulkan => 0,
            Device::Cuda(_) => 1,
        };
        // libtorch's ScalarType numbers of the two lower precisions.
        let scalar_type = match kind {
            Kind::BFloat16 => 15,
            _ => 5,
        };
        let (mut was_enabled, mut was_scalar_type) = (0, 0);
        // SAFETY: the shim only reads and sets libtorch's thread-local
        // autocast state; the out-pointers are live locals.
        unsafe {
            csam_autocast_enter(
                device_type,
                scalar_type,
                &mut was_enabled,
                &mut was_scalar_type,
            )
        };
        Region {
            device_type,
            was_enabled,
            was_scalar_type,
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: restores the state `enter` read, on the same thread.
        unsafe { csam_autocast_leave(self.device_type, self.was_enabled, self.was_scalar_type) }
    }
}
