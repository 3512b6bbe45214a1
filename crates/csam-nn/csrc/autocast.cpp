// libtorch's autocast per device type, which tch exposes for CUDA only
// (`tch::autocast` is a no-op without a GPU): entering and leaving a region
// where eligible ops (matmul, convolution, linear) run in a lower precision.
// Used by crates/csam-nn/src/model/precision.rs.

#include <ATen/autocast_mode.h>

namespace {

c10::DeviceType device_type_of(int device_type) {
  return device_type == 1 ? c10::DeviceType::CUDA : c10::DeviceType::CPU;
}

} // namespace

extern "C" {

// Turns autocast on for `device_type` (0: CPU, 1: CUDA) with `scalar_type`
// and writes the state it replaces, for csam_autocast_leave.
void csam_autocast_enter(int device_type, int scalar_type, int *was_enabled,
                         int *was_scalar_type) {
  auto device = device_type_of(device_type);
  *was_enabled = at::autocast::is_autocast_enabled(device) ? 1 : 0;
  *was_scalar_type = static_cast<int>(at::autocast::get_autocast_dtype(device));
  at::autocast::set_autocast_enabled(device, true);
  at::autocast::set_autocast_dtype(device, static_cast<at::ScalarType>(scalar_type));
  at::autocast::increment_nesting();
}

// Restores the state csam_autocast_enter replaced; the outermost region
// clears the cache of casted weights, as torch.autocast's __exit__ does.
void csam_autocast_leave(int device_type, int was_enabled, int was_scalar_type) {
  auto device = device_type_of(device_type);
  if (at::autocast::decrement_nesting() == 0) {
    at::autocast::clear_cache();
  }
  at::autocast::set_autocast_enabled(device, was_enabled != 0);
  at::autocast::set_autocast_dtype(device, static_cast<at::ScalarType>(was_scalar_type));
}
}
