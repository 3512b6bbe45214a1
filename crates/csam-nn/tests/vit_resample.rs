//! A ViT's position embedding trained on another image size, fitted to the
//! model's patch grid as timm does (tests/fixtures/vit_resample_reference.py
//! calls timm's `resample_abs_pos_embed`): down (14x14 to 2x2 and 3x4) and up
//! (14x14 to 20x20); and the weights loader uses it only when asked.
//!
//! Needs the project venv's python with timm (`cargo xtask setup`), or
//! `CSAM_PYTHON`; the twin is skipped with a notice when python is absent.

mod support;

use std::path::Path;

use csam_nn::model::weights::{load_safetensors, load_safetensors_with, LoadOptions, Resample};
use csam_nn::model::{build_model, InputShape, Model};
use support::{lock_generator, python, run_twin};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

fn vit(vs: &VarStore, height: i64, width: i64) -> Model {
    let input = InputShape {
        channels: 3,
        height,
        width,
    };
    build_model("vit-ti16".parse().unwrap(), &vs.root(), input, 4).unwrap()
}

#[test]
fn position_embeddings_resample_as_timm() {
    let Some(python) = python() else {
        return;
    };
    let _generator = lock_generator();
    tch::manual_seed(2);
    // The embedding of ViT-Ti/16 at 224x224: a 14x14 grid and the class token.
    let stored = Tensor::randn([1, 197, 192], (Kind::Float, Device::Cpu));
    let sizes = [(32, 32), (48, 64), (320, 320)];
    let dir = tempfile::tempdir().unwrap();
    let cases = sizes
        .iter()
        .map(|&(h, w)| serde_json::json!({"rows": h / 16, "columns": w / 16}))
        .collect();
    let reference = run_twin(
        &python,
        "vit_resample_reference.py",
        dir.path(),
        &[("pos_embed", &stored)],
        cases,
    );
    for (i, &(height, width)) in sizes.iter().enumerate() {
        let vs = VarStore::new(Device::Cpu);
        let model = vit(&vs, height, width);
        let wanted = vs.variables()["pos_embed"].size();
        let resampled = model.resample("pos_embed", &stored, &wanted).unwrap();
        let expected = &reference[&format!("resampled_{i}")];
        let error = (&resampled - expected).abs().max().double_value(&[]);
        // Both sides run libtorch's _upsample_bicubic2d_aa (the same binary) on
        // the same strided float32 grid: equal bits on any CPU, 1e-5 is slack. A
        // wrong mode or a missing antialias moves values (|x| <~ 4) by O(0.1).
        assert!(error < 1e-5, "{height}x{width}: off by {error}");
    }
}

#[test]
fn the_loader_resamples_only_when_asked_and_only_position_embeddings() {
    let _generator = lock_generator();
    let source = VarStore::new(Device::Cpu);
    vit(&source, 64, 64);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vit64.safetensors");
    source.save(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();

    let target = VarStore::new(Device::Cpu);
    let model = vit(&target, 32, 32);
    let error = load_safetensors(&target, &bytes, Path::new("vit64.safetensors")).unwrap_err();
    assert!(error.to_string().contains("pos_embed"), "{error}");
    let options = LoadOptions {
        resample: Some(&model),
        ..LoadOptions::default()
    };
    load_safetensors_with(&target, &bytes, Path::new("vit64.safetensors"), options).unwrap();
    let (loaded, saved) = (target.variables(), source.variables());
    assert_eq!(loaded["pos_embed"].size(), [1, 5, 192]);
    assert!(loaded["blocks.3.attn.qkv.weight"].equal(&saved["blocks.3.attn.qkv.weight"]));
    // The class token's entry is kept as it was.
    let class_entry = |t: &Tensor| t.narrow(1, 0, 1);
    assert!(class_entry(&loaded["pos_embed"]).equal(&class_entry(&saved["pos_embed"])));
    // Other tensors of another shape are still refused.
    assert!(model
        .resample("head.weight", &saved["head.weight"], &[9, 192])
        .is_none());
}
