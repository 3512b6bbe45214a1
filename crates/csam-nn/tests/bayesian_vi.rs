//! Mean-field variational inference with Flipout (Wen et al. 2018, as
//! Ovadia et al. 2019) against a PyTorch float64 implementation written from
//! the paper's formula (tests/fixtures/flipout_reference.py): an MLP's and a
//! small CNN's train-mode logits for given noise, their KL to the prior
//! (torch.distributions), the training objective `CE + w KL` and its
//! gradients, and the prediction (the mean probabilities of the samples).
//! Then: the prediction is the mean of the samples' probabilities; a seed
//! gives one sampled network, and a SAM step's two passes see it; the
//! refusals are one line each.
//!
//! The twin needs the project venv's python (`<workspace>/.venv/bin/python`,
//! or `CSAM_PYTHON`); it is skipped with a notice when that is absent.

mod support;

use csam_nn::loss::TrainingLoss;
use csam_nn::mixing::TrainBatch;
use csam_nn::model::bayesian::prediction_seed;
use csam_nn::model::flipout::flipout_noise;
use csam_nn::model::{
    mixture_logits, Bayesian, Ensemble, Head, InputShape, Mode, Model, ModelOptions, TrainingPass,
};
use support::{build_f64, close, lock_generator, python, refusal, run_twin, shape, with_gradients};
use tch::{nn::VarStore, Device, Kind, Tensor};

const CLASSES: i64 = 4;
const F64_CPU: (Kind, Device) = (Kind::Double, Device::Cpu);

fn mean_field(prior_std: f64, samples: i64) -> Bayesian {
    Bayesian::MeanField {
        prior_std,
        samples,
        kl_annealing_epochs: 0,
    }
}

fn options(bayesian: Bayesian) -> ModelOptions {
    ModelOptions {
        mlp_hidden: vec![6],
        bayesian,
        ..ModelOptions::default()
    }
}

/// `arch` in float64 with `bayesian`, built on a fresh store.
fn build(arch: &str, input: InputShape, bayesian: Bayesian) -> (VarStore, Model) {
    build_f64(arch, input, CLASSES, &options(bayesian))
}

/// The objective `CE + kl_weight KL` of a train-mode pass and its
/// gradients with respect to the trainable variables, by name.
fn objective(
    model: &Model,
    vs: &VarStore,
    (x, y): (&Tensor, &Tensor),
    kl_weight: f64,
) -> (Tensor, Vec<(String, Tensor)>) {
    let pass = TrainBatch::plain(x, y)
        .with_kl_weight(kl_weight)
        .forward(model)
        .unwrap();
    let loss = TrainingLoss::default();
    with_gradients(pass.objective(|s, t| loss.mean_of(s, t)).unwrap(), vs)
}

#[test]
fn mlp_and_cnn_match_the_papers_formula_in_pytorch_float64() {
    let Some(python) = python() else {
        eprintln!("SKIPPED: no python at <workspace>/.venv/bin/python (set CSAM_PYTHON)");
        return;
    };
    let _generator = lock_generator();
    tch::manual_seed(7);
    let (samples, train_seed, kl_weight) = (3, 11u64, 0.25);
    let models = [
        ("mlp", shape(1, 2, 3), vec!["1", "3"], 1.0),
        (
            "cnn",
            shape(2, 6, 6),
            vec!["conv1", "conv2", "conv3", "fc"],
            0.5,
        ),
    ];
    let y = Tensor::from_slice(&[0i64, 1, 0, 3, 2]);
    let mut inputs = vec![("y".to_string(), y.shallow_clone())];
    let mut cases = Vec::new();
    let mut built = Vec::new();
    for (arch, input, layers, prior_std) in models {
        let (vs, model) = build(arch, input, mean_field(prior_std, samples));
        // Posterior scales well above their start (softplus(-3)), so that
        // the perturbation weighs in the logits, and running statistics away
        // from their initial values, so that the prediction reads them.
        tch::no_grad(|| {
            for (name, mut var) in vs.variables() {
                if name.ends_with("weight_rho") {
                    var.copy_(&(var.randn_like() * 0.5 - 0.5));
                }
            }
        });
        let dims = [8, input.channels, input.height, input.width];
        let _ =
            tch::no_grad(|| model.forward_mode(&(Tensor::randn(dims, F64_CPU) + 0.5), Mode::Train));
        let x = Tensor::randn([5, input.channels, input.height, input.width], F64_CPU);
        let variables = vs.variables();
        for (name, t) in &variables {
            inputs.push((format!("{arch}/{name}"), t.detach()));
        }
        inputs.push((format!("{arch}/x"), x.shallow_clone()));
        let seeds = std::iter::once(("train".to_string(), train_seed))
            .chain((0..samples as u64).map(|s| (format!("sample{s}"), prediction_seed(s))));
        for (tag, seed) in seeds {
            for layer in &layers {
                let weight = variables[&format!("{layer}.weight")].size();
                let noise = flipout_noise(seed, layer, &weight, 5, F64_CPU);
                let key = |part: &str| format!("{arch}/noise/{tag}/{layer}/{part}");
                inputs.push((key("eps"), noise.eps));
                inputs.push((key("s"), noise.input_signs));
                inputs.push((key("r"), noise.output_signs));
            }
        }
        cases.push(serde_json::json!({
            "arch": arch,
            "prior_std": prior_std,
            "kl_weight": kl_weight,
            "layers": layers,
            "train": "train",
            "samples": (0..samples).map(|s| format!("sample{s}")).collect::<Vec<_>>(),
        }));
        built.push((vs, model, x));
    }
    let named: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let dir = tempfile::tempdir().unwrap();
    let reference = run_twin(
        &python,
        "flipout_reference.py",
        dir.path(),
        &named,
        serde_json::Value::Array(cases.clone()),
    );
    for (i, case) in cases.iter().enumerate() {
        let (vs, model, x) = &built[i];
        let what = case["arch"].to_string();
        model.set_noise_seed(train_seed);
        let eval = tch::no_grad(|| model.forward_mode(x, Mode::Eval));
        close(&eval, &reference[&format!("eval_logits_{i}")], &what);
        let train = tch::no_grad(|| model.forward_mode(x, Mode::Train));
        close(&train, &reference[&format!("train_logits_{i}")], &what);
        let kl = model.kl_divergence().unwrap();
        close(&kl, &reference[&format!("kl_{i}")], &format!("{what} KL"));
        let (value, grads) = objective(model, vs, (x, &y), kl_weight);
        close(&value, &reference[&format!("value_{i}")], &what);
        assert!(grads.len() > 4, "{what}: {} gradients", grads.len());
        for (name, grad) in grads {
            let expected = &reference[&format!("grad_{i}_{name}")];
            close(&grad, expected, &format!("{what} d/d{name}"));
        }
    }
}

