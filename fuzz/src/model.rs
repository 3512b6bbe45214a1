//! The model the `safetensors` target loads weights into.

use csam_nn::model::{build_model_with, InputShape, ModelSpec};
use tch::nn::VarStore;
use tch::Device;

/// A tiny MLP (1x2x2 inputs, 3 hidden, 2 classes; PyTorch keys `1.weight`,
/// `1.bias`, `3.weight`, `3.bias`): a whole valid weights file is a few
/// hundred bytes the fuzzer can mutate into every branch of the checks.
pub fn tiny_mlp() -> VarStore {
    let vs = VarStore::new(Device::Cpu);
    let input = InputShape {
        channels: 1,
        height: 2,
        width: 2,
    };
    let spec = ModelSpec {
        mlp_hidden: Some(vec![3]),
        ..ModelSpec::of("mlp".parse().expect("mlp is registered"))
    };
    build_model_with(&spec, &vs.root(), input, 2).expect("the tiny MLP builds");
    vs
}
