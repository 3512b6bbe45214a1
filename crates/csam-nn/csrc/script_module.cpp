// The parts of libtorch's TorchScript module API that tch does not expose:
// a module's buffers by name (BatchNorm's running statistics) and switching
// only its dropout layers to training mode (MC-Dropout). Everything else a
// csam TorchScript model needs goes through here too, so one object owns the
// module. Used by crates/csam-nn/src/model/torchscript/module.rs.
//
// Every function that can fail returns NULL on success or a message the
// caller frees with csam_script_free_error; no C++ exception crosses into Rust.

#include <torch/script.h>

#include "shim_errors.h"

#include <cstring>
#include <string>

extern "C" {

typedef torch::jit::Module *script_module;
typedef torch::Tensor *script_tensor;

void csam_script_free_error(char *message) { free(message); }
}

namespace {

c10::Device device_of(int device) {
  return device < 0 ? c10::Device(c10::kCPU)
                    : c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device));
}

// Whether a submodule is one of torch.nn's dropout layers (Dropout,
// Dropout1d/2d/3d, AlphaDropout, FeatureAlphaDropout).
bool is_dropout(const torch::jit::Module &module) {
  auto name = module.type()->name();
  return name && name->qualifiedName().find("torch.nn.modules.dropout.") != std::string::npos;
}

} // namespace

extern "C" {

// Loads the TorchScript archive `path` onto `device` (-1: CPU, i >= 0: CUDA i)
// with its floating-point parameters and buffers cast to `scalar_type`.
char *csam_script_load(const char *path, int device, int scalar_type, script_module *out) {
  return protect([&] {
    auto module = torch::jit::load(std::string(path), device_of(device));
    module.to(static_cast<c10::ScalarType>(scalar_type));
    *out = new torch::jit::Module(std::move(module));
  });
}

void csam_script_free(script_module module) { delete module; }

// Calls `visit(data, name, tensor)` for every parameter (`buffers` = 0) or
// every buffer (`buffers` = 1) of the module and its submodules, with the
// dotted names PyTorch's state_dict uses. The tensor handles share storage
// with the module and belong to the callee.
char *csam_script_named_tensors(script_module module, int buffers, void *data,
                                void (*visit)(void *, const char *, script_tensor)) {
  return protect([&] {
    if (buffers) {
      for (const auto &item : module->named_buffers(/*recurse=*/true))
        visit(data, item.name.c_str(), new torch::Tensor(item.value));
    } else {
      for (const auto &item : module->named_parameters(/*recurse=*/true))
        visit(data, item.name.c_str(), new torch::Tensor(item.value));
    }
  });
}

// Sets training mode on the whole module (`train` = 1) or evaluation mode,
// then, with `dropout_train` = 1, training mode on its dropout layers alone.
char *csam_script_set_mode(script_module module, int train, int dropout_train) {
  return protect([&] {
    module->train(train != 0);
    if (dropout_train) {
      for (auto child : module->modules()) {
        if (is_dropout(child))
          child.train(true);
      }
    }
  });
}

// The number of the module's dropout layers with a rate p > 0.
char *csam_script_dropout_layers(script_module module, int *count) {
  return protect([&] {
    *count = 0;
    for (const auto &child : module->modules()) {
      if (is_dropout(child) && child.attr("p").toDouble() > 0.0)
        *count += 1;
    }
  });
}

// The module's forward of one input tensor; refuses any output that is not
// a single tensor.
char *csam_script_forward(script_module module, script_tensor input, script_tensor *out) {
  return protect([&] {
    auto output = module->forward({*input});
    if (!output.isTensor())
      throw std::runtime_error("forward returned a " + output.tagKind() +
                               ", not one tensor of logits");
    *out = new torch::Tensor(output.toTensor());
  });
}
}
