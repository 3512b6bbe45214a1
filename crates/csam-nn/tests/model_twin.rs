//! Safetensors round trip between the Rust models and their PyTorch twins
//! (tests/fixtures/twins.py): Rust weights load into PyTorch with
//! `load_state_dict(strict=True)` and give the same logits (eval and train mode,
//! and the same BatchNorm running statistics after one train-mode forward);
//! PyTorch-saved weights load into Rust and give PyTorch's logits.
//!
//! The regularisers of the residual branches (the ViTs' stochastic depth,
//! PyramidNet's ShakeDrop) are checked in float64 against timm's ViT and a
//! ShakeDrop written as a PyTorch autograd function: eval logits, and, from
//! the same seed, train-mode logits, every parameter's gradient and (for
//! PyramidNet) a Hessian-vector product. tch and PyTorch link the same
//! libtorch and draw from its CPU generator, so the same random calls in the
//! same order on tensors of the same shape and kind draw the same numbers.
//!
//! Needs the project venv's python (`<workspace>/.venv/bin/python`, or
//! `CSAM_PYTHON`); skipped with a notice when it is absent.

mod support;

use csam_nn::model::memory_format::{is_channels_last, MemoryFormat};
use csam_nn::model::precision::Precision;
use csam_nn::model::weights::save_safetensors;
use csam_nn::model::{build_model_in, build_model_with, InputShape, Mode, Model, ModelSpec};
use std::path::{Path, PathBuf};
use std::sync::MutexGuard;
use support::{lock_generator, python};
use tch::{nn, nn::ModuleT, Device, Kind, Tensor};

/// Float32 forward passes on one thread in the same libtorch: where both
/// sides run the same ops (MLPs, CNNs, ResNets) they agree bit for bit on any
/// CPU. The ViTs' evaluation does not (csam's explicit attention, timm's fused
/// kernel): sums of <= 69 terms (head dim 64, 5 tokens) on both sides,
/// 2 * 69 * 1.19e-7 = 1.6e-5 relative per block, ~2e-4 over 12 blocks, ~6e-5
/// on logits <~ 0.3. A wiring or layer setting bug (BatchNorm eps 1e-3,
/// momentum) moves logits or statistics by >= 5e-4.
const TOLERANCE: f64 = 1e-4;

