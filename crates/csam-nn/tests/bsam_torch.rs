//! bSAM steps on a real architecture (ResNet-20, option-A shortcuts,
//! BatchNorm) against a PyTorch float64 implementation written from the
//! paper's Algorithm 1 and the authors' code (tests/fixtures/bsam_reference.py):
//! three steps with the same noise draws give the same weights, BatchNorm
//! running statistics, gradient momentum and precision, with cross entropy
//! and with a training loss that is not (label smoothing).
//!
//! Needs the project venv's python (`<workspace>/.venv/bin/python`, or
//! `CSAM_PYTHON`); skipped with a notice when it is absent.

mod support;

use csam_nn::loss::{LabelSmoothing, TrainingLoss};
use csam_nn::mixing::TrainBatch;
use csam_nn::model::{build_model, InputShape};
use csam_nn::optim::{BsamConfig, BsamStep};
use std::collections::HashMap;
use support::{lock_generator, python, run_twin};
use tch::{nn, Device, Kind, Tensor};

const STEPS: i64 = 3;
/// Float64 twin, resnet20 on 1x6x6, 3 steps at lr 0.05: round-off ~576 *
/// 2.2e-16 = 1.3e-13 per layer, ~3e-12 over 20 layers, reaching weights and
/// the precision (~1.5) at ~1e-12; 1e-10 leaves 100x.
const TOLERANCE: f64 = 1e-10;

/// The settings of every case: N small enough that the noise moves the
/// weights by ~0.1, beta2 small enough that the precision moves visibly.
fn config(loss: TrainingLoss) -> BsamConfig {
    BsamConfig {
        lr: 0.05,
        beta1: 0.8,
        beta2: 0.9,
        rho: 0.05,
        weight_decay: 0.01,
        damping: 0.1,
        init_precision: 1.5,
        n_data: 50.0,
        loss,
    }
}

/// One case's Rust run: its inputs for the reference (prefixed `i.`), its
/// final variables and state, and its initial weights.
struct Case {
    inputs: Vec<(String, Tensor)>,
    ours: Vec<(String, Tensor)>,
    initial: HashMap<String, Tensor>,
    json: serde_json::Value,
}

fn run_rust(index: usize, loss: TrainingLoss, smoothing: f64) -> Case {
    let input = InputShape {
        channels: 1,
        height: 6,
        width: 6,
    };
    tch::manual_seed(31 + index as i64);
    let mut vs = nn::VarStore::new(Device::Cpu);
    let model = build_model("resnet20".parse().unwrap(), &vs.root(), input, 3).unwrap();
    vs.double();
    let prefix = |name: &str| format!("{index}.{name}");
    let initial: HashMap<String, Tensor> = vs
        .variables()
        .into_iter()
        .map(|(k, v)| (k, v.detach().copy()))
        .collect();
    let mut inputs: Vec<(String, Tensor)> = initial
        .iter()
        .map(|(k, v)| (prefix(&format!("w.{k}")), v.copy()))
        .collect();
    let config = config(loss);
    let mut step = BsamStep::new(config.clone(), &vs).unwrap();
    for t in 0..STEPS {
        let x = Tensor::randn([8, 1, 6, 6], (Kind::Double, Device::Cpu)) * 2.0;
        let y = Tensor::randint(3, [8], (Kind::Int64, Device::Cpu));
        let e = step.precision().randn_like();
        step.step_with_noise(&model, &TrainBatch::plain(&x, &y), &e)
            .unwrap();
        inputs.extend([
            (prefix(&format!("x{t}")), x),
            (prefix(&format!("y{t}")), y),
            (prefix(&format!("e{t}")), e),
        ]);
    }
    let mut ours = vs.variables().into_iter().collect::<Vec<_>>();
    ours.extend(step.state());
    let json = serde_json::json!({
        "kind": "resnet20", "channels": 1, "height": 6, "width": 6, "n_classes": 3,
        "hidden": [], "dropout": 0.0, "steps": STEPS, "smoothing": smoothing,
        "lr": config.lr, "beta1": config.beta1, "beta2": config.beta2, "rho": config.rho,
        "weight_decay": config.weight_decay, "damping": config.damping,
        "init_precision": config.init_precision, "n_data": config.n_data,
    });
    Case {
        inputs,
        ours: ours
            .into_iter()
            .map(|(k, v)| (prefix(&k), v.detach().copy()))
            .collect(),
        initial,
        json,
    }
}

#[test]
fn bsam_steps_match_pytorch_on_resnet20() {
    let _generator = lock_generator();
    tch::set_num_threads(1); // tiny tensors: threads only contend
    let Some(python) = python() else {
        return;
    };
    let smoothing = 0.1;
    let cases = [
        run_rust(0, TrainingLoss::default(), 0.0),
        run_rust(
            1,
            TrainingLoss::LabelSmoothing(LabelSmoothing { epsilon: smoothing }),
            smoothing,
        ),
    ];
    let inputs: Vec<(&str, &Tensor)> = cases
        .iter()
        .flat_map(|c| c.inputs.iter().map(|(k, v)| (k.as_str(), v)))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let json: Vec<serde_json::Value> = cases.iter().map(|c| c.json.clone()).collect();
    let reference = run_twin(
        &python,
        "bsam_reference.py",
        dir.path(),
        &inputs,
        json.into(),
    );
    for (index, case) in cases.iter().enumerate() {
        for (name, value) in &case.ours {
            // PyTorch also writes num_batches_tracked, which csam does not keep.
            let theirs = reference
                .get(name)
                .unwrap_or_else(|| panic!("no {name} in PyTorch's"));
            let d = (value - theirs).abs().max().double_value(&[]);
            assert!(d < TOLERANCE, "{name} differs from PyTorch by {d}");
        }
        let ours: HashMap<&str, &Tensor> = case.ours.iter().map(|(k, v)| (k.as_str(), v)).collect();
        let moved = case
            .initial
            .iter()
            .map(|(k, v)| {
                (v - ours[format!("{index}.{k}").as_str()])
                    .abs()
                    .max()
                    .double_value(&[])
            })
            .fold(0.0, f64::max);
        // Only asks that the steps moved the weights and the precision
        // (10^7 TOLERANCE); the noise alone moves weights by ~0.1.
        assert!(
            moved > 1e-3,
            "case {index}: the weights barely moved ({moved})"
        );
        let precision = ours[format!("{index}.bsam.precision").as_str()];
        let spread = (precision.max() - precision.min()).double_value(&[]);
        assert!(
            spread > 1e-3,
            "case {index}: the precision barely moved ({spread})"
        );
    }
}
