//! BatchEnsemble (Wen, Tran and Ba 2020) against a PyTorch float64
//! implementation written from the paper's formula
//! (tests/fixtures/batchensemble_reference.py: member `m`'s layer has the
//! weight `W * (s_m r_m^T)`): an MLP's and a ResNet-20's evaluation logits
//! (the log of the members' mean probabilities), each member's train-mode
//! logits, and the training objective (the mean of the members' losses) and
//! its gradients with cross entropy and CSAM's weighting. Then: one member
//! whose fast weights are 1 is the plain network exactly; the multiply-adds
//! are the members'; the refusals are one line each.
//!
//! The twin needs the project venv's python (`<workspace>/.venv/bin/python`,
//! or `CSAM_PYTHON`); it is skipped with a notice when that is absent.

mod support;

use csam_nn::loss::TrainingLoss;
use csam_nn::mixing::{Mixing, TrainBatch};
use csam_nn::model::{
    build_model_with, mixture_logits, Ensemble, Head, InputShape, Mode, Model, ModelSpec,
};
use support::{
    build_f64, close, lock_generator, objective, of_arch, python, refusal, run_twin, shape,
};
use tch::{nn::VarStore, Device, Kind, Tensor};

const CLASSES: i64 = 4;
const F64_CPU: (Kind, Device) = (Kind::Double, Device::Cpu);

fn options(ensemble: Ensemble) -> ModelSpec {
    ModelSpec {
        mlp_hidden: Some(vec![6]),
        ensemble,
        ..ModelSpec::default()
    }
}

/// `arch` in float64 with `ensemble`, built on a fresh store.
fn build(arch: &str, input: InputShape, ensemble: Ensemble) -> (VarStore, Model) {
    build_f64(arch, input, CLASSES, &options(ensemble))
}

#[test]
fn mlp_and_resnet20_match_the_papers_formula_in_pytorch_float64() {
    let Some(python) = python() else {
        return;
    };
    let _generator = lock_generator();
    tch::manual_seed(5);
    let members = 3;
    // Random signs for the MLP (edward2's RandomSign), N(1, 0.5^2) for the
    // ResNet (uncertainty-baselines' CIFAR default).
    let models = [
        ("mlp", shape(1, 2, 3), 0.5),
        ("resnet20", shape(3, 8, 8), -0.5),
    ];
    let y = Tensor::from_slice(&[0i64, 1, 0, 3, 0]);
    let mut inputs = vec![("y".to_string(), y.shallow_clone())];
    let mut cases = Vec::new();
    let mut built = Vec::new();
    for (arch, input, random_sign_init) in models {
        let ensemble = Ensemble::BatchEnsemble {
            size: members,
            random_sign_init,
        };
        let (vs, model) = build(arch, input, ensemble);
        let classifier = if arch == "mlp" { "3" } else { "fc" };
        // Every member's classifier favours class 0, so that some examples
        // have a true-class probability above 1/2 and CSAM's weighting acts.
        tch::no_grad(|| {
            let bias = vs.variables()[&format!("{classifier}.bias")].shallow_clone();
            let _ = bias.select(1, 0).f_add_(&Tensor::from(3.0));
        });
        // Running statistics away from their initial values, so that the
        // evaluation pass reads them.
        let dims = [8, input.channels, input.height, input.width];
        let warm = Tensor::randn(dims, F64_CPU) * 2.0 + 0.5;
        let _ = tch::no_grad(|| model.forward_mode(&warm, Mode::Train));
        let x = Tensor::randn([5, input.channels, input.height, input.width], F64_CPU);
        for (name, t) in vs.variables() {
            inputs.push((format!("{arch}/{name}"), t.detach()));
        }
        inputs.push((format!("{arch}/x"), x.shallow_clone()));
        for csam in [None, Some(1.0)] {
            cases.push(serde_json::json!({"arch": arch, "members": members, "csam": csam}));
        }
        built.push((vs, model, x));
    }
    let named: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let dir = tempfile::tempdir().unwrap();
    let reference = run_twin(
        &python,
        "batchensemble_reference.py",
        dir.path(),
        &named,
        serde_json::Value::Array(cases.clone()),
    );
    for (i, case) in cases.iter().enumerate() {
        let (vs, model, x) = &built[i / 2];
        let what = case.to_string();
        if i % 2 == 0 {
            let eval = tch::no_grad(|| model.forward_mode(x, Mode::Eval));
            close(&eval, &reference[&format!("eval_logits_{i}")], &what);
            let train = tch::no_grad(|| model.outputs(x, Mode::Train));
            let per_member = train.members.expect("a BatchEnsemble gives its members");
            close(&per_member, &reference[&format!("members_{i}")], &what);
        }
        let csam = case["csam"].as_f64();
        let (value, grads) = objective(model, vs, (x, &y), (&TrainingLoss::default(), csam));
        close(&value, &reference[&format!("value_{i}")], &what);
        assert!(grads.len() > 4, "{what}: {} gradients", grads.len());
        for (name, grad) in grads {
            let expected = &reference[&format!("grad_{i}_{name}")];
            close(&grad, expected, &format!("{what} d/d{name}"));
        }
        if csam.is_some() {
            let plain = reference[&format!("value_{}", i - 1)].double_value(&[]);
            assert!(
                value.double_value(&[]) < plain,
                "{what}: CSAM's weighting acted"
            );
        }
    }
}

