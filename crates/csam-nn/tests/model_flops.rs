//! The multiply-adds csam counts as a forward pass runs
//! (`Model::forward_macs`, what `csam bench` reports) equal PyTorch's
//! FlopCounterMode on the twins (`bench/torch_reference.py --flops`, written
//! to `bench/flops_reference.json`), for every family of architectures.

use csam_nn::model::{build_model_with, InputShape, ModelSpec};

mod support;
use support::of_arch;
use tch::{nn, Device, Kind};

fn integers(list: &serde_json::Value) -> Vec<i64> {
    let list = list.as_array().unwrap();
    list.iter().map(|d| d.as_i64().unwrap()).collect()
}

#[test]
fn forward_macs_equal_pytorchs_flop_counter() {
    tch::set_num_threads(1);
    let fixture: serde_json::Value =
        serde_json::from_str(include_str!("../../../bench/flops_reference.json")).unwrap();
    let options = ModelSpec {
        mlp_hidden: Some(
            integers(&fixture["mlp_hidden"])
                .into_iter()
                .map(|w| w as usize)
                .collect(),
        ),
        ..ModelSpec::default()
    };
    let cases = fixture["forward_macs"].as_object().unwrap();
    assert!(cases.len() >= 25, "{} cases", cases.len());
    for (case, expected) in cases {
        let (model, input) = case.split_once('/').unwrap();
        let spec = &fixture["inputs"][input];
        let shape = integers(&spec["shape"]);
        let input = InputShape {
            channels: shape[0],
            height: shape[1],
            width: shape[2],
        };
        let n_classes = spec["n_classes"].as_i64().unwrap();
        let vs = nn::VarStore::new(Device::Cpu);
        let built = build_model_with(&of_arch(model, &options), &vs.root(), input, n_classes);
        let built = built.unwrap();
        let macs = built.forward_macs((Kind::Float, Device::Cpu));
        assert_eq!(macs, expected.as_u64(), "{case}");
    }
}
