//! The efficient SAM policies (RST, LookSAM, AE-SAM, ESAM, the sub-batch
//! ascent, Momentum-SAM) around SAM and
//! CSAM on ResNet-20 (BatchNorm) against a PyTorch float64 twin written from
//! each paper's formula, or its authors' optimizer where they published one
//! (Momentum-SAM's; tests/fixtures/sam_policy_reference.py): eight steps
//! with SGD momentum and weight decay cover every branch (SAM steps and plain
//! ones, LookSAM's reuse steps, AE-SAM's threshold both ways, ESAM with and
//! without its weight mask and its data selection, the first pass on part of
//! the batch); the weights, the
//! BatchNorm statistics (to 1e-10 relative) and the steps that ran a second
//! pass agree. ESAM's masks are csam's (their rate is tested beside them),
//! handed to the twin.
//!
//! Needs the project venv's python (`<workspace>/.venv/bin/python`, or
//! `CSAM_PYTHON`); skipped with a notice when it is absent.

mod support;

use csam_nn::model::{build_model, InputShape};
use csam_nn::optim::{
    AeSam, BaseOptimizer, Esam, Horizon, LookSam, MomentumDirection, Msam, Rst, SamConfig,
    SamPolicy, SamStep, SecondLoss, Sgd, SgdConfig, SubBatch,
};
use std::path::Path;
use support::{python, run_twin, write_step_batches};
use tch::{nn, Device, Tensor};

const STEPS: u64 = 8;
/// Float64 twin, resnet20 on 1x6x6, 8 steps at lr 0.2: round-off ~1.3e-13
/// per layer (576-term reductions), ~3e-12 over 20 layers; through lr and 8
/// steps, even amplified 10x by training, ~2e-11 relative: 1e-10 leaves 5x+.
const TOLERANCE: f64 = 1e-10;
const SEED: u64 = 7;
/// The rows of each batch of `write_step_batches`.
const BATCH: i64 = 8;

const CSAM: SecondLoss = SecondLoss::Csam {
    gamma: 1.0,
    detach: false,
};

/// The twin's description of `policy`; RST's draws come from csam.
fn describe(policy: SamPolicy, horizon: &Horizon) -> serde_json::Value {
    match policy {
        SamPolicy::Rst(rst) => {
            let chosen: Vec<bool> = (0..STEPS).map(|t| rst.perturbs(t, horizon)).collect();
            serde_json::json!({ "kind": "rst", "sam_steps": chosen })
        }
        SamPolicy::LookSam(LookSam { k, alpha }) => {
            serde_json::json!({ "kind": "looksam", "k": k, "alpha": alpha })
        }
        SamPolicy::AeSam(AeSam {
            delta,
            lambda1,
            lambda2,
        }) => serde_json::json!({
            "kind": "aesam", "delta": delta, "lambda1": lambda1, "lambda2": lambda2,
            "total": horizon.total_steps,
        }),
        SamPolicy::Esam(Esam { beta, gamma }) => {
            serde_json::json!({ "kind": "esam", "beta": beta, "gamma": gamma })
        }
        SamPolicy::SubBatch(sub) => {
            serde_json::json!({ "kind": "subbatch", "rows": sub.rows(BATCH) })
        }
        SamPolicy::Msam(msam) => {
            serde_json::json!({ "kind": "msam", "direction": msam.direction.name() })
        }
        SamPolicy::Every => unreachable!("the every-k-th policy has its own twin test"),
    }
}