/// The plain network's variables copied into a one-member BatchEnsemble
/// whose fast weights are 1 (its biases `[1, d]` from the plain `[d]`).
fn copy_plain_into_members(plain: &VarStore, members: &VarStore) {
    let plain = plain.variables();
    tch::no_grad(|| {
        for (name, mut var) in members.variables() {
            let source = match plain.get(&name) {
                Some(t) => t.reshape(var.size()),
                None => {
                    assert!(name.ends_with(".r") || name.ends_with(".s"), "{name}");
                    var.ones_like()
                }
            };
            var.copy_(&source);
        }
    });
}

#[test]
fn one_member_with_unit_fast_weights_is_the_plain_network_exactly() {
    let _generator = lock_generator();
    tch::manual_seed(2);
    let one = Ensemble::BatchEnsemble {
        size: 1,
        random_sign_init: -0.5,
    };
    for (arch, input) in [
        ("mlp", shape(1, 2, 3)),
        ("cnn", shape(2, 6, 6)),
        ("resnet20", shape(3, 8, 8)),
    ] {
        let (plain_vs, plain) = build(arch, input, Ensemble::Single);
        let (members_vs, members) = build(arch, input, one);
        copy_plain_into_members(&plain_vs, &members_vs);
        let x = Tensor::randn([4, input.channels, input.height, input.width], F64_CPU);
        let y = Tensor::from_slice(&[0i64, 1, 2, 3]);
        for mode in [Mode::Train, Mode::Eval] {
            let a = tch::no_grad(|| plain.forward_mode(&x, mode));
            let b = tch::no_grad(|| members.forward_mode(&x, mode));
            // Unit fast weights multiply by 1 exactly and the layers see the same
            // inputs in the same order: equal bits on any CPU.
            assert!(a.equal(&b), "{arch} {mode:?}\n{a}\n{b}");
        }
        let ce = TrainingLoss::default();
        let (a, _) = objective(&plain, &plain_vs, (&x, &y), (&ce, Some(1.0)));
        let (b, _) = objective(&members, &members_vs, (&x, &y), (&ce, Some(1.0)));
        // The same logits and loss ops: equal bits, as above.
        assert!(a.equal(&b), "{arch} objective {a} {b}");
    }
}

#[test]
fn evaluation_averages_the_members_probabilities() {
    let _generator = lock_generator();
    tch::manual_seed(3);
    let (_vs, model) = build("mlp", shape(1, 2, 3), Ensemble::batch_ensemble());
    let x = Tensor::randn([6, 1, 2, 3], F64_CPU);
    let outputs = tch::no_grad(|| model.outputs(&x, Mode::Eval));
    let members = outputs.members.unwrap();
    assert_eq!(members.size(), [4, 6, CLASSES]);
    let probabilities = members.softmax(-1, None).mean_dim(0, false, None);
    let predicted = outputs.logits.softmax(-1, None);
    close(
        &predicted,
        &probabilities,
        "softmax(logits) = mean of softmax",
    );
    let averaged_logits = members.mean_dim(0, false, None).softmax(-1, None);
    let gap = (&predicted - averaged_logits).abs().max().double_value(&[]);
    // Only asks the members to differ visibly: 1e-3 is far above float64
    // round-off (~1e-15) and far below a Jensen gap of distinct members.
    assert!(
        gap > 1e-3,
        "the members differ, so averaging logits would differ: {gap}"
    );
    close(&mixture_logits(&members), &outputs.logits, "mixture_logits");
}

#[test]
fn multiply_adds_are_the_networks_once_per_member() {
    let _generator = lock_generator();
    for (arch, input) in [("mlp", shape(1, 2, 3)), ("resnet20", shape(3, 8, 8))] {
        let (vs, plain) = build(arch, input, Ensemble::Single);
        let (_, members) = build(arch, input, Ensemble::batch_ensemble());
        let at = (Kind::Double, vs.device());
        let (plain, members) = (plain.forward_macs(at), members.forward_macs(at));
        assert_eq!(members, plain.map(|m| 4 * m), "{arch}");
    }
}