/// What a twin test holds: the generator (seeded), the python, a scratch
/// directory.
type TwinTest = (MutexGuard<'static, ()>, PathBuf, tempfile::TempDir);

/// Starts a twin test on one thread (tiny tensors: threads only contend)
/// from `seed`; `None`, with a notice, without the venv's python.
fn twin_test(seed: i64) -> Option<TwinTest> {
    let generator = lock_generator();
    tch::set_num_threads(1);
    let python = python()?;
    tch::manual_seed(seed);
    Some((generator, python, tempfile::tempdir().unwrap()))
}

struct Case {
    kind: &'static str,
    input: InputShape,
    n_classes: i64,
    options: ModelSpec,
}

fn shape(channels: i64, height: i64, width: i64) -> InputShape {
    InputShape {
        channels,
        height,
        width,
    }
}

fn cases() -> Vec<Case> {
    // Hidden widths only where they shape the model (the MLP).
    let opts = |hidden: &[usize], dropout| ModelSpec {
        mlp_hidden: (!hidden.is_empty()).then(|| hidden.to_vec()),
        dropout,
        ..Default::default()
    };
    vec![
        Case {
            kind: "mlp",
            input: shape(1, 6, 5),
            n_classes: 4,
            options: opts(&[16, 12], 0.0),
        },
        Case {
            kind: "mlp",
            input: shape(3, 4, 4),
            n_classes: 3,
            options: opts(&[8, 8, 8], 0.2),
        },
        Case {
            kind: "cnn",
            input: shape(3, 9, 7),
            n_classes: 5,
            options: opts(&[], 0.0),
        },
        Case {
            kind: "resnet20",
            input: shape(3, 8, 8),
            n_classes: 10,
            options: opts(&[], 0.1),
        },
        Case {
            kind: "resnet20",
            input: shape(1, 5, 5),
            n_classes: 2,
            options: opts(&[], 0.0),
        },
        // Dropout between a block's convolutions reaches the next
        // BatchNorm's running statistics, which the twin compares, so the
        // wide ResNets run without it here.
        Case {
            kind: "wrn-16-4",
            input: shape(3, 8, 8),
            n_classes: 10,
            options: opts(&[], 0.0),
        },
        Case {
            kind: "wrn-40-2",
            input: shape(1, 5, 7),
            n_classes: 3,
            options: opts(&[], 0.0),
        },
        Case {
            kind: "pyramidnet110-a48",
            input: shape(3, 7, 7),
            n_classes: 10,
            options: opts(&[], 0.0),
        },
        Case {
            kind: "pyramidnet272-a200",
            input: shape(1, 5, 6),
            n_classes: 4,
            options: opts(&[], 0.2),
        },
        // timm's and torchvision's own models on the PyTorch side.
        Case {
            kind: "vit-ti16",
            input: shape(3, 32, 32),
            n_classes: 10,
            options: opts(&[], 0.0),
        },
        Case {
            kind: "vit-s32",
            input: shape(1, 40, 70),
            n_classes: 3,
            options: opts(&[], 0.1),
        },
        Case {
            kind: "resnet18",
            input: shape(3, 32, 32),
            n_classes: 10,
            options: opts(&[], 0.0),
        },
        Case {
            kind: "resnet18",
            input: shape(1, 20, 20),
            n_classes: 7,
            options: opts(&[], 0.3),
        },
        Case {
            kind: "resnet50-cifar",
            input: shape(3, 8, 8),
            n_classes: 5,
            options: opts(&[], 0.0),
        },
    ]
}

/// The spec of `case`: its options on its architecture.
fn spec(case: &Case) -> ModelSpec {
    ModelSpec {
        arch: case.kind.parse().unwrap(),
        ..case.options.clone()
    }
}

fn build(vs: &nn::VarStore, case: &Case) -> Model {
    build_model_with(&spec(case), &vs.root(), case.input, case.n_classes).unwrap()
}

/// The architecture of `case` as twins.py reads it.
fn architecture(case: &Case) -> serde_json::Map<String, serde_json::Value> {
    let (shape, o) = (case.input, &case.options);
    let json = serde_json::json!({
        "kind": case.kind, "channels": shape.channels, "height": shape.height,
        "width": shape.width, "n_classes": case.n_classes, "hidden": o.mlp_hidden.clone().unwrap_or_default(),
        "dropout": o.dropout, "drop_path": o.drop_path, "shakedrop": o.shakedrop,
    });
    let serde_json::Value::Object(map) = json else {
        unreachable!("a JSON object literal")
    };
    map
}

/// Runs twins.py on `manifest`, written into `dir`.
fn run_twins(python: &Path, dir: &Path, manifest: Vec<serde_json::Value>) {
    let manifest_path = dir.join("manifest.json");
    std::fs::write(
        &manifest_path,
        serde_json::Value::Array(manifest).to_string(),
    )
    .unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/twins.py");
    let status = std::process::Command::new(python)
        .env("OMP_NUM_THREADS", "1")
        .arg(&script)
        .arg(&manifest_path)
        .status()
        .unwrap();
    assert!(status.success(), "twins.py failed: {status}");
}

/// Gives the BatchNorm buffers non-trivial values so eval mode exercises them.
fn randomise_buffers(vs: &nn::VarStore) {
    tch::no_grad(|| {
        for (name, mut t) in vs.variables() {
            if name.ends_with("running_mean") {
                let _ = t.normal_(0.0, 0.1);
            } else if name.ends_with("running_var") {
                let _ = t.uniform_(0.5, 1.5);
            }
        }
    });
}

fn max_abs_diff(a: &Tensor, b: &Tensor) -> f64 {
    assert_eq!(a.size(), b.size());
    (a - b).abs().max().double_value(&[])
}

fn get<'a>(named: &'a [(String, Tensor)], key: &str) -> &'a Tensor {
    &named
        .iter()
        .find(|(k, _)| k == key)
        .unwrap_or_else(|| panic!("missing {key}"))
        .1
}

