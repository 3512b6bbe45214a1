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

use csam_nn::model::bayesian::prediction_seed;
use csam_nn::model::flipout::flipout_noise;
use csam_nn::model::{
    mixture_logits, Bayesian, Ensemble, Head, InputShape, Mode, Model, ModelSpec, TrainingPass,
};
use support::bayesian::{self, TwinModel, TwinRun, ROWS};
use support::{build_f64, close, lock_generator, python, refusal, shape};
use tch::{nn::VarStore, Device, Kind, Tensor};

const CLASSES: i64 = 4;
const F64_CPU: (Kind, Device) = (Kind::Double, Device::Cpu);

fn mean_field(prior_std: f64, samples: i64) -> Bayesian {
    mean_field_with(prior_std, samples, false)
}

/// Mean-field VI at TFP's start of `rho`, its prior centred at 0 or tied.
fn mean_field_with(prior_std: f64, samples: i64, tied_prior_mean: bool) -> Bayesian {
    Bayesian::MeanField {
        prior_std,
        tied_prior_mean,
        stddev_init: (-3f64).exp().ln_1p(),
        samples,
        kl_annealing_epochs: 0,
    }
}

fn options(bayesian: Bayesian) -> ModelSpec {
    ModelSpec {
        mlp_hidden: Some(vec![6]),
        bayesian,
        ..ModelSpec::default()
    }
}

/// `arch` in float64 with `bayesian`, built on a fresh store.
fn build(arch: &str, input: InputShape, bayesian: Bayesian) -> (VarStore, Model) {
    build_f64(arch, input, CLASSES, &options(bayesian))
}

#[test]
fn mlp_and_cnn_match_the_papers_formula_in_pytorch_float64() {
    let Some(python) = python() else {
        return;
    };
    let _generator = lock_generator();
    tch::manual_seed(7);
    let twin = TwinRun {
        script: "flipout_reference.py",
        samples: 3,
        train_seed: 11,
        kl_weight: 0.25,
    };
    // The MLP's prior is centred at 0, the CNN's tied to the posterior's mean.
    let models = [
        ("mlp", shape(1, 2, 3), vec!["1", "3"], 1.0, false),
        (
            "cnn",
            shape(2, 6, 6),
            vec!["conv1", "conv2", "conv3", "fc"],
            0.5,
            true,
        ),
    ]
    .map(|(arch, input, layers, prior_std, tied_prior_mean)| {
        let bayesian = mean_field_with(prior_std, twin.samples, tied_prior_mean);
        let (vs, model) = build(arch, input, bayesian);
        // Posterior scales well above their start (softplus(-3)), so that
        // the perturbation weighs in the logits.
        tch::no_grad(|| {
            for (name, mut var) in vs.variables() {
                if name.ends_with("weight_rho") {
                    var.copy_(&(var.randn_like() * 0.5 - 0.5));
                }
            }
        });
        let fields = serde_json::json!({
            "prior_std": prior_std,
            "tied_prior_mean": tied_prior_mean,
        });
        TwinModel::new((arch, input), layers, (vs, model), fields)
    });
    let noise = |m: &TwinModel, seed: u64, layer: &str| {
        let weight = m.vs.variables()[&format!("{layer}.weight")].size();
        let noise = flipout_noise(seed, layer, &weight, ROWS, F64_CPU);
        vec![
            ("eps", noise.eps),
            ("s", noise.input_signs),
            ("r", noise.output_signs),
        ]
    };
    let train = |model: &Model, x: &Tensor| model.forward_mode(x, Mode::Train);
    let trained = bayesian::run(&python, &twin, &models, noise, ("train_logits", train));
    for (model, grads) in models.iter().zip(trained) {
        assert!(grads.len() > 4, "{}: {} gradients", model.arch, grads.len());
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
    // Only asks the samples to differ visibly: 1e-3 is far above float64
    // round-off (~1e-15) and far below a Jensen gap of distinct samples.
    assert!(
        gap > 1e-3,
        "the samples differ, so averaging logits would differ: {gap}"
    );
    // Predicting left the training seed as it was.
    model.set_noise_seed(99);
    let before = tch::no_grad(|| model.forward_mode(&x, Mode::Train));
    let _ = tch::no_grad(|| model.forward_mode(&x, Mode::Eval));
    let after = tch::no_grad(|| model.forward_mode(&x, Mode::Train));
    // The same seed, ops and inputs: equal bits.
    assert!(before.equal(&after));
}

#[test]
fn a_seed_is_one_sampled_network_and_a_sam_step_perturbs_it() {
    support::sam_at_radius_zero_is_the_plain_step(&options(Bayesian::mean_field()));
}

#[test]
fn refusals_are_one_line() {
    let _generator = lock_generator();
    let refuse = |arch: &str, options: ModelSpec| refusal(arch, &options);
    let vi = options(Bayesian::mean_field());
    for arch in ["vit-ti16", "wrn-16-4", "resnet18", "pyramidnet110-a48"] {
        let message = refuse(arch, vi.clone());
        assert!(message.contains(&format!("not {arch}")), "{message}");
        assert!(message.contains("mlp, cnn, resnet20"), "{message}");
    }
    let balcal = ModelSpec {
        head: Head::balcal(),
        ..vi.clone()
    };
    assert!(refuse("resnet20", balcal).contains("head balcal"));
    let members = ModelSpec {
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
