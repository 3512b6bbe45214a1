//! MIMO (Havasi et al. 2021) against a PyTorch float64 implementation
//! written from the paper (tests/fixtures/mimo_reference.py: the members'
//! images concatenated along channels in member order, head `m` the
//! classifier's outputs `m K .. (m + 1) K`): an MLP's, a small CNN's and a
//! ResNet-20's evaluation logits (the heads' mean probabilities with the
//! image fed to every input), each head's train-mode logits of its own rows,
//! and the training objective (the sum of the heads' losses against their
//! rows' labels) and its gradients with cross entropy and CSAM's weighting.
//! Then: head `m` is trained on the labels of member `m`'s shuffle of the
//! batch; one member without repetitions is the plain network; prediction
//! averages probabilities; the multiply-adds are one network's; the
//! refusals are one line each.
//!
//! At initialisation every head depends on every input (the first layer
//! mixes all channels), so the wiring is checked through the twin and the
//! targets, not by independence.
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
    batch_objective, build_f64, close, lock_generator, of_arch, python, run_twin, shape,
};
use tch::{nn::VarStore, Device, Kind, Tensor};

const CLASSES: i64 = 4;
const F64_CPU: (Kind, Device) = (Kind::Double, Device::Cpu);

fn mimo(size: i64, input_repetition: f64, batch_repetitions: i64) -> Ensemble {
    Ensemble::Mimo {
        size,
        input_repetition,
        batch_repetitions,
    }
}

fn options(ensemble: Ensemble) -> ModelSpec {
    ModelSpec {
        mlp_hidden: Some(vec![6]),
        ensemble,
        ..ModelSpec::default()
    }
}

/// `arch` in float64 with `ensemble` for `classes` classes, on a fresh store.
fn build(arch: &str, input: InputShape, ensemble: Ensemble, classes: i64) -> (VarStore, Model) {
    build_f64(arch, input, classes, &options(ensemble))
}

fn batch(input: InputShape, b: i64) -> Tensor {
    Tensor::randn([b, input.channels, input.height, input.width], F64_CPU)
}