#[test]
fn rust_and_pytorch_twins_agree_both_ways() {
    let Some((_generator, python, dir)) = twin_test(7) else {
        return;
    };
    let cases = cases();
    let mut manifest = Vec::new();
    let mut rust_side = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let vs = nn::VarStore::new(Device::Cpu);
        let model = build(&vs, case);
        randomise_buffers(&vs);
        let shape = case.input;
        let x = Tensor::randn(
            [4, shape.channels, shape.height, shape.width],
            (Kind::Float, Device::Cpu),
        );
        let file = |stem: &str| dir.path().join(format!("{i}_{stem}.safetensors"));
        vs.save(file("rust_weights")).unwrap();
        Tensor::write_safetensors(&[("x", &x)], file("input")).unwrap();
        let eval = tch::no_grad(|| model.forward_t(&x, false));
        let train = tch::no_grad(|| model.forward_t(&x, true));
        let running: Vec<(String, Tensor)> = vs
            .variables()
            .into_iter()
            .filter(|(k, _)| k.contains("running_"))
            .collect();
        let mut entry = architecture(case);
        entry.extend([
            ("seed".to_string(), serde_json::json!(100 + i)),
            ("input".to_string(), serde_json::json!(file("input"))),
            (
                "rust_weights".to_string(),
                serde_json::json!(file("rust_weights")),
            ),
            ("out".to_string(), serde_json::json!(file("out"))),
            (
                "torch_weights".to_string(),
                serde_json::json!(file("torch_weights")),
            ),
        ]);
        manifest.push(entry.into());
        rust_side.push((x, eval, train, running));
    }
    run_twins(&python, dir.path(), manifest);

    for (i, (case, (x, eval, train, running))) in cases.iter().zip(rust_side).enumerate() {
        let label = format!("case {i} ({})", case.kind);
        let out =
            Tensor::read_safetensors(dir.path().join(format!("{i}_out.safetensors"))).unwrap();
        let d = max_abs_diff(&eval, get(&out, "eval"));
        assert!(d <= TOLERANCE, "{label}: eval logits differ by {d}");
        if case.options.dropout == 0.0 {
            // With dropout, train-mode logits depend on each side's random masks.
            let d = max_abs_diff(&train, get(&out, "train"));
            assert!(d <= TOLERANCE, "{label}: train logits differ by {d}");
        }
        for (name, value) in &running {
            let d = max_abs_diff(value, get(&out, &format!("running_after_train.{name}")));
            assert!(
                d <= TOLERANCE,
                "{label}: {name} after one train forward differs by {d}"
            );
        }
        let n_bn = out
            .iter()
            .filter(|(k, _)| k.starts_with("running_after_train."))
            .count();
        assert_eq!(n_bn, running.len(), "{label}: BatchNorm buffer sets differ");

        // PyTorch-initialised weights into a fresh Rust model.
        let mut vs = nn::VarStore::new(Device::Cpu);
        let model = build(&vs, case);
        vs.load(dir.path().join(format!("{i}_torch_weights.safetensors")))
            .unwrap();
        let logits = tch::no_grad(|| model.forward_t(&x, false));
        let d = max_abs_diff(&logits, get(&out, "torch_eval"));
        assert!(
            d <= TOLERANCE,
            "{label}: logits of PyTorch weights differ by {d}"
        );
    }
}

/// Agreement asked of float64 twins, relative to `max(|PyTorch's|, 1)`. One
/// training pass (no steps): the same ops agree bit for bit; elsewhere sums of
/// <= 1944 terms (PyramidNet-272's 3x3 convs over 216 channels) round by
/// <= 1944 * 2.2e-16 = 4e-13 per layer at worst, typically sqrt(K) * 1.1e-16
/// = 5e-15, ~1e-12 over 272 layers: 100x below.
const FLOAT64_TOLERANCE: f64 = 1e-10;

/// A float64 training-step case of a regulariser.
struct TrainingCase {
    model: Case,
    /// Whether to compare a Hessian-vector product too.
    hvp: bool,
}