#[test]
fn refusals_are_one_line() {
    let _generator = lock_generator();
    let vs = VarStore::new(Device::Cpu);
    let refuse = |arch: &str, options: ModelSpec| refusal(arch, &options);
    let be = options(Ensemble::batch_ensemble());
    for arch in ["vit-ti16", "wrn-16-4", "torchscript", "resnet18"] {
        let message = refuse(arch, be.clone());
        assert!(message.contains(&format!("not {arch}")), "{message}");
        assert!(message.contains("mlp, cnn, resnet20"), "{message}");
    }
    let balcal = ModelSpec {
        head: Head::balcal(),
        ..be.clone()
    };
    assert!(refuse("resnet20", balcal).contains("head balcal"));
    for (size, random_sign_init, field) in [(0, -0.5, "size"), (4, 1.5, "random_sign_init")] {
        let bad = options(Ensemble::BatchEnsemble {
            size,
            random_sign_init,
        });
        assert!(refuse("mlp", bad).contains(field));
    }
    // A mixed batch has no examples of its own to train each member on.
    let model = build_model_with(&of_arch("mlp", &be), &vs.root(), shape(1, 2, 3), 4).unwrap();
    let x = Tensor::randn([4, 1, 2, 3], (Kind::Float, Device::Cpu));
    let y = Tensor::from_slice(&[0i64, 1, 2, 3]);
    let draw = Mixing::mixup().draw(4, 0);
    let batch = TrainBatch::mixed(&x, &y, &draw).unwrap();
    let message = batch.forward(&model).unwrap_err().to_string();
    assert!(
        message.contains("BatchEnsemble") && !message.contains('\n'),
        "{message}"
    );
}

/// The fast weights start as `random_sign_init` says (uncertainty-baselines'
/// `make_sign_initializer`): above 0, signs, `+1` with that probability;
/// at most 0, `N(1, random_sign_init^2)`. Each statistic of the MLP's 1,088
/// fast-weight entries is held within six of its standard errors, derived
/// from the distribution asked for (a Bernoulli's `p (1 - p)`; a normal's
/// variance `sigma^2` and the variance `2 sigma^4` of its squared deviations),
/// so that another probability or deviation, or the two branches swapped,
/// fails.
#[test]
fn fast_weights_start_as_random_sign_init_says() {
    let _generator = lock_generator();
    tch::manual_seed(11);
    let fast_entries = |random_sign_init: f64| -> Vec<f64> {
        let ensemble = Ensemble::BatchEnsemble {
            size: 4,
            random_sign_init,
        };
        let (vs, _model) = build("mlp", shape(1, 16, 16), ensemble);
        let mut values = Vec::new();
        for (name, tensor) in vs.variables() {
            if name.ends_with(".r") || name.ends_with(".s") {
                values.extend(Vec::<f64>::try_from(tensor.flatten(0, -1)).unwrap());
            }
        }
        values
    };
    let six_errors = |variance: f64, n: usize| 6.0 * (variance / n as f64).sqrt();

    let p = 0.75;
    let signs = fast_entries(p);
    // r: 4 x (256 + 6) inputs, s: 4 x (6 + 4) outputs of the two layers.
    assert_eq!(signs.len(), 4 * (256 + 6 + 6 + 4));
    assert!(signs.iter().all(|&v| v == 1.0 || v == -1.0), "signs only");
    let plus = signs.iter().filter(|&&v| v == 1.0).count() as f64 / signs.len() as f64;
    let bar = six_errors(p * (1.0 - p), signs.len());
    assert!(
        (plus - p).abs() < bar,
        "+1 in {plus} of them, asked {p} (bar {bar})"
    );

    let sigma = 0.5;
    let normal = fast_entries(-sigma);
    let n = normal.len() as f64;
    let mean = normal.iter().sum::<f64>() / n;
    let spread = normal.iter().map(|v| (v - 1.0).powi(2)).sum::<f64>() / n;
    let mean_bar = six_errors(sigma * sigma, normal.len());
    let spread_bar = six_errors(2.0 * sigma.powi(4), normal.len());
    assert!(
        (mean - 1.0).abs() < mean_bar,
        "mean {mean} (bar {mean_bar})"
    );
    assert!(
        (spread - sigma * sigma).abs() < spread_bar,
        "variance {spread}, asked {} (bar {spread_bar})",
        sigma * sigma
    );
}