#[test]
fn mlp_cnn_and_resnet20_match_the_papers_wiring_in_pytorch_float64() {
    let Some(python) = python() else {
        return;
    };
    let _generator = lock_generator();
    tch::manual_seed(5);
    let members = 3;
    let ensemble = mimo(members, 0.0, 2);
    let y = Tensor::from_slice(&[0i64, 1, 0, 3, 2]);
    let models = [
        ("mlp", shape(1, 2, 3)),
        ("cnn", shape(2, 6, 6)),
        ("resnet20", shape(3, 8, 8)),
    ];
    let mut inputs = vec![("y".to_string(), y.shallow_clone())];
    let mut cases = Vec::new();
    let mut built = Vec::new();
    for (seed, (arch, input)) in models.into_iter().enumerate() {
        let (vs, model) = build(arch, input, ensemble, CLASSES);
        let classifier = if arch == "mlp" { "3" } else { "fc" };
        // Every head's class 0 favoured, so that some examples have a
        // true-class probability above 1/2 and CSAM's weighting acts.
        tch::no_grad(|| {
            let bias = vs.variables()[&format!("{classifier}.bias")].shallow_clone();
            let mut favoured = bias.reshape([members, CLASSES]).select(1, 0);
            let _ = favoured.f_add_(&Tensor::from(3.0)).unwrap();
        });
        // Running statistics away from their initial values.
        let warm = batch(input, 8) * 2.0 + 0.5;
        let _ = tch::no_grad(|| model.forward_mode(&warm, Mode::Train));
        let x = batch(input, 5);
        let rows = ensemble.member_rows(5, seed as u64).unwrap();
        assert_eq!(rows.size(), [members, 10]);
        for (name, t) in vs.variables() {
            inputs.push((format!("{arch}/{name}"), t.detach()));
        }
        inputs.push((format!("{arch}/x"), x.shallow_clone()));
        inputs.push((format!("{arch}/rows"), rows.shallow_clone()));
        for csam in [None, Some(1.0)] {
            cases.push(serde_json::json!({
                "arch": arch, "members": members, "classes": CLASSES, "csam": csam
            }));
        }
        built.push((vs, model, x, rows));
    }
    let named: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let dir = tempfile::tempdir().unwrap();
    let reference = run_twin(
        &python,
        "mimo_reference.py",
        dir.path(),
        &named,
        serde_json::Value::Array(cases.clone()),
    );
    for (i, case) in cases.iter().enumerate() {
        let (vs, model, x, rows) = &built[i / 2];
        let what = case.to_string();
        let drawn = TrainBatch::drawn_per_member(x, &y, rows.shallow_clone());
        if i % 2 == 0 {
            let eval = tch::no_grad(|| model.forward_mode(x, Mode::Eval));
            close(&eval, &reference[&format!("eval_logits_{i}")], &what);
            let stacked = x.index_select(0, &rows.reshape([-1]));
            let train = tch::no_grad(|| model.member_outputs(&stacked, Mode::Train));
            let heads = train.members.expect("a MIMO gives its heads");
            assert_eq!(heads.size(), [members, 10, CLASSES]);
            close(&heads, &reference[&format!("members_{i}")], &what);
        }
        let csam = case["csam"].as_f64();
        let ce = TrainingLoss::default();
        let (value, grads) = batch_objective(model, vs, &drawn, (&ce, csam));
        close(&value, &reference[&format!("value_{i}")], &what);
        assert!(grads.len() >= 4, "{what}: {} gradients", grads.len());
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

#[test]
fn head_m_trains_on_the_labels_of_member_ms_shuffle() {
    let _generator = lock_generator();
    tch::manual_seed(1);
    let (members, repetitions, b) = (3, 2, 6);
    let ensemble = mimo(members, 0.0, repetitions);
    let (_vs, model) = build("cnn", shape(2, 5, 5), ensemble, CLASSES);
    let x = batch(shape(2, 5, 5), b);
    let y = Tensor::from_slice(&[0i64, 1, 2, 3, 0, 1]);
    let rows = ensemble.member_rows(b as usize, 9).unwrap();
    let n = repetitions * b;
    assert_eq!(rows.size(), [members, n]);
    let pass = TrainBatch::drawn_per_member(&x, &y, rows.shallow_clone())
        .forward(&model)
        .unwrap();
    let (scores, targets) = pass.primary();
    assert_eq!(scores.logits.size(), [members * n, CLASSES]);
    let targets = targets.reshape([members, n]);
    let mut every_twice: Vec<i64> = (0..repetitions).flat_map(|_| 0..b).collect();
    every_twice.sort_unstable();
    for m in 0..members {
        let own = rows.get(m);
        let mut sorted = Vec::<i64>::try_from(&own).unwrap();
        sorted.sort_unstable();
        assert_eq!(sorted, every_twice, "member {m} reads each example r times");
        assert!(targets.get(m).equal(&y.index_select(0, &own)), "head {m}");
    }
    assert!(
        !rows.get(0).equal(&rows.get(1)),
        "the members' orders differ"
    );
    // The objective sums the heads' losses: M times the mean head loss.
    let total = pass
        .objective(|s, t| TrainingLoss::default().mean_of(s, t))
        .unwrap();
    let per_head: f64 = (0..members)
        .map(|m| {
            let z = scores.logits.reshape([members, n, CLASSES]).get(m);
            let own = targets.get(m);
            z.log_softmax(-1, None).nll_loss(&own).double_value(&[])
        })
        .sum();
    let total = total.double_value(&[]);
    // Float64 losses ~1.4 per head, 3 heads over 12 rows: a few dozen
    // roundings of values <= 5, ~1e-14 at worst; 1e-12 leaves 100x.
    assert!((total - per_head).abs() < 1e-12, "{total} {per_head}");
}

#[test]
fn one_member_without_repetitions_is_the_plain_network() {
    let _generator = lock_generator();
    tch::manual_seed(2);
    for (arch, input) in [
        ("mlp", shape(1, 2, 3)),
        ("cnn", shape(2, 6, 6)),
        ("resnet20", shape(3, 8, 8)),
    ] {
        let one = mimo(1, 0.0, 1);
        let (plain_vs, plain) = build(arch, input, Ensemble::Single, CLASSES);
        let (mut one_vs, members) = build(arch, input, one, CLASSES);
        one_vs.copy(&plain_vs).unwrap();
        let x = batch(input, 4);
        let y = Tensor::from_slice(&[0i64, 1, 2, 3]);
        for mode in [Mode::Train, Mode::Eval] {
            let a = tch::no_grad(|| plain.forward_mode(&x, mode));
            let b = tch::no_grad(|| members.forward_mode(&x, mode));
            // One member, no repetition: the same layers on the same inputs in the
            // same order, equal bits on any CPU.
            assert!(a.equal(&b), "{arch} {mode:?}\n{a}\n{b}");
        }
        // The one member reads a shuffle of the batch: the same examples,
        // so the same mean loss and gradients up to summation order.
        let rows = one.member_rows(4, 3).unwrap();
        let drawn = TrainBatch::drawn_per_member(&x, &y, rows);
        let ce = TrainingLoss::default();
        let (a, grads_a) =
            batch_objective(&plain, &plain_vs, &TrainBatch::plain(&x, &y), (&ce, None));
        let (b, grads_b) = batch_objective(&members, &one_vs, &drawn, (&ce, None));
        close(&b, &a, &format!("{arch} objective"));
        for ((name, ga), (_, gb)) in grads_a.iter().zip(&grads_b) {
            close(gb, ga, &format!("{arch} d/d{name}"));
        }
    }
}

#[test]
fn prediction_averages_the_heads_probabilities_of_the_repeated_image() {
    let _generator = lock_generator();
    tch::manual_seed(3);
    let (_vs, model) = build("mlp", shape(1, 2, 3), Ensemble::mimo(), CLASSES);
    let x = batch(shape(1, 2, 3), 6);
    let outputs = tch::no_grad(|| model.outputs(&x, Mode::Eval));
    let heads = outputs.members.unwrap();
    assert_eq!(heads.size(), [3, 6, CLASSES]);
    // The image fed to every input: the heads of the stacked copies.
    let stacked = x.repeat([3, 1, 1, 1]);
    let fed = tch::no_grad(|| model.member_outputs(&stacked, Mode::Eval));
    // The same ops on the same stacked input: equal bits.
    assert!(fed.members.unwrap().equal(&heads));
    let probabilities = heads.softmax(-1, None).mean_dim(0, false, None);
    let predicted = outputs.logits.softmax(-1, None);
    close(
        &predicted,
        &probabilities,
        "softmax(logits) = mean of softmax",
    );
    let averaged_logits = heads.mean_dim(0, false, None).softmax(-1, None);
    let gap = (&predicted - averaged_logits).abs().max().double_value(&[]);
    // Only asks the heads to differ visibly: 1e-4 is far above float64
    // round-off (~1e-15) and below a Jensen gap of distinct heads.
    assert!(gap > 1e-4, "the heads differ: {gap}");
    close(&mixture_logits(&heads), &outputs.logits, "mixture_logits");
}

#[test]
fn multiply_adds_are_one_network_for_m_images_and_m_heads() {
    let _generator = lock_generator();
    for (arch, input) in [("mlp", shape(1, 2, 3)), ("resnet20", shape(3, 8, 8))] {
        let wide = shape(3 * input.channels, input.height, input.width);
        let (vs, plain) = build(arch, wide, Ensemble::Single, 3 * CLASSES);
        let (_, members) = build(arch, input, Ensemble::mimo(), CLASSES);
        let at = (Kind::Double, vs.device());
        assert_eq!(members.forward_macs(at), plain.forward_macs(at), "{arch}");
    }
}

#[test]
fn refusals_are_one_line() {
    let _generator = lock_generator();
    let vs = VarStore::new(Device::Cpu);
    let refuse = |arch: &str, options: ModelSpec| {
        let built = build_model_with(&of_arch(arch, &options), &vs.root(), shape(3, 8, 8), 4);
        let message = built.unwrap_err().to_string();
        assert!(!message.contains('\n'), "{message}");
        message
    };
    let default = options(Ensemble::mimo());
    for arch in ["vit-ti16", "wrn-16-4", "torchscript", "resnet18"] {
        let message = refuse(arch, default.clone());
        assert!(
            message.contains("ensemble = mimo: applies only to mlp, cnn, resnet20"),
            "{message}"
        );
        assert!(message.contains(&format!("not {arch}")), "{message}");
    }
    let balcal = ModelSpec {
        head: Head::balcal(),
        ..default.clone()
    };
    assert!(refuse("resnet20", balcal).contains("head balcal"));
    for (bad, field) in [
        (mimo(0, 0.0, 4), "size"),
        (mimo(3, 1.5, 4), "input_repetition"),
        (mimo(3, 0.0, 0), "batch_repetitions"),
    ] {
        assert!(refuse("mlp", options(bad)).contains(field));
    }
    let model = build_model_with(
        &of_arch("mlp", &default),
        &(vs.root() / "mimo"),
        shape(1, 2, 3),
        4,
    )
    .unwrap();
    let x = Tensor::randn([4, 1, 2, 3], (Kind::Float, Device::Cpu));
    let y = Tensor::from_slice(&[0i64, 1, 2, 3]);
    // A mixed batch has no examples of its own to shuffle for the members.
    let draw = Mixing::mixup().draw(4, 0);
    let mixed = TrainBatch::mixed(&x, &y, &draw).unwrap();
    let message = mixed.forward(&model).unwrap_err().to_string();
    assert!(
        message.contains("MIMO") && !message.contains('\n'),
        "{message}"
    );
    // Rows drawn per member need a model of members.
    let single = build_model_with(
        &ModelSpec::of("mlp".parse().unwrap()),
        &(vs.root() / "single"),
        shape(1, 2, 3),
        4,
    )
    .unwrap();
    let rows = Ensemble::mimo().member_rows(4, 0).unwrap();
    let drawn = TrainBatch::drawn_per_member(&x, &y, rows);
    let message = drawn.forward(&single).unwrap_err().to_string();
    assert!(
        message.contains("one network") && !message.contains('\n'),
        "{message}"
    );
}