fn training_cases() -> Vec<TrainingCase> {
    let case = |kind, input, n_classes, (dropout, drop_path, shakedrop), hvp| TrainingCase {
        model: Case {
            kind,
            input,
            n_classes,
            options: ModelSpec {
                dropout,
                drop_path,
                shakedrop,
                ..Default::default()
            },
        },
        hvp,
    };
    vec![
        case("vit-ti16", shape(3, 32, 32), 10, (0.1, 0.3, 0.0), false),
        case("vit-s32", shape(1, 40, 70), 3, (0.0, 0.6, 0.0), false),
        case(
            "pyramidnet110-a48",
            shape(3, 7, 7),
            10,
            (0.2, 0.0, 0.5),
            true,
        ),
        case(
            "pyramidnet272-a200",
            shape(1, 5, 6),
            4,
            (0.0, 0.0, 0.9),
            true,
        ),
    ]
}

/// Asserts `a` equals PyTorch's `b` to [`FLOAT64_TOLERANCE`]; the
/// difference relative to `max(|b|, 1)`.
fn assert_float64_close(a: &Tensor, b: &Tensor, what: &str) -> f64 {
    let scale = b.abs().max().double_value(&[]).max(1.0);
    let d = max_abs_diff(a, b) / scale;
    assert!(d <= FLOAT64_TOLERANCE, "{what}: relative difference {d}");
    d
}

/// The trainable variables, by name, in a fixed order.
fn parameters(vs: &nn::VarStore) -> Vec<(String, Tensor)> {
    let mut named: Vec<(String, Tensor)> = vs
        .variables()
        .into_iter()
        .filter(|(_, t)| t.requires_grad())
        .collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    named
}

/// What one side computes of a training case.
struct TrainingStep {
    train: Tensor,
    grads: Vec<Tensor>,
    hvp: Option<Vec<Tensor>>,
}

/// A train-mode forward pass from `seed`, the gradients of the mean
/// cross-entropy and, with `hvp`, the Hessian-vector product with
/// `v = sin(parameters)` by double backward.
fn training_step(
    model: &Model,
    params: &[Tensor],
    (x, labels): (&Tensor, &Tensor),
    seed: i64,
    hvp: bool,
) -> TrainingStep {
    tch::manual_seed(seed);
    let logits = model.forward_t(x, true);
    // Mean cross-entropy in float64 (tch's `cross_entropy_for_logits` takes
    // the log-softmax in float32).
    let loss = logits.log_softmax(-1, Kind::Double).nll_loss(labels);
    let grads = Tensor::run_backward(&[&loss], params, true, hvp);
    let hvp = hvp.then(|| {
        let dot = grads
            .iter()
            .zip(params)
            .map(|(g, p)| (g * p.detach().sin()).sum(Kind::Double))
            .reduce(|a, b| a + b)
            .unwrap();
        Tensor::run_backward(&[&dot], params, false, false)
    });
    TrainingStep {
        train: logits.detach(),
        grads: grads.iter().map(Tensor::detach).collect(),
        hvp,
    }
}

