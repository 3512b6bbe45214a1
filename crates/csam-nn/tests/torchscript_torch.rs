//! `torchscript:FILE` models against PyTorch running the same module
//! (tests/fixtures/torchscript_reference.py), float64: three SAM and CSAM
//! steps with SGD momentum and weight decay give the same weights and
//! BatchNorm buffers, eval-mode and MC-Dropout logits agree (dropout draws
//! included: both sides use libtorch's generator), and the Hessian-vector
//! product by double backward agrees. Modules csam cannot use are refused
//! with one line.
//!
//! Needs the project venv's python (`<workspace>/.venv/bin/python`, or
//! `CSAM_PYTHON`); skipped with a notice when it is absent.

mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use csam_nn::curvature::LossSurface;
use csam_nn::model::{build_model_with, InputShape, Mode, Model, ModelSpec};
use csam_nn::optim::{SamConfig, SamStep, SecondLoss, Sgd, SgdConfig};
use support::{lock_generator, python, write_step_batches};
use tch::{nn, Device, Kind, Tensor};

const STEPS: i64 = 3;
/// Float64 twin of a conv(1->4, 3x3) + linear(4) module on 1x6x6, 3 steps:
/// reductions of <= 36 terms, round-off ~1e-14 per step; 1e-10 leaves 10^4
/// (the Hessian-vector product's double backward included).
const TOLERANCE: f64 = 1e-10;
const INPUT: InputShape = InputShape {
    channels: 1,
    height: 6,
    width: 6,
};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/torchscript_reference.py")
}

/// Writes the fixture's modules into `dir`.
fn make_modules(python: &Path, dir: &Path) {
    let status = std::process::Command::new(python)
        .env("OMP_NUM_THREADS", "1")
        .arg(fixture())
        .arg("make")
        .arg(dir)
        .status()
        .unwrap();
    assert!(status.success(), "torchscript_reference.py make failed");
}

fn load(vs: &nn::VarStore, script: &Path, n_classes: i64) -> Result<Model, String> {
    let spec = ModelSpec {
        script: Some(script.to_path_buf()),
        ..ModelSpec::of("torchscript".parse().unwrap())
    };
    build_model_with(&spec, &vs.root(), INPUT, n_classes).map_err(|e| e.to_string())
}

fn double_store() -> nn::VarStore {
    let mut vs = nn::VarStore::new(Device::Cpu);
    vs.set_kind(Kind::Double);
    vs
}

fn max_difference(a: &Tensor, b: &Tensor) -> f64 {
    (a - b).abs().max().double_value(&[])
}

