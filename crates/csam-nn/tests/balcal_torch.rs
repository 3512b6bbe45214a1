//! BalCAL (Ni et al. 2025) against a PyTorch float64 implementation of the
//! authors' code (tests/fixtures/balcal_reference.py): the prediction
//! `lambda z + (1 - lambda) u` with the unscaled ETF, the training objective
//! `lambda L(z, y) + (1 - lambda) L(u * e, y)` and its gradient with respect
//! to every weight, for a batch with classes of different counts and a class
//! absent (both branches of `e`), with cross entropy, focal loss and CSAM's
//! weighting; and the epoch's `lambda` on both branches of `find_lamd` (the
//! linear classifier not over-confident: 1; over-confident: bisection).
//!
//! Needs the project venv's python (`<workspace>/.venv/bin/python`, or
//! `CSAM_PYTHON`) for the twin; skipped with a notice when it is absent.

mod support;

use csam_nn::loss::{Focal, TrainingLoss};
use csam_nn::model::balcal::balanced_lambda;
use csam_nn::model::{build_model_with, Head, InputShape, Mode, Model, ModelSpec};
use support::{close, lock_generator, objective, python, run_twin};
use tch::{nn::VarStore, Device, Kind, Tensor};

const CLASSES: i64 = 4;

fn balcal_mlp(vs: &mut VarStore) -> Model {
    let input = InputShape {
        channels: 1,
        height: 2,
        width: 3,
    };
    let options = ModelSpec {
        mlp_hidden: Some(vec![6]),
        head: Head::Balcal {
            lambda: 0.7,
            delta: 1.0,
        },
        ..ModelSpec::of("mlp".parse().unwrap())
    };
    let model = build_model_with(&options, &vs.root(), input, CLASSES);
    let model = model.unwrap();
    vs.double();
    model
}

#[test]
fn prediction_objective_and_gradients_match_pytorch_float64() {
    let Some(python) = python() else {
        return;
    };
    let _generator = lock_generator();
    tch::manual_seed(11);
    let mut vs = VarStore::new(Device::Cpu);
    let model = balcal_mlp(&mut vs);
    let f64_cpu = (Kind::Double, Device::Cpu);
    // The linear classifier favours class 0, so that its examples have a
    // true-class probability above 1/2 and CSAM's weighting acts on them.
    tch::no_grad(|| {
        let bias = vs.variables()["3.bias"].shallow_clone();
        let _ = bias.get(0).f_add_(&Tensor::from(4.0));
    });
    // Running statistics away from their initial values, so that the
    // evaluation pass reads them.
    let warm = Tensor::randn([16, 1, 2, 3], f64_cpu) * 2.0 + 0.5;
    let _ = tch::no_grad(|| model.forward_mode(&warm, Mode::Train));
    let x = Tensor::randn([8, 1, 2, 3], f64_cpu);
    // Class 0 four times, 1 three times, 2 once, 3 absent.
    let y = Tensor::from_slice(&[0i64, 0, 1, 2, 0, 1, 1, 0]);
    let eval_logits = tch::no_grad(|| model.forward_mode(&x, Mode::Eval));
    let mut inputs: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    inputs.push(("x".into(), x.shallow_clone()));
    inputs.push(("y".into(), y.shallow_clone()));
    let focal = TrainingLoss::Focal(Focal { gamma: 2.0 });
    let cross_entropy = TrainingLoss::default();
    let cases = [
        (&cross_entropy, None),
        (&focal, None),
        (&cross_entropy, Some(1.0)),
        (&focal, Some(2.0)),
    ];
    let json = |(loss, csam): &(&TrainingLoss, Option<f64>)| serde_json::json!({"kind": "model", "loss": loss.name(), "gamma": 2.0, "csam": csam});
    let dir = tempfile::tempdir().unwrap();
    let named: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let reference = run_twin(
        &python,
        "balcal_reference.py",
        dir.path(),
        &named,
        cases.iter().map(json).collect(),
    );
    close(
        &eval_logits,
        &reference["eval_logits_0"],
        "evaluation logits",
    );
    let mut values = Vec::new();
    for (i, &(loss, csam)) in cases.iter().enumerate() {
        let what = json(&(loss, csam)).to_string();
        let (value, grads) = objective(&model, &vs, (&x, &y), (loss, csam));
        close(&value, &reference[&format!("value_{i}")], &what);
        values.push(value.double_value(&[]));
        for (name, grad) in grads {
            let expected = &reference[&format!("grad_{i}_{name}")];
            close(&grad, expected, &format!("{what} d/d{name}"));
        }
    }
    assert!(values[2] < values[0], "CSAM's weighting acted: {values:?}");
}

#[test]
fn the_epoch_lambda_matches_the_authors_bisection() {
    let Some(python) = python() else {
        return;
    };
    let _generator = lock_generator();
    tch::manual_seed(4);
    let f64_cpu = (Kind::Double, Device::Cpu);
    let rows = 300;
    let small = || Tensor::randn([rows, CLASSES], f64_cpu) * 0.3;
    let confident = || Tensor::randn([rows, CLASSES], f64_cpu) * 8.0;
    // (linear logits, ETF logits, labels, delta)
    let under = small();
    let under_labels = under.argmax(1, false);
    let over = confident();
    let half_right = {
        let labels = over.argmax(1, false);
        let random = Tensor::randint(CLASSES, [rows], (Kind::Int64, Device::Cpu));
        labels.where_self(&Tensor::rand([rows], f64_cpu).lt(0.5), &random)
    };
    let random_labels = Tensor::randint(CLASSES, [rows], (Kind::Int64, Device::Cpu));
    let cases = [
        (under, small(), under_labels, 1.0),
        (
            over.shallow_clone(),
            small(),
            half_right.shallow_clone(),
            1.0,
        ),
        (over.shallow_clone(), small(), half_right, 0.95),
        (over, small(), random_labels, 1.0),
    ];
    let mut inputs = Vec::new();
    for (i, (z1, z2, labels, _)) in cases.iter().enumerate() {
        inputs.push((format!("z1_{i}"), z1.shallow_clone()));
        inputs.push((format!("z2_{i}"), z2.shallow_clone()));
        inputs.push((format!("labels_{i}"), labels.shallow_clone()));
    }
    let named: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let dir = tempfile::tempdir().unwrap();
    let reference = run_twin(
        &python,
        "balcal_reference.py",
        dir.path(),
        &named,
        cases
            .iter()
            .map(|case| serde_json::json!({"kind": "lambda", "delta": case.3}))
            .collect(),
    );
    let mut found = Vec::new();
    for (i, (z1, z2, labels, delta)) in cases.iter().enumerate() {
        let lambda = balanced_lambda(z1, z2, labels, *delta).unwrap();
        let expected = reference[&format!("lambda_{i}")].double_value(&[]);
        // lambda is a dyadic midpoint chosen by comparing float64 means over 300
        // rows (~1e-16 apart on the two sides): only a gap within that of its
        // threshold could change a choice, so the two agree exactly.
        assert_eq!(lambda, expected, "case {i}");
        found.push(lambda);
    }
    // Both branches: not over-confident gives 1, over-confident bisects.
    assert_eq!(found[0], 1.0);
    assert!(found[1..].iter().all(|&l| l < 1.0), "{found:?}");
}