#[test]
fn stochastic_depth_and_shakedrop_match_their_twins_in_float64() {
    let Some((_generator, python, dir)) = twin_test(11) else {
        return;
    };
    let cases = training_cases();
    let mut manifest = Vec::new();
    let mut rust_side = Vec::new();
    for (i, TrainingCase { model: case, hvp }) in cases.iter().enumerate() {
        let mut vs = nn::VarStore::new(Device::Cpu);
        let model = build(&vs, case);
        vs.double();
        randomise_buffers(&vs);
        let shape = case.input;
        let x = Tensor::randn(
            [4, shape.channels, shape.height, shape.width],
            (Kind::Double, Device::Cpu),
        );
        let labels = Tensor::arange(4, (Kind::Int64, Device::Cpu)).remainder(case.n_classes);
        let file = |stem: &str| dir.path().join(format!("{i}_{stem}.safetensors"));
        vs.save(file("rust_weights")).unwrap();
        Tensor::write_safetensors(&[("x", &x), ("labels", &labels)], file("input")).unwrap();
        let eval = tch::no_grad(|| model.forward_t(&x, false));
        let params = parameters(&vs);
        let tensors: Vec<Tensor> = params.iter().map(|(_, t)| t.shallow_clone()).collect();
        let seed = 1000 + i as i64;
        let step = training_step(&model, &tensors, (&x, &labels), seed, *hvp);

        // The same weights without the regulariser train to other logits:
        // the option is in force.
        let mut plain_vs = nn::VarStore::new(Device::Cpu);
        let plain_case = Case {
            options: ModelSpec {
                drop_path: 0.0,
                shakedrop: 0.0,
                ..case.options.clone()
            },
            ..*case
        };
        let plain = build(&plain_vs, &plain_case);
        plain_vs.double();
        plain_vs.copy(&vs).unwrap();
        tch::manual_seed(seed);
        let plain_train = tch::no_grad(|| plain.forward_t(&x, true));
        // Stochastic depth 0.3-0.6 or ShakeDrop 0.5-0.9 moves logits by O(0.1);
        // float64 round-off is ~1e-15: 1e-3 only asks for a visible change.
        assert!(
            max_abs_diff(&plain_train, &step.train) > 1e-3,
            "{}: the regulariser changed nothing",
            case.kind
        );

        let mut entry = architecture(case);
        entry.extend([
            ("train_seed".to_string(), serde_json::json!(seed)),
            ("hvp".to_string(), serde_json::json!(hvp)),
            ("input".to_string(), serde_json::json!(file("input"))),
            (
                "rust_weights".to_string(),
                serde_json::json!(file("rust_weights")),
            ),
            ("out".to_string(), serde_json::json!(file("out"))),
        ]);
        manifest.push(entry.into());
        rust_side.push((eval, params, step));
    }
    run_twins(&python, dir.path(), manifest);

    for (i, (case, (eval, params, step))) in cases.iter().zip(rust_side).enumerate() {
        let label = format!("case {i} ({})", case.model.kind);
        let out =
            Tensor::read_safetensors(dir.path().join(format!("{i}_out.safetensors"))).unwrap();
        let mut compared = vec![("eval logits".to_string(), &eval, "eval".to_string())];
        compared.push(("train logits".into(), &step.train, "train".into()));
        let n_grads = out.iter().filter(|(k, _)| k.starts_with("grad.")).count();
        assert_eq!(n_grads, params.len(), "{label}: parameter sets differ");
        for (j, (name, _)) in params.iter().enumerate() {
            compared.push((
                format!("gradient of {name}"),
                &step.grads[j],
                format!("grad.{name}"),
            ));
            if let Some(hvp) = &step.hvp {
                compared.push((
                    format!("Hessian-vector product at {name}"),
                    &hvp[j],
                    format!("hvp.{name}"),
                ));
            }
        }
        let worst = compared
            .iter()
            .map(|(what, rust, key)| {
                assert_float64_close(rust, get(&out, key), &format!("{label}: {what}"))
            })
            .fold(0.0, f64::max);
        eprintln!(
            "{label}: {} tensors, largest relative difference {worst:.1e}",
            compared.len()
        );
    }
}

#[test]
fn zero_rates_draw_no_random_numbers_and_evaluation_ignores_the_draws() {
    let _generator = lock_generator();
    let x = Tensor::randn([2, 3, 32, 32], (Kind::Float, Device::Cpu));
    let case = |kind, drop_path, shakedrop| Case {
        kind,
        input: shape(3, 32, 32),
        n_classes: 10,
        options: ModelSpec {
            drop_path,
            shakedrop,
            ..Default::default()
        },
    };
    for (on, off) in [
        (case("vit-ti16", 0.4, 0.0), case("vit-ti16", 0.0, 0.0)),
        (
            case("pyramidnet110-a48", 0.0, 0.5),
            case("pyramidnet110-a48", 0.0, 0.0),
        ),
    ] {
        let kind = on.kind;
        let vs = nn::VarStore::new(Device::Cpu);
        let plain = build(&vs, &off);
        // A train-mode pass without the regulariser draws nothing: the next
        // number is the seed's first.
        tch::manual_seed(3);
        let first = Tensor::rand([8], (Kind::Float, Device::Cpu));
        tch::manual_seed(3);
        let _ = tch::no_grad(|| plain.forward_t(&x, true));
        let next = Tensor::rand([8], (Kind::Float, Device::Cpu));
        // The same generator state draws the same bits.
        assert_eq!(
            max_abs_diff(&first, &next),
            0.0,
            "{kind}: rate 0 drew numbers"
        );

        // Evaluation and MC-Dropout sampling (without dropout) are
        // deterministic with the regulariser on, and the ViT's equal the
        // plain model's (stochastic depth is the identity there).
        let mut on_vs = nn::VarStore::new(Device::Cpu);
        let regularised = build(&on_vs, &on);
        on_vs.copy(&vs).unwrap();
        let eval = tch::no_grad(|| regularised.forward_mode(&x, Mode::Eval));
        let mc = tch::no_grad(|| regularised.forward_mode(&x, Mode::McDropout));
        // Without draws both modes run the same ops on the same values: equal
        // bits, and the plain ViT's too.
        assert_eq!(
            max_abs_diff(&eval, &mc),
            0.0,
            "{kind}: MC-Dropout perturbed"
        );
        let plain_eval = tch::no_grad(|| plain.forward_mode(&x, Mode::Eval));
        let same = max_abs_diff(&eval, &plain_eval) == 0.0;
        assert_eq!(same, on.options.drop_path > 0.0, "{kind}: evaluation");
    }
}