/// One update rule's case: csam's steps, then PyTorch's, then the comparison.
fn check_steps(python: &Path, dir: &Path, index: usize, second_loss: SecondLoss) {
    let file = |stem: &str| dir.join(format!("{index}_{stem}.safetensors"));
    let vs = double_store();
    let model = load(&vs, &dir.join("net.pt"), 3).unwrap();
    vs.save(file("weights")).unwrap();
    let initial: HashMap<String, Tensor> = vs
        .variables()
        .into_iter()
        .map(|(k, v)| (k, v.copy()))
        .collect();

    tch::manual_seed(40 + index as i64);
    let batches = write_step_batches(STEPS, &file("batches"));
    let probe_x = Tensor::randn([5, 1, 6, 6], (Kind::Double, Device::Cpu));
    let probe_y = Tensor::from_slice(&[0i64, 2, 1, 1, 0]);
    let n_weights: i64 = vs
        .trainable_variables()
        .iter()
        .map(|t| t.numel() as i64)
        .sum();
    let probe_v = Tensor::randn([n_weights], (Kind::Double, Device::Cpu));
    Tensor::write_safetensors(
        &[("x", &probe_x), ("y", &probe_y), ("v", &probe_v)],
        file("probe"),
    )
    .unwrap();

    let sgd = SgdConfig {
        lr: 0.2,
        momentum: 0.9,
        nesterov: false,
        weight_decay: 5e-3,
    };
    let mut opt = Sgd::new(&vs, sgd).unwrap();
    let rho = 0.3;
    let config = SamConfig {
        rho,
        second_loss,
        ..SamConfig::default()
    };
    let mut step = SamStep::new(config, &vs).unwrap();
    let seed = 7 + index as i64;
    tch::manual_seed(seed);
    for t in 0..STEPS as usize {
        step.step(&model, &batches[2 * t].1, &batches[2 * t + 1].1, &mut opt)
            .unwrap();
    }
    let eval_logits = tch::no_grad(|| model.forward_mode(&probe_x, Mode::Eval));
    tch::manual_seed(seed + 1);
    let mc_logits = tch::no_grad(|| model.forward_mode(&probe_x, Mode::McDropout));
    let surface = LossSurface::new(
        &model,
        vs.trainable_variables(),
        vec![(probe_x.shallow_clone(), probe_y.shallow_clone())],
    )
    .unwrap();
    let hvp = surface.hessian_vector_product(&probe_v).unwrap();

    let (gamma, detach) = match second_loss {
        SecondLoss::Plain => (None, false),
        SecondLoss::Csam { gamma, detach } => (Some(gamma), detach),
    };
    let case = serde_json::json!({
        "script": dir.join("net.pt"), "weights": file("weights"), "batches": file("batches"),
        "probe": file("probe"), "steps": STEPS, "rho": rho, "gamma": gamma,
        "detach": detach, "lr": sgd.lr, "momentum": sgd.momentum,
        "weight_decay": sgd.weight_decay, "seed": seed, "out": file("out"),
    });
    let case_file = dir.join(format!("{index}_case.json"));
    std::fs::write(&case_file, case.to_string()).unwrap();
    let status = std::process::Command::new(python)
        .env("OMP_NUM_THREADS", "1")
        .arg(fixture())
        .arg("steps")
        .arg(&case_file)
        .status()
        .unwrap();
    assert!(status.success(), "torchscript_reference.py steps failed");
    let reference: HashMap<String, Tensor> = Tensor::read_safetensors(file("out"))
        .unwrap()
        .into_iter()
        .collect();

    let label = format!("{second_loss:?}");
    let ours = vs.variables();
    assert_eq!(ours.len() + 3, reference.len(), "{label}: state dict keys");
    for (name, value) in &ours {
        let d = max_difference(value, &reference[name]);
        assert!(d < TOLERANCE, "{label}: {name} differs from PyTorch by {d}");
    }
    let moved = initial
        .iter()
        .filter(|(k, _)| k.ends_with("weight"))
        .map(|(k, v)| max_difference(v, &ours[k]))
        .fold(0.0, f64::max);
    // Only asks that the steps moved the weights: 10^7 TOLERANCE.
    assert!(moved > 1e-3, "{label}: the weights barely moved ({moved})");
    for (what, ours) in [
        ("eval_logits", &eval_logits),
        ("mc_dropout_logits", &mc_logits),
        ("hvp", &hvp),
    ] {
        let d = max_difference(ours, &reference[what]);
        assert!(d < TOLERANCE, "{label}: {what} differs from PyTorch by {d}");
    }
    // MC-Dropout really drops (and evaluation mode does not).
    // Dropping any of the 4 pooled features (p = 0.25, 5 rows) moves the
    // logits far above 1e-6; float64 round-off is ~1e-15.
    assert!(max_difference(&eval_logits, &mc_logits) > 1e-6, "{label}");
}

#[test]
fn scripted_model_trains_like_pytorch_under_sam_and_csam() {
    tch::set_num_threads(1); // tiny tensors: threads only contend
    let Some(python) = python() else {
        return;
    };
    let _generator = lock_generator();
    let dir = tempfile::tempdir().unwrap();
    make_modules(&python, dir.path());
    let rules = [
        SecondLoss::Plain,
        SecondLoss::Csam {
            gamma: 1.0,
            detach: false,
        },
    ];
    for (index, rule) in rules.into_iter().enumerate() {
        check_steps(&python, dir.path(), index, rule);
    }
}

#[test]
fn unusable_modules_are_refused_with_one_line() {
    let Some(python) = python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    make_modules(&python, dir.path());
    let not_a_module = dir.path().join("weights.pt");
    std::fs::write(&not_a_module, b"not a TorchScript archive").unwrap();
    let cases: [(&Path, i64, &str); 3] = [
        (
            &dir.path().join("tuple.pt"),
            3,
            "returned a Tuple, not one tensor of logits",
        ),
        (
            &dir.path().join("net.pt"),
            4,
            "to Double [2, 3] logits, and the data needs [2, 4]",
        ),
        (&not_a_module, 3, "weights.pt: "),
    ];
    for (file, n_classes, expected) in cases {
        let message = load(&double_store(), file, n_classes).unwrap_err();
        assert!(message.contains(expected), "{message}");
        assert!(!message.contains('\n'), "more than one line: {message}");
    }
    let spec = ModelSpec {
        script: Some(dir.path().join("net.pt")),
        dropout: 0.1,
        ..ModelSpec::of("torchscript".parse().unwrap())
    };
    let vs = double_store();
    let message = build_model_with(&spec, &vs.root(), INPUT, 3)
        .unwrap_err()
        .to_string();
    assert!(message.contains("csam's dropout"), "{message}");
}