#[test]
fn prediction_is_the_mean_of_the_samples_probabilities() {
    let _generator = lock_generator();
    tch::manual_seed(3);
    let samples = 4;
    let (vs, model) = build("mlp", shape(1, 2, 3), mean_field(1.0, samples));
    tch::no_grad(|| {
        for (name, mut var) in vs.variables() {
            if name.ends_with("weight_rho") {
                let _ = var.fill_(0.0);
            }
        }
    });
    let x = Tensor::randn([6, 1, 2, 3], F64_CPU);
    model.set_noise_seed(99);
    let predicted = tch::no_grad(|| model.forward_mode(&x, Mode::Eval));
    // The MLP has no BatchNorm nor dropout: a train-mode pass of prediction
    // sample s's seed is that sample.
    let each: Vec<Tensor> = (0..samples as u64)
        .map(|s| {
            model.set_noise_seed(prediction_seed(s));
            tch::no_grad(|| model.forward_mode(&x, Mode::Train))
        })
        .collect();
    let each = Tensor::stack(&each, 0);
    let mean = each.softmax(-1, None).mean_dim(0, false, None);
    close(
        &predicted.softmax(-1, None),
        &mean,
        "mean of the probabilities",
    );
    close(&mixture_logits(&each), &predicted, "mixture_logits");
    let of_mean_logits = each.mean_dim(0, false, None).softmax(-1, None);
    let gap = (predicted.softmax(-1, None) - of_mean_logits)
        .abs()
        .max()
        .double_value(&[]);
    assert!(
        gap > 1e-3,
        "the samples differ, so averaging logits would differ: {gap}"
    );
    // Predicting left the training seed as it was.
    model.set_noise_seed(99);
    let before = tch::no_grad(|| model.forward_mode(&x, Mode::Train));
    let _ = tch::no_grad(|| model.forward_mode(&x, Mode::Eval));
    let after = tch::no_grad(|| model.forward_mode(&x, Mode::Train));
    assert!(before.equal(&after));
}

#[test]
fn a_seed_is_one_sampled_network_and_a_sam_step_perturbs_it() {
    support::sam_at_radius_zero_is_the_plain_step(&options(Bayesian::mean_field()));
}

#[test]
fn refusals_are_one_line() {
    let _generator = lock_generator();
    let refuse = |arch: &str, options: ModelOptions| refusal(arch, &options);
    let vi = options(Bayesian::mean_field());
    for arch in ["vit-ti16", "wrn-16-4", "resnet18", "pyramidnet110-a48"] {
        let message = refuse(arch, vi.clone());
        assert!(message.contains(&format!("not {arch}")), "{message}");
        assert!(message.contains("mlp, cnn, resnet20"), "{message}");
    }
    let balcal = ModelOptions {
        head: Head::balcal(),
        ..vi.clone()
    };
    assert!(refuse("resnet20", balcal).contains("head balcal"));
    let members = ModelOptions {
        ensemble: Ensemble::batch_ensemble(),
        ..vi.clone()
    };
    assert!(refuse("resnet20", members).contains("ensemble batch-ensemble"));
    assert!(refuse("mlp", options(mean_field(0.0, 5))).contains("prior_std"));
    assert!(refuse("mlp", options(mean_field(1.0, 0))).contains("samples"));
}

#[test]
fn resnet20_has_a_posterior_over_every_convolution_and_the_classifier() {
    let _generator = lock_generator();
    tch::manual_seed(1);
    let (vs, model) = build("resnet20", shape(3, 8, 8), Bayesian::mean_field());
    let variables = vs.variables();
    let scales: Vec<&String> = variables
        .keys()
        .filter(|name| name.ends_with(".weight_rho"))
        .collect();
    // conv1, 9 blocks of two convolutions, fc.
    assert_eq!(scales.len(), 20, "{scales:?}");
    for name in scales {
        let mean = name.trim_end_matches("_rho");
        assert_eq!(variables[name].size(), variables[mean].size(), "{name}");
    }
    let kl = model.kl_divergence().unwrap().double_value(&[]);
    assert!(kl > 0.0 && kl.is_finite(), "{kl}");
    let x = Tensor::randn([2, 3, 8, 8], F64_CPU);
    let logits = tch::no_grad(|| model.forward_mode(&x, Mode::Eval));
    assert_eq!(logits.size(), [2, CLASSES]);
}