/// Mixed precision: a float32 model built with `precision` bf16 or fp16
/// computes, on the CPU, what the same weights compute in PyTorch under
/// `torch.autocast("cpu", dtype)`: eval logits, the cross entropy of a
/// train-mode pass and every gradient (float32, the master weights' type);
/// and it computes something else than in float32 (the region is on).
#[test]
fn autocast_matches_torch_autocast() {
    let Some((_generator, python, dir)) = twin_test(11) else {
        return;
    };
    let cases: Vec<(Case, Precision)> = cases()
        .into_iter()
        .filter(|c| ["mlp", "cnn", "resnet20"].contains(&c.kind) && c.options.dropout == 0.0)
        .flat_map(|c| {
            [Precision::Bf16, Precision::Fp16].map(|precision| {
                let options = ModelSpec {
                    precision,
                    ..c.options.clone()
                };
                let case = Case { options, ..c };
                (case, precision)
            })
        })
        .collect();
    let mut manifest = Vec::new();
    let mut rust_side = Vec::new();
    for (i, (case, precision)) in cases.iter().enumerate() {
        let vs = nn::VarStore::new(Device::Cpu);
        let model = build(&vs, case);
        let shape = case.input;
        let x = Tensor::randn(
            [6, shape.channels, shape.height, shape.width],
            (Kind::Float, Device::Cpu),
        );
        let labels = Tensor::randint(case.n_classes, [6], (Kind::Int64, Device::Cpu));
        let file = |stem: &str| dir.path().join(format!("amp{i}_{stem}.safetensors"));
        vs.save(file("rust_weights")).unwrap();
        Tensor::write_safetensors(&[("x", &x), ("labels", &labels)], file("input")).unwrap();
        let eval = tch::no_grad(|| model.forward_t(&x, false));
        let full = {
            let fp32 = ModelSpec {
                precision: Precision::Fp32,
                ..spec(case)
            };
            let mut twin = nn::VarStore::new(Device::Cpu);
            let reference = build_model_with(&fp32, &twin.root(), shape, case.n_classes).unwrap();
            twin.load(file("rust_weights")).unwrap();
            tch::no_grad(|| reference.forward_t(&x, false))
        };
        let logits = model.forward_t(&x, true);
        assert_eq!(
            logits.kind(),
            Kind::Float,
            "logits leave the region in float32"
        );
        let loss = logits.cross_entropy_for_logits(&labels);
        let params = parameters(&vs);
        let tensors: Vec<Tensor> = params.iter().map(|(_, t)| t.shallow_clone()).collect();
        let grads = Tensor::run_backward(&[&loss], &tensors, false, false);
        let mut entry = architecture(case);
        entry.extend([
            ("autocast".to_string(), serde_json::json!(precision.name())),
            ("input".to_string(), serde_json::json!(file("input"))),
            (
                "rust_weights".to_string(),
                serde_json::json!(file("rust_weights")),
            ),
            ("out".to_string(), serde_json::json!(file("out"))),
        ]);
        manifest.push(entry.into());
        let names: Vec<String> = params.into_iter().map(|(n, _)| n).collect();
        rust_side.push((eval, full, loss, names, grads));
    }
    run_twins(&python, dir.path(), manifest);
    for (i, ((case, precision), (eval, full, loss, names, grads))) in
        cases.iter().zip(rust_side).enumerate()
    {
        let label = format!("{} {}", case.kind, precision.name());
        let out =
            Tensor::read_safetensors(dir.path().join(format!("amp{i}_out.safetensors"))).unwrap();
        let d = max_abs_diff(&eval, get(&out, "eval"));
        // Both sides run the same autocast ops in the same libtorch on one
        // thread: equal bits on any CPU, 1e-6 is slack (loss and gradients
        // too). A differing op or cast order would show as a float16 or
        // bfloat16 rounding (>= 4.9e-4 relative); float32 vs autocast differ by
        // such roundings, so 1e-5 only asks for a change.
        assert!(
            d <= 1e-6,
            "{label}: eval logits differ from torch.autocast's by {d}"
        );
        let lowered = max_abs_diff(&eval, &full);
        assert!(
            lowered > 1e-5,
            "{label}: the same logits as float32 ({lowered}): no autocast?"
        );
        let d = (loss.double_value(&[]) - get(&out, "loss").double_value(&[0])).abs();
        assert!(d <= 1e-6, "{label}: loss differs by {d}");
        for (name, grad) in names.iter().zip(&grads) {
            assert_eq!(grad.kind(), Kind::Float, "{label}: {name}'s gradient");
            let d = max_abs_diff(grad, get(&out, &format!("grad.{name}")));
            assert!(d <= 1e-6, "{label}: gradient of {name} differs by {d}");
        }
    }
}

