//! float16 training with dynamic loss scaling ([`LossScaled`]) against
//! PyTorch's `torch.autocast("cpu", torch.float16)` with
//! `torch.amp.GradScaler` and `torch.optim.SGD`
//! (tests/fixtures/loss_scale_reference.py): plain SGD, SAM, CSAM and VASSO
//! steps on an MLP, from a scale so large that the first steps overflow
//! (skipped, scale halved) through clean steps that grow it again. The
//! weights, the scale after every step and which steps were skipped agree.
//! On the CPU always, and on CUDA where a GPU is available (skipped with a
//! notice elsewhere).
//!
//! Needs the project venv's python (`<workspace>/.venv/bin/python`, or
//! `CSAM_PYTHON`); skipped with a notice when it is absent.

mod support;

use csam_nn::mixing::TrainBatch;
use csam_nn::model::precision::Precision;
use csam_nn::model::{build_model_with, ModelSpec};
use csam_nn::optim::{
    plain_step, BaseOptimizer, LossScaleConfig, LossScaled, Perturbation, SamConfig, SamStep,
    SecondLoss, Sgd, SgdConfig, StepStats,
};
use support::{lock_generator, python, run_twin, shape};
use tch::{nn::VarStore, Device, Kind, Tensor};

const STEPS: i64 = 12;
/// float16 products in both programs; the rest of the arithmetic is float32.
const TOLERANCE: f64 = 1e-5;

/// One case: `sam` is `(rho, second loss, perturbation)`, None for plain SGD.
struct Case {
    label: &'static str,
    sam: Option<(f64, SecondLoss, Perturbation)>,
}

#[test]
fn loss_scaled_fp16_steps_match_torch_grad_scaler() {
    let _generator = lock_generator();
    tch::set_num_threads(1);
    let Some(python) = python() else {
        return;
    };
    let csam = SecondLoss::Csam {
        gamma: 1.0,
        detach: false,
    };
    let cases = [
        Case {
            label: "sgd",
            sam: None,
        },
        Case {
            label: "sam",
            sam: Some((0.05, SecondLoss::Plain, Perturbation::Sam)),
        },
        Case {
            label: "csam",
            sam: Some((0.05, csam, Perturbation::Sam)),
        },
        Case {
            label: "vasso",
            sam: Some((0.05, SecondLoss::Plain, Perturbation::Vasso { theta: 0.5 })),
        },
    ];
    let devices = match tch::Cuda::is_available() {
        true => vec![Device::Cpu, Device::Cuda(0)],
        false => {
            eprintln!("SKIPPED on CUDA: no GPU; the CPU cases ran");
            vec![Device::Cpu]
        }
    };
    for device in devices {
        for (i, case) in cases.iter().enumerate() {
            check(&python, device, i as i64, case);
        }
    }
}

fn check(python: &std::path::Path, device: Device, seed: i64, case: &Case) {
    let dir = tempfile::tempdir().unwrap();
    tch::manual_seed(40 + seed);
    let input = shape(1, 6, 6);
    let options = ModelSpec {
        precision: Precision::Fp16,
        mlp_hidden: Some(vec![16, 16]),
        ..ModelSpec::of("mlp".parse().unwrap())
    };
    let mut vs = VarStore::new(Device::Cpu);
    let model = build_model_with(&options, &vs.root(), input, 3).unwrap();
    let weights = dir.path().join("weights.safetensors");
    vs.save(&weights).unwrap();
    vs.set_device(device);
    let batches: Vec<(String, Tensor)> = (0..STEPS)
        .flat_map(|t| {
            let x = Tensor::randn([8, 1, 6, 6], (Kind::Float, Device::Cpu)) * 2.0;
            let y = Tensor::randint(3, [8], (Kind::Int64, Device::Cpu));
            [(format!("x{t}"), x), (format!("y{t}"), y)]
        })
        .collect();
    let sgd = SgdConfig {
        lr: 0.1,
        momentum: 0.9,
        nesterov: false,
        weight_decay: 5e-4,
    };
    // 2^24: the float16 backward overflows until the scale has halved a few
    // times; growth every 2 clean steps then overflows again.
    let scaling = LossScaleConfig {
        init_scale: 16_777_216.0,
        growth_interval: 2,
        ..LossScaleConfig::default()
    };
    let mut optimizer = LossScaled::new(Box::new(Sgd::new(&vs, sgd).unwrap()), scaling).unwrap();
    let mut sam = case.sam.map(|(rho, second_loss, perturbation)| {
        let config = SamConfig {
            rho,
            second_loss,
            perturbation,
            ..SamConfig::default()
        };
        SamStep::new(config, &vs).unwrap()
    });
    let mut scales = Vec::new();
    let mut skipped = Vec::new();
    for pair in batches.chunks(2) {
        let (x, y) = (pair[0].1.to_device(device), pair[1].1.to_device(device));
        let batch = TrainBatch::plain(&x, &y);
        let stats: StepStats = match &mut sam {
            Some(sam) => sam.step_batch(&model, &batch, &mut optimizer),
            None => plain_step(
                &model,
                &batch,
                &mut optimizer,
                &csam_nn::loss::TrainingLoss::default(),
                None,
            ),
        }
        .unwrap();
        assert_eq!(stats.skipped, optimizer.skipped_last_step());
        skipped.push(if stats.skipped { 1.0 } else { 0.0 });
        scales.push(optimizer.scale());
    }
    let label = format!("{} on {device:?}", case.label);
    assert!(
        skipped.contains(&1.0) && skipped.contains(&0.0),
        "{label}: the case must skip some steps and take others: {skipped:?}"
    );
    assert!(
        scales.windows(2).any(|w| w[1] > w[0]),
        "{label}: the scale never grew: {scales:?}"
    );
    let (rho, gamma, vasso_theta) = match case.sam {
        None => (None, None, None),
        Some((rho, second_loss, perturbation)) => (
            Some(rho),
            match second_loss {
                SecondLoss::Plain => None,
                SecondLoss::Csam { gamma, .. } => Some(gamma),
            },
            match perturbation {
                Perturbation::Vasso { theta } => Some(theta),
                _ => None,
            },
        ),
    };
    let spec = serde_json::json!([{
        "kind": "mlp", "channels": 1, "height": 6, "width": 6, "n_classes": 3,
        "hidden": [16, 16], "dropout": 0.0, "weights": weights, "steps": STEPS,
        "lr": sgd.lr, "momentum": sgd.momentum, "weight_decay": sgd.weight_decay,
        "init_scale": scaling.init_scale, "growth_interval": scaling.growth_interval,
        "rho": rho, "gamma": gamma, "vasso_theta": vasso_theta,
        "device": if device == Device::Cpu { "cpu" } else { "cuda" },
    }]);
    let inputs: Vec<(&str, &Tensor)> = batches.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let reference = run_twin(python, "loss_scale_reference.py", dir.path(), &inputs, spec);
    assert_eq!(
        Vec::<f64>::try_from(&reference["skipped"]).unwrap(),
        skipped,
        "{label}: skipped steps"
    );
    assert_eq!(
        Vec::<f64>::try_from(&reference["scale"]).unwrap(),
        scales,
        "{label}: scale after each step"
    );
    for (name, value) in vs.variables() {
        let d = (value.to_device(Device::Cpu) - &reference[&name])
            .abs()
            .max()
            .double_value(&[]);
        assert!(d < TOLERANCE, "{label}: {name} differs from PyTorch by {d}");
    }
}
