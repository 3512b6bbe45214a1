//! The rank-1 Bayesian neural network (Dusenberry et al. 2020) against a
//! PyTorch float64 implementation written from the paper's formula
//! (tests/fixtures/rank1_reference.py): an MLP's and a small CNN's per-member
//! train-mode logits for given factor noise, the factors' KL to the prior
//! (torch.distributions), the objective `mean_m CE_m + w KL` and its
//! gradients, and the prediction (the mean probabilities over samples and
//! members). Then: with one member and zero posterior scale it is
//! BatchEnsemble of one member; the prediction averages probabilities, not
//! logits; a SAM step of radius 0 is the plain step (its two passes see one
//! sampled network); the refusals are one line each.
//!
//! The twin needs the project venv's python (`<workspace>/.venv/bin/python`,
//! or `CSAM_PYTHON`); it is skipped with a notice when that is absent.

mod support;

use csam_nn::model::bayesian::prediction_seed;
use csam_nn::model::rank1::rank1_noise;
use csam_nn::model::{Bayesian, Ensemble, Head, InputShape, Mode, Model, ModelSpec, TrainingPass};
use support::bayesian::{self, TwinModel, TwinRun, ROWS};
use support::{build_f64, close, lock_generator, python, refusal, shape};
use tch::{nn::VarStore, Device, Kind, Tensor};

const CLASSES: i64 = 4;
const F64_CPU: (Kind, Device) = (Kind::Double, Device::Cpu);

fn rank1(prior_std: f64, samples: i64) -> Bayesian {
    Bayesian::Rank1 {
        prior_std,
        samples,
        kl_annealing_epochs: 0,
    }
}

fn batch_ensemble(size: i64) -> Ensemble {
    Ensemble::BatchEnsemble {
        size,
        random_sign_init: -0.5,
    }
}

fn options(members: i64, bayesian: Bayesian) -> ModelSpec {
    ModelSpec {
        mlp_hidden: Some(vec![6]),
        ensemble: batch_ensemble(members),
        bayesian,
        ..ModelSpec::default()
    }
}

/// `arch` in float64 with `members` and `bayesian`, built on a fresh store.
fn build(arch: &str, input: InputShape, members: i64, bayesian: Bayesian) -> (VarStore, Model) {
    build_f64(arch, input, CLASSES, &options(members, bayesian))
}

/// Sets every factor's `rho` to `value(rho)` (the posterior scales).
fn set_rho(vs: &VarStore, value: impl Fn(&Tensor) -> Tensor) {
    tch::no_grad(|| {
        for (name, mut var) in vs.variables() {
            if name.ends_with("_rho") {
                var.copy_(&value(&var));
            }
        }
    });
}

#[test]
fn mlp_and_cnn_match_the_papers_formula_in_pytorch_float64() {
    let Some(python) = python() else {
        return;
    };
    let _generator = lock_generator();
    tch::manual_seed(7);
    let twin = TwinRun {
        script: "rank1_reference.py",
        samples: 2,
        train_seed: 11,
        kl_weight: 0.25,
    };
    let models = [
        ("mlp", shape(1, 2, 3), 3, vec!["1", "3"], 0.5),
        (
            "cnn",
            shape(2, 6, 6),
            2,
            vec!["conv1", "conv2", "conv3", "fc"],
            0.1,
        ),
    ]
    .map(|(arch, input, members, layers, prior_std)| {
        let (vs, model) = build(arch, input, members, rank1(prior_std, twin.samples));
        // Posterior scales well above their start (0.03), so that the
        // sampled factors weigh in the logits.
        set_rho(&vs, |rho| rho.randn_like() * 0.5 - 1.0);
        let fields = serde_json::json!({ "members": members, "prior_std": prior_std });
        TwinModel::new((arch, input), layers, (vs, model), fields)
    });
    let noise = |m: &TwinModel, seed: u64, layer: &str| {
        let variables = m.vs.variables();
        let d_in = variables[&format!("{layer}.r")].size()[1];
        let d_out = variables[&format!("{layer}.s")].size()[1];
        let members = m.fields["members"].as_i64().unwrap();
        let noise = rank1_noise(seed, layer, (members, ROWS), (d_in, d_out), F64_CPU);
        vec![("r", noise.r), ("s", noise.s)]
    };
    let members = |model: &Model, x: &Tensor| model.outputs(x, Mode::Train).members.unwrap();
    let trained = bayesian::run(&python, &twin, &models, noise, ("members", members));
    for (model, grads) in models.iter().zip(trained) {
        assert!(
            grads.iter().any(|name| name.ends_with("r_rho")),
            "{}: the factors' scales are trained",
            model.arch
        );
    }
}