/// How far channels_last results may be from PyTorch's and from the
/// contiguous model's (float32), relative to `max(|reference|, 1)`: the
/// kernels of the two layouts sum in other orders.
/// PyTorch's channels_last runs the same kernels (equal bits); against the
/// contiguous model, ResNet-20's convolutions sum 144, 288 and 576 terms (~6
/// of each) in another order, K * 1.19e-7 each, 7e-4 in all, and its 19
/// BatchNorms' statistics over <= 6 x 64 values <= 19 * 4.6e-5 = 9e-4: ~2e-3
/// relative at worst. A layout bug (weights or gradients read in the wrong
/// order) moves values by O(1) relative.
const CHANNELS_LAST_TOLERANCE: f64 = 2e-3;

/// A model's eval logits, then the cross entropy of a train-mode pass and
/// its gradient for every parameter (by name, sorted).
fn eval_loss_grads(
    model: &Model,
    vs: &nn::VarStore,
    (x, labels): (&Tensor, &Tensor),
) -> (Tensor, Tensor, Vec<(String, Tensor)>) {
    let eval = tch::no_grad(|| model.forward_t(x, false));
    let loss = model.forward_t(x, true).cross_entropy_for_logits(labels);
    let params = parameters(vs);
    let tensors: Vec<Tensor> = params.iter().map(|(_, t)| t.shallow_clone()).collect();
    let grads = Tensor::run_backward(&[&loss], &tensors, false, false);
    let named = params.into_iter().map(|(n, _)| n).zip(grads).collect();
    (eval, loss, named)
}

