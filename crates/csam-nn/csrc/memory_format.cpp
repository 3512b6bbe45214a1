// libtorch's memory formats, which tch does not expose: a tensor's copy in
// channels_last (NHWC strides for a 4-D NCHW tensor), as
// `tensor.contiguous(memory_format=torch.channels_last)` makes it, and
// whether a tensor is laid out so. Used by
// crates/csam-nn/src/model/memory_format.rs.
//
// Every function that can fail returns NULL on success or a message the
// caller frees with csam_memory_format_free_error; no C++ exception crosses
// into Rust.

#include <ATen/ATen.h>

#include "shim_errors.h"

extern "C" {

typedef at::Tensor *memory_format_tensor;

void csam_memory_format_free_error(char *message) { free(message); }

// `input` in channels_last (itself when it already is), differentiable as
// torch's `contiguous` is; fails for a tensor that is not 4-D.
char *csam_channels_last(memory_format_tensor input, memory_format_tensor *out) {
  return protect([&] {
    *out = new at::Tensor(input->contiguous(at::MemoryFormat::ChannelsLast));
  });
}

// Whether `input` is laid out in channels_last (1) or not (0).
int csam_is_channels_last(memory_format_tensor input) {
  return input->is_contiguous(at::MemoryFormat::ChannelsLast) ? 1 : 0;
}
}
