//! Choosing the libtorch device: the only place in csam that knows about
//! CUDA. Models, steps and the training loop take the device as a value.

use tch::Device;

/// Why a device string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("device {text:?}: {reason}")]
pub struct DeviceError {
    /// What the user wrote.
    pub text: String,
    /// Why it cannot be used.
    pub reason: String,
}

/// Parses `cpu`, `cuda` (GPU 0) or `cuda:N`, checking that the GPU exists;
/// `None` picks CUDA GPU 0 when one is visible, else the CPU.
pub fn parse_device(text: Option<&str>) -> Result<Device, DeviceError> {
    let Some(text) = text else {
        return Ok(Device::cuda_if_available());
    };
    let error = |reason: String| DeviceError {
        text: text.to_string(),
        reason,
    };
    let lowered = text.trim().to_ascii_lowercase();
    let index = match lowered.as_str() {
        "cpu" => return Ok(Device::Cpu),
        "cuda" | "gpu" => 0,
        other => match other.strip_prefix("cuda:") {
            Some(n) => n
                .parse::<usize>()
                .map_err(|_| error("expected cpu, cuda or cuda:N with N a GPU index".into()))?,
            None => return Err(error("expected cpu, cuda or cuda:N".into())),
        },
    };
    let visible = tch::Cuda::device_count().max(0) as usize;
    if index >= visible {
        return Err(error(format!(
            "no such CUDA device ({visible} visible{})",
            if visible == 0 {
                "; this build or machine has no usable GPU, use the cpu device"
            } else {
                ""
            }
        )));
    }
    Ok(Device::Cuda(index))
}

/// A short name of the device for reports: `cpu` or `cuda:N`.
pub fn device_name(device: Device) -> String {
    match device {
        Device::Cuda(i) => format!("cuda:{i}"),
        Device::Mps => "mps".into(),
        Device::Vulkan => "vulkan".into(),
        Device::Cpu => "cpu".into(),
    }
}

/// The libtorch device tensors of a run live on: `Cuda(0)` when a GPU is
/// visible, the CPU otherwise.
pub fn default_device() -> tch::Device {
    tch::Device::cuda_if_available()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_parses_in_any_case() {
        assert_eq!(parse_device(Some("CPU")), Ok(Device::Cpu));
        assert_eq!(device_name(Device::Cuda(1)), "cuda:1");
    }

    #[test]
    fn malformed_devices_are_rejected() {
        for bad in ["tpu", "cuda:x", "cuda:-1", ""] {
            assert!(parse_device(Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn missing_gpu_is_an_error_not_a_silent_cpu() {
        let count = tch::Cuda::device_count() as usize;
        let err = parse_device(Some(&format!("cuda:{count}"))).unwrap_err();
        assert!(err.reason.contains("no such CUDA device"));
    }
}
