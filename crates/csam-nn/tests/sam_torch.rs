//! SAM, ASAM, VASSO and CSAM steps on a real architecture (ResNet-20,
//! option-A shortcuts, BatchNorm, a classifier with a bias) against a PyTorch implementation of the same step on the twin
//! (tests/fixtures/sam_reference.py), float64, three steps with SGD momentum and
//! weight decay: weights and BatchNorm running statistics agree.
//!
//! Needs the project venv's python (`<workspace>/.venv/bin/python`, or
//! `CSAM_PYTHON`); skipped with a notice when it is absent.

mod support;

use csam_nn::model::{build_model, InputShape};
use csam_nn::optim::{Perturbation, SamConfig, SamStep, SecondLoss, Sgd, SgdConfig};
use std::path::{Path, PathBuf};
use support::{python, write_step_batches};
use tch::{nn, Device, Tensor};

const STEPS: i64 = 3;
/// Float64 twin, resnet20 on 1x6x6, 3 steps at lr 0.2: round-off ~576 *
/// 2.2e-16 = 1.3e-13 per layer, ~3e-12 over 20 layers, reaching the weights
/// through lr and 3 steps at ~1e-12; 1e-10 leaves 100x.
const TOLERANCE: f64 = 1e-10;

/// A Rust run whose result awaits the PyTorch reference.
struct Pending {
    label: String,
    vs: nn::VarStore,
    initial: Vec<(String, Tensor)>,
    out: PathBuf,
}

/// Runs the Rust steps for one case in `dir` and returns the case description
/// for sam_reference.py.
fn run_rust(
    dir: &Path,
    index: usize,
    (second_loss, perturbation): (SecondLoss, Perturbation),
) -> (Pending, serde_json::Value) {
    let file = |stem: &str| dir.join(format!("{index}_{stem}.safetensors"));
    let input = InputShape {
        channels: 1,
        height: 6,
        width: 6,
    };
    tch::manual_seed(21 + index as i64);
    let mut vs = nn::VarStore::new(Device::Cpu);
    let model = build_model("resnet20".parse().unwrap(), &vs.root(), input, 3).unwrap();
    vs.double();
    vs.save(file("weights")).unwrap();
    let initial = Tensor::read_safetensors(file("weights")).unwrap();

    let batches = write_step_batches(STEPS, &file("batches"));

    let sgd = SgdConfig {
        lr: 0.2,
        momentum: 0.9,
        nesterov: false,
        weight_decay: 5e-3,
    };
    let rho = 0.3;
    let (gamma, detach) = match second_loss {
        SecondLoss::Plain => (None, false),
        SecondLoss::Csam { gamma, detach } => (Some(gamma), detach),
    };
    let mut opt = Sgd::new(&vs, sgd).unwrap();
    let config = SamConfig {
        rho,
        second_loss,
        perturbation,
        ..SamConfig::default()
    };
    let (vasso_theta, asam_eta, asam_all) = match perturbation {
        Perturbation::Vasso { theta } => (Some(theta), None, false),
        Perturbation::Asam { eta } => (None, Some(eta), false),
        Perturbation::AsamAllTensors { eta } => (None, Some(eta), true),
        Perturbation::Sam => (None, None, false),
    };
    let mut step = SamStep::new(config, &vs).unwrap();
    for t in 0..STEPS as usize {
        step.step(&model, &batches[2 * t].1, &batches[2 * t + 1].1, &mut opt)
            .unwrap();
    }
    let case = serde_json::json!({
        "kind": "resnet20", "channels": 1, "height": 6, "width": 6, "n_classes": 3,
        "hidden": [], "dropout": 0.0,
        "weights": file("weights"), "batches": file("batches"),
        "steps": STEPS, "rho": rho, "gamma": gamma, "detach": detach, "vasso_theta": vasso_theta,
        "asam_eta": asam_eta, "asam_all": asam_all,
        "lr": sgd.lr, "momentum": sgd.momentum, "weight_decay": sgd.weight_decay,
        "out": file("out"),
    });
    let pending = Pending {
        label: format!("{second_loss:?} {perturbation:?}"),
        vs,
        initial,
        out: file("out"),
    };
    (pending, case)
}

fn check(pending: &Pending) {
    let reference: std::collections::HashMap<String, Tensor> =
        Tensor::read_safetensors(&pending.out)
            .unwrap()
            .into_iter()
            .collect();
    let ours = pending.vs.variables();
    for (name, value) in &ours {
        let d = (value - &reference[name]).abs().max().double_value(&[]);
        assert!(
            d < TOLERANCE,
            "{}: {name} differs from PyTorch by {d}",
            pending.label
        );
    }
    let moved = pending
        .initial
        .iter()
        .map(|(k, v)| (v - &ours[k]).abs().max().double_value(&[]))
        .fold(0.0, f64::max);
    // Only asks that the steps moved the weights: 10^7 TOLERANCE.
    assert!(
        moved > 1e-3,
        "{}: the weights barely moved ({moved})",
        pending.label
    );
}

#[test]
fn sam_asam_vasso_and_csam_steps_match_pytorch_on_resnet20() {
    tch::set_num_threads(1); // tiny tensors: threads only contend
    let Some(python) = python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let losses = [
        (SecondLoss::Plain, Perturbation::Sam),
        (
            SecondLoss::Csam {
                gamma: 1.0,
                detach: false,
            },
            Perturbation::Sam,
        ),
        (
            SecondLoss::Csam {
                gamma: 2.0,
                detach: true,
            },
            Perturbation::Sam,
        ),
        // VASSO's moving average across the steps, alone and under CSAM.
        (SecondLoss::Plain, Perturbation::Vasso { theta: 0.4 }),
        (
            SecondLoss::Csam {
                gamma: 1.0,
                detach: false,
            },
            Perturbation::Vasso { theta: 0.7 },
        ),
        // ASAM as its authors' code: T on the weights (convolutions, BatchNorm's
        // scale, the classifier's matrix), 1 on the biases.
        (SecondLoss::Plain, Perturbation::Asam { eta: 0.01 }),
        (
            SecondLoss::Csam {
                gamma: 1.0,
                detach: false,
            },
            Perturbation::Asam { eta: 0.1 },
        ),
        // davda54/sam's adaptive=True: T on every tensor (biases too), its
        // 1e-12 guard; eta 0 is its step, 0.05 the same form with csam's eta.
        (SecondLoss::Plain, Perturbation::AsamAllTensors { eta: 0.0 }),
        (
            SecondLoss::Plain,
            Perturbation::AsamAllTensors { eta: 0.05 },
        ),
    ];
    let (pending, cases): (Vec<Pending>, Vec<serde_json::Value>) = losses
        .iter()
        .enumerate()
        .map(|(i, &loss)| run_rust(dir.path(), i, loss))
        .unzip();
    let cases_path = dir.path().join("cases.json");
    std::fs::write(&cases_path, serde_json::Value::from(cases).to_string()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sam_reference.py");
    let status = std::process::Command::new(&python)
        .env("OMP_NUM_THREADS", "1")
        .arg(&script)
        .arg(&cases_path)
        .status()
        .unwrap();
    assert!(status.success(), "sam_reference.py failed: {status}");
    for p in &pending {
        check(p);
    }
}