/// The memory format channels_last: the small CNN and ResNet-20 built with
/// it ([`build_model_in`]) hold every convolution weight in NHWC strides and
/// compute what PyTorch computes after `model.to(memory_format=
/// torch.channels_last)` on the converted batch, from the same weights: eval
/// logits, the cross entropy of a train-mode pass and every gradient (the
/// convolutions' in NHWC strides, as PyTorch's), to
/// [`CHANNELS_LAST_TOLERANCE`]; and what the same weights compute
/// contiguous, to the same tolerance. The weights file it writes is
/// PyTorch's standard layout (twins.py loads it with `strict=True`).
#[test]
fn channels_last_matches_torch_channels_last() {
    let Some((_generator, python, dir)) = twin_test(12) else {
        return;
    };
    let cases = [("cnn", shape(3, 9, 7), 5), ("resnet20", shape(3, 8, 8), 10)];
    let mut manifest = Vec::new();
    let mut rust_side = Vec::new();
    for (i, &(kind, input, n_classes)) in cases.iter().enumerate() {
        let case = Case {
            kind,
            input,
            n_classes,
            options: ModelSpec {
                memory_format: MemoryFormat::ChannelsLast,
                ..Default::default()
            },
        };
        let vs = nn::VarStore::new(Device::Cpu);
        let model = build_model_in(&spec(&case), &vs, input, n_classes).unwrap();
        randomise_buffers(&vs);
        let convs: Vec<(String, Tensor)> = parameters(&vs)
            .into_iter()
            .filter(|(_, t)| t.dim() == 4)
            .collect();
        assert!(!convs.is_empty(), "{kind}: no convolution weights");
        for (name, w) in &convs {
            assert!(
                is_channels_last(w) && !w.is_contiguous(),
                "{kind}: {name} is not in channels_last"
            );
        }
        // The same weights, contiguous.
        let mut plain_vs = nn::VarStore::new(Device::Cpu);
        let plain = build_model_with(
            &ModelSpec::of(kind.parse().unwrap()),
            &plain_vs.root(),
            input,
            n_classes,
        )
        .unwrap();
        plain_vs.copy(&vs).unwrap();
        let x = Tensor::randn(
            [6, input.channels, input.height, input.width],
            (Kind::Float, Device::Cpu),
        );
        let labels = Tensor::randint(n_classes, [6], (Kind::Int64, Device::Cpu));
        let file = |stem: &str| dir.path().join(format!("nhwc{i}_{stem}.safetensors"));
        save_safetensors(&vs, &file("rust_weights")).unwrap();
        Tensor::write_safetensors(&[("x", &x), ("labels", &labels)], file("input")).unwrap();
        let channels_last = eval_loss_grads(&model, &vs, (&x, &labels));
        let contiguous = eval_loss_grads(&plain, &plain_vs, (&x, &labels));
        let mut entry = architecture(&case);
        entry.extend([
            ("channels_last".to_string(), serde_json::json!(true)),
            ("input".to_string(), serde_json::json!(file("input"))),
            (
                "rust_weights".to_string(),
                serde_json::json!(file("rust_weights")),
            ),
            ("out".to_string(), serde_json::json!(file("out"))),
        ]);
        manifest.push(entry.into());
        rust_side.push((channels_last, contiguous));
    }
    run_twins(&python, dir.path(), manifest);
    let worst = std::cell::Cell::new((0.0f64, 0.0f64));
    let close = |what: &str, a: &Tensor, b: &Tensor| {
        let d = max_abs_diff(a, b) / b.abs().max().double_value(&[]).max(1.0);
        assert!(d <= CHANNELS_LAST_TOLERANCE, "{what} differs by {d}");
        let (torch, plain) = worst.get();
        worst.set(if what.ends_with("(PyTorch)") {
            (torch.max(d), plain)
        } else {
            (torch, plain.max(d))
        });
    };
    for (i, ((kind, ..), (channels_last, contiguous))) in cases.iter().zip(rust_side).enumerate() {
        let out =
            Tensor::read_safetensors(dir.path().join(format!("nhwc{i}_out.safetensors"))).unwrap();
        let (eval, loss, grads) = channels_last;
        close(
            &format!("{kind}: eval logits (PyTorch)"),
            &eval,
            get(&out, "eval"),
        );
        close(
            &format!("{kind}: eval logits (contiguous)"),
            &eval,
            &contiguous.0,
        );
        close(
            &format!("{kind}: loss (PyTorch)"),
            &loss.reshape([1]),
            get(&out, "loss"),
        );
        close(&format!("{kind}: loss (contiguous)"), &loss, &contiguous.1);
        for ((name, grad), (_, plain)) in grads.iter().zip(&contiguous.2) {
            if grad.dim() == 4 {
                assert!(is_channels_last(grad), "{kind}: {name}'s gradient is NCHW");
            }
            close(
                &format!("{kind}: gradient of {name} (PyTorch)"),
                grad,
                get(&out, &format!("grad.{name}")),
            );
            close(
                &format!("{kind}: gradient of {name} (contiguous)"),
                grad,
                plain,
            );
        }
    }
    let (torch, plain) = worst.get();
    eprintln!("largest relative differences: PyTorch {torch:e}, contiguous {plain:e}");
}