#[test]
fn one_member_at_the_scale_floor_is_batch_ensemble_of_one_up_to_the_floor() {
    let _generator = lock_generator();
    tch::manual_seed(2);
    let input = shape(2, 6, 6);
    let (be_vs, be) = build_f64("cnn", input, CLASSES, &{
        let mut o = options(1, Bayesian::None);
        o.ensemble = batch_ensemble(1);
        o
    });
    let (vs, model) = build("cnn", input, 1, rank1(0.1, 3));
    // softplus(-1000) is 0 in float64: sigma is its floor, 1e-7.
    set_rho(&vs, |rho| rho.full_like(-1000.0));
    let mut variables = vs.variables();
    tch::no_grad(|| {
        for (name, mut value) in be_vs.variables() {
            // Factors' means of 1: each sampled factor is 1 + 1e-7 eps.
            if name.ends_with(".r") || name.ends_with(".s") {
                let _ = value.fill_(1.0);
            }
            variables.get_mut(&name).unwrap().copy_(&value);
        }
    });
    let x = Tensor::randn([5, 2, 6, 6], F64_CPU);
    model.set_noise_seed(5);
    for mode in [Mode::Train, Mode::Eval] {
        let ours = tch::no_grad(|| model.forward_mode(&x, mode)).softmax(-1, None);
        let theirs = tch::no_grad(|| be.forward_mode(&x, mode)).softmax(-1, None);
        let gap = (ours - theirs).abs().max().double_value(&[]);
        // Each factor is 1 + 1e-7 eps, |eps| < 6 for these few hundred
        // draws (P(|eps| > 6) = 2e-9 each): the 4 layers' 2 factors each
        // scale a channel by at most 1 +- 6e-7, so the logits move by about
        // 8 x 6e-7 relative and the probabilities (softmax is
        // 1/2-Lipschitz) by less: 1e-4 leaves room for BatchNorm's
        // normalising of small batch statistics. Without the floor (sigma =
        // softplus(-1000) = 0) the ops are BatchEnsemble's on equal values
        // and the gap is exactly 0.
        assert!(gap > 0.0 && gap < 1e-4, "{mode:?}: {gap}");
    }
}

#[test]
fn prediction_is_the_mean_of_the_probabilities_over_samples_and_members() {
    let _generator = lock_generator();
    tch::manual_seed(3);
    let (members, samples) = (2, 3);
    let (vs, model) = build("mlp", shape(1, 2, 3), members, rank1(0.1, samples));
    set_rho(&vs, |rho| rho.full_like(0.0));
    let x = Tensor::randn([6, 1, 2, 3], F64_CPU);
    model.set_noise_seed(99);
    let predicted = tch::no_grad(|| model.forward_mode(&x, Mode::Eval));
    // The MLP has no BatchNorm nor dropout: a train-mode pass of prediction
    // sample s's seed is that sample, each member's logits.
    let each: Vec<Tensor> = (0..samples as u64)
        .map(|s| {
            model.set_noise_seed(prediction_seed(s));
            tch::no_grad(|| model.outputs(&x, Mode::Train))
                .members
                .unwrap()
        })
        .collect();
    let each = Tensor::cat(&each, 0);
    assert_eq!(each.size()[0], samples * members);
    let mean = each.softmax(-1, None).mean_dim(0, false, None);
    close(
        &predicted.softmax(-1, None),
        &mean,
        "mean of the probabilities",
    );
    let of_mean_logits = each.mean_dim(0, false, None).softmax(-1, None);
    let gap = (predicted.softmax(-1, None) - of_mean_logits)
        .abs()
        .max()
        .double_value(&[]);
    // Only asks the samples to differ visibly: 1e-3 is far above float64
    // round-off (~1e-15) and far below a Jensen gap of distinct samples.
    assert!(gap > 1e-3, "averaging logits would differ: {gap}");
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
    support::sam_at_radius_zero_is_the_plain_step(&options(2, Bayesian::rank1()));
}

#[test]
fn refusals_are_one_line() {
    let _generator = lock_generator();
    let rank1_be = options(4, Bayesian::rank1());
    for arch in ["vit-ti16", "wrn-16-4", "resnet18"] {
        let message = refusal(arch, &rank1_be);
        assert!(message.contains(&format!("not {arch}")), "{message}");
    }
    for ensemble in [Ensemble::Single, Ensemble::mimo()] {
        let without = ModelSpec {
            ensemble,
            ..rank1_be.clone()
        };
        let message = refusal("resnet20", &without);
        assert!(
            message.contains("needs ensemble batch-ensemble"),
            "{message}"
        );
    }
    let balcal = ModelSpec {
        head: Head::balcal(),
        ..rank1_be.clone()
    };
    assert!(refusal("resnet20", &balcal).contains("head balcal"));
    assert!(refusal("mlp", &options(4, rank1(0.0, 1))).contains("prior_std"));
    assert!(refusal("mlp", &options(4, rank1(0.1, 0))).contains("samples"));
}

#[test]
fn resnet20_has_random_factors_on_every_convolution_and_the_classifier() {
    let _generator = lock_generator();
    tch::manual_seed(1);
    let (vs, model) = build("resnet20", shape(3, 8, 8), 4, Bayesian::rank1());
    let variables = vs.variables();
    let scales: Vec<&String> = variables
        .keys()
        .filter(|name| name.ends_with("_rho"))
        .collect();
    // conv1, 9 blocks of two convolutions, fc: r_rho and s_rho each.
    assert_eq!(scales.len(), 40, "{scales:?}");
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
