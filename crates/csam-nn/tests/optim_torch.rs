//! SGD and AdamW against `torch.optim` trajectories (float64, 6 steps with a
//! changing learning rate) from tests/fixtures/optim_reference.py.

use csam_nn::loss::cross_entropy;
use csam_nn::model::{build_model_with, InputShape, Model, ModelSpec};
use csam_nn::optim::{AdamW, AdamWConfig, BaseOptimizer, Sgd, SgdConfig};
use std::collections::HashMap;
use tch::{nn, nn::ModuleT, Device, Tensor};

/// Float64, a 3-5-4 MLP, 6 steps against torch.optim's stored trajectory:
/// round-off ~1e-15 per step, so 1e-6 is loose, yet far below what a wrong
/// rule gives (coupled vs decoupled decay: lr * wd * |w| ~ 3e-4 per step).
const TOLERANCE: f64 = 1e-6;
const STEPS: i64 = 6;
/// Mirrors LRS in optim_reference.py.
const LR_FACTORS: [f64; 6] = [1.0, 1.0, 0.8, 0.5, 0.5, 0.2];

fn fixture() -> HashMap<String, Tensor> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/optim_reference.safetensors"
    );
    Tensor::read_safetensors(path)
        .unwrap()
        .into_iter()
        .collect()
}

fn tiny_mlp(reference: &HashMap<String, Tensor>) -> (nn::VarStore, Model) {
    let mut vs = nn::VarStore::new(Device::Cpu);
    let input = InputShape {
        channels: 1,
        height: 1,
        width: 3,
    };
    let spec = ModelSpec {
        mlp_hidden: Some(vec![5]),
        ..ModelSpec::of("mlp".parse().unwrap())
    };
    let model = build_model_with(&spec, &vs.root(), input, 4).unwrap();
    vs.double();
    tch::no_grad(|| {
        for (name, mut var) in vs.variables() {
            var.copy_(&reference[&format!("init.{name}")]);
        }
    });
    (vs, model)
}

fn check_trajectory(name: &str, make: &dyn Fn(&nn::VarStore) -> Box<dyn BaseOptimizer>) {
    let reference = fixture();
    let (vs, model) = tiny_mlp(&reference);
    let mut opt = make(&vs);
    let base_lr = opt.learning_rate();
    let mut worst = 0f64;
    for t in 0..STEPS {
        opt.set_learning_rate(base_lr * LR_FACTORS[t as usize]);
        let xs = reference["x"].get(t);
        let ys = reference["y"].get(t);
        let loss = cross_entropy(&model.forward_t(&xs, true), &ys).unwrap();
        let grads = Tensor::run_backward(&[loss], opt.params().tensors(), false, false);
        opt.step(&grads).unwrap();
        for (key, var) in vs.variables() {
            let expected = &reference[&format!("{name}.step{t}.{key}")];
            let d = (&var - expected).abs().max().double_value(&[]);
            assert!(d < TOLERANCE, "{name} step {t} {key}: differs by {d}");
            worst = worst.max(d);
        }
    }
    // The parameters moved well beyond the tolerance, so the check has teeth
    // (1e-2 = 10^4 TOLERANCE; lr 0.01-0.1 over 6 steps moves them by more).
    let moved = (&vs.variables()["3.weight"] - &reference["init.3.weight"])
        .abs()
        .max();
    assert!(
        moved.double_value(&[]) > 1e-2,
        "{name}: parameters barely moved"
    );
    eprintln!("{name}: max deviation from torch.optim {worst:e}");
}

fn sgd(
    lr: f64,
    momentum: f64,
    nesterov: bool,
    weight_decay: f64,
) -> impl Fn(&nn::VarStore) -> Box<dyn BaseOptimizer> {
    move |vs| {
        let config = SgdConfig {
            lr,
            momentum,
            nesterov,
            weight_decay,
        };
        Box::new(Sgd::new(vs, config).unwrap())
    }
}

fn adamw(
    lr: f64,
    beta1: f64,
    beta2: f64,
    eps: f64,
    weight_decay: f64,
) -> impl Fn(&nn::VarStore) -> Box<dyn BaseOptimizer> {
    move |vs| {
        let config = AdamWConfig {
            lr,
            beta1,
            beta2,
            eps,
            weight_decay,
        };
        Box::new(AdamW::new(vs, config).unwrap())
    }
}

#[test]
fn sgd_with_momentum_and_weight_decay_matches_torch() {
    check_trajectory("sgd_momentum", &sgd(0.1, 0.9, false, 5e-4));
}

#[test]
fn sgd_nesterov_matches_torch() {
    check_trajectory("sgd_nesterov", &sgd(0.1, 0.9, true, 1e-3));
}

#[test]
fn plain_sgd_matches_torch() {
    check_trajectory("sgd_plain", &sgd(0.1, 0.0, false, 0.0));
}

#[test]
fn adamw_matches_torch() {
    check_trajectory("adamw", &adamw(0.01, 0.9, 0.999, 1e-8, 0.1));
}

#[test]
fn adamw_without_decay_matches_torch() {
    check_trajectory("adamw_no_decay", &adamw(0.02, 0.8, 0.99, 1e-6, 0.0));
}
