//! Safetensors round trip between the Rust models and their PyTorch twins
//! (tests/fixtures/twins.py): Rust weights load into PyTorch with
//! `load_state_dict(strict=True)` and give the same logits (eval and train mode,
//! and the same BatchNorm running statistics after one train-mode forward);
//! PyTorch-saved weights load into Rust and give PyTorch's logits.
//!
//! Needs the project venv's python (`<workspace>/.venv/bin/python`, or
//! `CSAM_PYTHON`); skipped with a notice when it is absent.

mod support;

use csam_nn::model::{build_model_with, InputShape, Model, ModelKind, ModelOptions};
use std::path::Path;
use support::python;
use tch::{nn, nn::ModuleT, Device, Kind, Tensor};

const TOLERANCE: f64 = 1e-5;

struct Case {
    kind: &'static str,
    input: InputShape,
    n_classes: i64,
    options: ModelOptions,
}

fn cases() -> Vec<Case> {
    let shape = |channels, height, width| InputShape {
        channels,
        height,
        width,
    };
    let opts = |hidden: &[i64], dropout| ModelOptions {
        mlp_hidden: hidden.to_vec(),
        dropout,
        ..Default::default()
    };
    vec![
        Case {
            kind: "mlp",
            input: shape(1, 6, 5),
            n_classes: 4,
            options: opts(&[16, 12], 0.0),
        },
        Case {
            kind: "mlp",
            input: shape(3, 4, 4),
            n_classes: 3,
            options: opts(&[8, 8, 8], 0.2),
        },
        Case {
            kind: "cnn",
            input: shape(3, 9, 7),
            n_classes: 5,
            options: opts(&[], 0.0),
        },
        Case {
            kind: "resnet20",
            input: shape(3, 8, 8),
            n_classes: 10,
            options: opts(&[], 0.1),
        },
        Case {
            kind: "resnet20",
            input: shape(1, 5, 5),
            n_classes: 2,
            options: opts(&[], 0.0),
        },
        // Dropout between a block's convolutions reaches the next
        // BatchNorm's running statistics, which the twin compares, so the
        // wide ResNets run without it here.
        Case {
            kind: "wrn-16-4",
            input: shape(3, 8, 8),
            n_classes: 10,
            options: opts(&[], 0.0),
        },
        Case {
            kind: "wrn-40-2",
            input: shape(1, 5, 7),
            n_classes: 3,
            options: opts(&[], 0.0),
        },
        Case {
            kind: "pyramidnet110-a48",
            input: shape(3, 7, 7),
            n_classes: 10,
            options: opts(&[], 0.0),
        },
        Case {
            kind: "pyramidnet272-a200",
            input: shape(1, 5, 6),
            n_classes: 4,
            options: opts(&[], 0.2),
        },
        // timm's and torchvision's own models on the PyTorch side.
        Case {
            kind: "vit-ti16",
            input: shape(3, 32, 32),
            n_classes: 10,
            options: opts(&[], 0.0),
        },
        Case {
            kind: "vit-s32",
            input: shape(1, 40, 70),
            n_classes: 3,
            options: opts(&[], 0.1),
        },
        Case {
            kind: "resnet18",
            input: shape(3, 32, 32),
            n_classes: 10,
            options: opts(&[], 0.0),
        },
        Case {
            kind: "resnet18",
            input: shape(1, 20, 20),
            n_classes: 7,
            options: opts(&[], 0.3),
        },
        Case {
            kind: "resnet50-cifar",
            input: shape(3, 8, 8),
            n_classes: 5,
            options: opts(&[], 0.0),
        },
    ]
}

fn build(vs: &nn::VarStore, case: &Case) -> Model {
    let kind: ModelKind = case.kind.parse().unwrap();
    build_model_with(kind, &vs.root(), case.input, case.n_classes, &case.options).unwrap()
}

/// Gives the BatchNorm buffers non-trivial values so eval mode exercises them.
fn randomise_buffers(vs: &nn::VarStore) {
    tch::no_grad(|| {
        for (name, mut t) in vs.variables() {
            if name.ends_with("running_mean") {
                let _ = t.normal_(0.0, 0.1);
            } else if name.ends_with("running_var") {
                let _ = t.uniform_(0.5, 1.5);
            }
        }
    });
}