/// ESAM's mask of every step, by parameter name (`mask{t}.{name}`, shaped as
/// the parameter), as csam draws it over the flattened weights in `opt`'s order.
fn esam_masks(esam: Esam, opt: &Sgd) -> Vec<(String, Tensor)> {
    let params = opt.params();
    let sizes: Vec<i64> = params.tensors().iter().map(|t| t.numel() as i64).collect();
    (0..STEPS)
        .flat_map(|t| {
            let flat = esam.mask(SEED, t, sizes.iter().sum(), Device::Cpu).unwrap();
            let parts = flat.split_with_sizes(&sizes, 0);
            params
                .names()
                .iter()
                .zip(params.tensors())
                .zip(parts)
                .map(move |((name, p), m)| (format!("mask{t}.{name}"), m.view_as(p)))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Runs one case in Rust, then its twin, and compares.
fn check_case(python: &Path, dir: &Path, second_loss: SecondLoss, policy: SamPolicy) {
    let label = format!("{second_loss:?} {policy:?}");
    let input = InputShape {
        channels: 1,
        height: 6,
        width: 6,
    };
    tch::manual_seed(31);
    let vs = {
        let mut vs = nn::VarStore::new(Device::Cpu);
        let model = build_model("resnet20".parse().unwrap(), &vs.root(), input, 3).unwrap();
        vs.double();
        (vs, model)
    };
    let (vs, model) = vs;
    let weights = dir.join("weights.safetensors");
    vs.save(&weights).unwrap();
    let mut batches = write_step_batches(STEPS as i64, &dir.join("batches.safetensors"));
    let sgd = SgdConfig {
        lr: 0.2,
        momentum: 0.9,
        nesterov: false,
        weight_decay: 5e-3,
    };
    let horizon = Horizon {
        seed: SEED,
        total_steps: STEPS,
    };
    let rho = 0.3;
    let mut opt = Sgd::new(&vs, sgd).unwrap();
    if let SamPolicy::Esam(esam) = policy {
        batches.extend(esam_masks(esam, &opt));
    }
    let config = SamConfig {
        rho,
        second_loss,
        policy,
        horizon,
        ..SamConfig::default()
    };
    let mut step = SamStep::new(config, &vs).unwrap();
    let taken: Vec<f64> = (0..STEPS as usize)
        .map(|t| {
            let stats = step
                .step(&model, &batches[2 * t].1, &batches[2 * t + 1].1, &mut opt)
                .unwrap();
            f64::from(u8::from(stats.perturbed.is_some()))
        })
        .collect();
    let every_step = matches!(
        policy,
        SamPolicy::Esam(_) | SamPolicy::SubBatch(_) | SamPolicy::Msam(_)
    );
    assert!(
        (taken.contains(&0.0) || every_step) && taken.contains(&1.0),
        "{label}: the case must take both branches, took {taken:?}"
    );
    let (gamma, detach) = match second_loss {
        SecondLoss::Plain => (None, false),
        SecondLoss::Csam { gamma, detach } => (Some(gamma), detach),
    };
    let case = serde_json::json!([{
        "kind": "resnet20", "channels": 1, "height": 6, "width": 6, "n_classes": 3,
        "hidden": [], "dropout": 0.0, "weights": weights,
        "steps": STEPS, "rho": rho, "gamma": gamma, "detach": detach,
        "lr": sgd.lr, "momentum": sgd.momentum, "weight_decay": sgd.weight_decay,
        "policy": describe(policy, &horizon),
    }]);
    let inputs: Vec<(&str, &Tensor)> = batches.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let reference = run_twin(python, "sam_policy_reference.py", dir, &inputs, case);
    let twin_taken = Vec::<f64>::try_from(&reference["sam_steps"]).unwrap();
    assert_eq!(taken, twin_taken, "{label}: the steps with a second pass");
    for (name, value) in &vs.variables() {
        let twin = &reference[name];
        let scale = twin.abs().clamp_min(1.0);
        let d = ((value - twin).abs() / scale).max().double_value(&[]);
        assert!(
            d < TOLERANCE,
            "{label}: {name} differs from PyTorch by {d} (relative)"
        );
    }
}

#[test]
fn efficient_policies_match_pytorch_on_resnet20() {
    let _generator = support::lock_generator();
    tch::set_num_threads(1); // tiny tensors: threads only contend
    let Some(python) = python() else {
        return;
    };
    let cases = [
        (SecondLoss::Plain, SamPolicy::Rst(Rst::default())),
        (
            CSAM,
            SamPolicy::Rst(Rst {
                p: 1.0,
                p_end: Some(0.0),
            }),
        ),
        (CSAM, SamPolicy::LookSam(LookSam::default())),
        (
            SecondLoss::Plain,
            SamPolicy::LookSam(LookSam { k: 3, alpha: 0.5 }),
        ),
        (CSAM, SamPolicy::AeSam(AeSam::default())),
        (
            SecondLoss::Plain,
            // A constant c = 1: the deviation term decides.
            SamPolicy::AeSam(AeSam {
                delta: 0.5,
                lambda1: 1.0,
                lambda2: 1.0,
            }),
        ),
        // beta = gamma = 1: the SAM step.
        (
            SecondLoss::Plain,
            SamPolicy::Esam(Esam {
                beta: 1.0,
                gamma: 1.0,
            }),
        ),
        // The weight mask alone.
        (
            CSAM,
            SamPolicy::Esam(Esam {
                beta: 0.5,
                gamma: 1.0,
            }),
        ),
        // The data selection alone: ceil(0.3 * 8) = 3 of 8 rows.
        (
            SecondLoss::Plain,
            SamPolicy::Esam(Esam {
                beta: 1.0,
                gamma: 0.3,
            }),
        ),
        (CSAM, SamPolicy::Esam(Esam::default())),
        // The ascent on ceil(0.25 * 8) = 2 of 8 rows, under SAM and CSAM.
        (SecondLoss::Plain, SamPolicy::SubBatch(SubBatch::default())),
        (CSAM, SamPolicy::SubBatch(SubBatch { fraction: 0.5 })),
        // Along the momentum: the authors' way under CSAM, the other under SAM.
        (CSAM, SamPolicy::Msam(Msam::default())),
        (
            SecondLoss::Plain,
            SamPolicy::Msam(Msam {
                direction: MomentumDirection::Ascent,
            }),
        ),
    ];
    for (second_loss, policy) in cases {
        let dir = tempfile::tempdir().unwrap();
        check_case(&python, dir.path(), second_loss, policy);
    }
}