fn max_abs_diff(a: &Tensor, b: &Tensor) -> f64 {
    assert_eq!(a.size(), b.size());
    (a - b).abs().max().double_value(&[])
}

fn get<'a>(named: &'a [(String, Tensor)], key: &str) -> &'a Tensor {
    &named
        .iter()
        .find(|(k, _)| k == key)
        .unwrap_or_else(|| panic!("missing {key}"))
        .1
}

#[test]
fn rust_and_pytorch_twins_agree_both_ways() {
    tch::set_num_threads(1); // tiny tensors: threads only contend
    let Some(python) = python() else {
        eprintln!("SKIPPED: no python at <workspace>/.venv/bin/python (set CSAM_PYTHON)");
        return;
    };
    tch::manual_seed(7);
    let dir = tempfile::tempdir().unwrap();
    let cases = cases();
    let mut manifest = Vec::new();
    let mut rust_side = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let vs = nn::VarStore::new(Device::Cpu);
        let model = build(&vs, case);
        randomise_buffers(&vs);
        let shape = case.input;
        let x = Tensor::randn(
            [4, shape.channels, shape.height, shape.width],
            (Kind::Float, Device::Cpu),
        );
        let file = |stem: &str| dir.path().join(format!("{i}_{stem}.safetensors"));
        vs.save(file("rust_weights")).unwrap();
        Tensor::write_safetensors(&[("x", &x)], file("input")).unwrap();
        let eval = tch::no_grad(|| model.forward_t(&x, false));
        let train = tch::no_grad(|| model.forward_t(&x, true));
        let running: Vec<(String, Tensor)> = vs
            .variables()
            .into_iter()
            .filter(|(k, _)| k.contains("running_"))
            .collect();
        manifest.push(serde_json::json!({
            "kind": case.kind, "channels": shape.channels, "height": shape.height,
            "width": shape.width, "n_classes": case.n_classes,
            "hidden": case.options.mlp_hidden, "dropout": case.options.dropout,
            "seed": 100 + i,
            "input": file("input"), "rust_weights": file("rust_weights"),
            "out": file("out"), "torch_weights": file("torch_weights"),
        }));
        rust_side.push((x, eval, train, running));
    }
    let manifest_path = dir.path().join("manifest.json");
    std::fs::write(&manifest_path, serde_json::to_string(&manifest).unwrap()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/twins.py");
    let status = std::process::Command::new(&python)
        .env("OMP_NUM_THREADS", "1")
        .arg(&script)
        .arg(&manifest_path)
        .status()
        .unwrap();
    assert!(status.success(), "twins.py failed: {status}");

    for (i, (case, (x, eval, train, running))) in cases.iter().zip(rust_side).enumerate() {
        let label = format!("case {i} ({})", case.kind);
        let out =
            Tensor::read_safetensors(dir.path().join(format!("{i}_out.safetensors"))).unwrap();
        let d = max_abs_diff(&eval, get(&out, "eval"));
        assert!(d <= TOLERANCE, "{label}: eval logits differ by {d}");
        if case.options.dropout == 0.0 {
            // With dropout, train-mode logits depend on each side's random masks.
            let d = max_abs_diff(&train, get(&out, "train"));
            assert!(d <= TOLERANCE, "{label}: train logits differ by {d}");
        }
        for (name, value) in &running {
            let d = max_abs_diff(value, get(&out, &format!("running_after_train.{name}")));
            assert!(
                d <= TOLERANCE,
                "{label}: {name} after one train forward differs by {d}"
            );
        }
        let n_bn = out
            .iter()
            .filter(|(k, _)| k.starts_with("running_after_train."))
            .count();
        assert_eq!(n_bn, running.len(), "{label}: BatchNorm buffer sets differ");

        // PyTorch-initialised weights into a fresh Rust model.
        let mut vs = nn::VarStore::new(Device::Cpu);
        let model = build(&vs, case);
        vs.load(dir.path().join(format!("{i}_torch_weights.safetensors")))
            .unwrap();
        let logits = tch::no_grad(|| model.forward_t(&x, false));
        let d = max_abs_diff(&logits, get(&out, "torch_eval"));
        assert!(
            d <= TOLERANCE,
            "{label}: logits of PyTorch weights differ by {d}"
        );
    }
}
