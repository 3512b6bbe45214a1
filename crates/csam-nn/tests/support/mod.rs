//! What the PyTorch twin tests share: finding the project venv's python and
//! running a reference script over a case file.

#![allow(dead_code)] // each test binary uses its own part

pub mod bayesian;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use csam_nn::loss::{CsamLoss, TrainingLoss};
use csam_nn::mixing::TrainBatch;
use csam_nn::model::{build_model_with, InputShape, Model, ModelSpec};
use tch::nn::VarStore;
use tch::{Device, Tensor};

/// libtorch's random generator is process-global and the tests of a binary
/// run on parallel threads: every test that seeds it or draws from it
/// (initialising a model draws) holds this lock, so that one test's draws do
/// not fall between another's `manual_seed` and its draws.
pub fn lock_generator() -> MutexGuard<'static, ()> {
    static GENERATOR: Mutex<()> = Mutex::new(());
    GENERATOR
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Images of `channels x height x width`.
pub fn shape(channels: i64, height: i64, width: i64) -> InputShape {
    InputShape {
        channels,
        height,
        width,
    }
}

/// `arch` with `options` for `input` and `classes`, on a fresh store in
/// float64 on the CPU: the precision the twins compare in.
pub fn build_f64(
    arch: &str,
    input: InputShape,
    classes: i64,
    options: &ModelSpec,
) -> (VarStore, Model) {
    let mut vs = VarStore::new(Device::Cpu);
    let model = build_model_with(&of_arch(arch, options), &vs.root(), input, classes).unwrap();
    vs.double();
    (vs, model)
}

/// The twins' python: a bare `cargo test` without it skips a twin, `cargo
/// xtask test` fails it.
#[allow(unused_imports)] // not every test binary runs a twin
pub use csam_testkit::twin::python;

/// Runs `tests/fixtures/<script>` with `python` on `cases` (written as JSON
/// into `dir`, with `"inputs"` the safetensors file of `inputs` and `"out"`
/// the file the script writes) and returns the tensors it wrote, by name.
pub fn run_twin(
    python: &Path,
    script: &str,
    dir: &Path,
    inputs: &[(&str, &Tensor)],
    cases: serde_json::Value,
) -> HashMap<String, Tensor> {
    let (input_file, out_file) = (dir.join("inputs.safetensors"), dir.join("out.safetensors"));
    Tensor::write_safetensors(inputs, &input_file).unwrap();
    let spec = serde_json::json!({ "inputs": input_file, "out": out_file, "cases": cases });
    let spec_file = dir.join("cases.json");
    std::fs::write(&spec_file, spec.to_string()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(script);
    let output = std::process::Command::new(python)
        .arg(script)
        .arg(&spec_file)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    Tensor::read_safetensors(&out_file)
        .unwrap()
        .into_iter()
        .collect()
}

/// Asserts that `a` and `b` agree to 1e-12, relative to `max(|b|, 1)`.
/// Used for float64 twins of one forward and backward pass (no training
/// steps) on tiny models, resnet20 on 3x8x8 the largest: reductions of <= 576
/// terms in <= 20 layers, K * 2.2e-16 = 1.3e-13 per layer at worst, typically
/// sqrt(K) * 1.1e-16 = 3e-15, ~1e-14 through the depth: 100x below the bar.
/// (The KL terms' sums over ~1e5 weights are libtorch's cascade sums, whose
/// error grows with log2(K): ~17 * 2.2e-16 relative, all terms positive.)
pub fn close(a: &Tensor, b: &Tensor, what: &str) {
    let scale = b.abs().clamp_min(1.0);
    let error = ((a - b).abs() / scale).max().double_value(&[]);
    assert!(error < 1e-12, "{what}: relative error {error}\n{a}\n{b}");
}

/// Draws `steps` training batches of 8 float64 `1x6x6` images (standard
/// normal times 2) with labels of 3 classes, writes them to `file` as `x0`,
/// `y0`, `x1`, ... (what the step references read) and returns them in that
/// order.
pub fn write_step_batches(steps: i64, file: &Path) -> Vec<(String, Tensor)> {
    let options = (tch::Kind::Double, tch::Device::Cpu);
    let batches: Vec<(String, Tensor)> = (0..steps)
        .flat_map(|t| {
            let x = Tensor::randn([8, 1, 6, 6], options) * 2.0;
            let y = Tensor::randint(3, [8], (tch::Kind::Int64, tch::Device::Cpu));
            [(format!("x{t}"), x), (format!("y{t}"), y)]
        })
        .collect();
    let named: Vec<(&str, &Tensor)> = batches.iter().map(|(k, v)| (k.as_str(), v)).collect();
    Tensor::write_safetensors(&named, file).unwrap();
    batches
}

/// csam's objective of one training pass of `model` on `(x, y)` with `loss`
/// (weighted as CSAM's second pass with that gamma when `csam` is set), and
/// its gradients with respect to the trainable variables of `vs`, by name.
pub fn objective(
    model: &Model,
    vs: &VarStore,
    (x, y): (&Tensor, &Tensor),
    losses: (&TrainingLoss, Option<f64>),
) -> (Tensor, Vec<(String, Tensor)>) {
    batch_objective(model, vs, &TrainBatch::plain(x, y), losses)
}

/// [`objective`] of a training batch as the step feeds it (drawn per
/// member, ...).
pub fn batch_objective(
    model: &Model,
    vs: &VarStore,
    batch: &TrainBatch,
    (loss, csam): (&TrainingLoss, Option<f64>),
) -> (Tensor, Vec<(String, Tensor)>) {
    let pass = batch.forward(model).unwrap();
    let value = pass
        .objective(|scores, targets| match csam {
            None => loss.mean_of(scores, targets),
            Some(gamma) => CsamLoss::new(gamma, false)
                .unwrap()
                .weighted_of(loss, scores, targets),
        })
        .unwrap();
    with_gradients(value, vs)
}

/// `value` detached, and its gradients with respect to the trainable
/// variables of `vs`, by name (sorted).
pub fn with_gradients(value: Tensor, vs: &VarStore) -> (Tensor, Vec<(String, Tensor)>) {
    let mut trainable: Vec<(String, Tensor)> = vs
        .variables()
        .into_iter()
        .filter(|(_, t)| t.requires_grad())
        .collect();
    trainable.sort_by(|a, b| a.0.cmp(&b.0));
    let tensors: Vec<&Tensor> = trainable.iter().map(|(_, t)| t).collect();
    let grads = Tensor::run_backward(&[&value], &tensors, false, false);
    let named = trainable.into_iter().map(|(name, _)| name).zip(grads);
    (value.detach(), named.collect())
}

/// `options` on the architecture `arch`, their hidden widths kept only where
/// they shape it (the MLP), so that one set of options serves every
/// architecture of a test.
pub fn of_arch(arch: &str, options: &ModelSpec) -> ModelSpec {
    let arch: csam_nn::model::ModelKind = arch.parse().unwrap();
    ModelSpec {
        arch,
        mlp_hidden: options
            .mlp_hidden
            .clone()
            .filter(|_| arch.takes_hidden_widths()),
        ..options.clone()
    }
}

/// The one-line message with which building `arch` with `options` for
/// `3x8x8` inputs and 4 classes is refused.
pub fn refusal(arch: &str, options: &ModelSpec) -> String {
    let vs = VarStore::new(tch::Device::Cpu);
    let input = csam_nn::model::InputShape {
        channels: 3,
        height: 8,
        width: 8,
    };
    let built = build_model_with(&of_arch(arch, options), &vs.root(), input, 4);
    let message = built.unwrap_err().to_string();
    assert!(!message.contains('\n'), "{message}");
    message
}

/// Asserts that a Bayesian MLP (`1x2x3` inputs, 4 classes) with `options`
/// samples one network per seed and that a SAM step of radius 0 on it is the
/// plain step exactly: both passes of the SAM step at the same weights give
/// the plain step's gradient only if they sample the same network.
pub fn sam_at_radius_zero_is_the_plain_step(options: &ModelSpec) {
    use csam_nn::model::Mode;
    use csam_nn::optim::{plain_step, Perturbation, SamConfig, SamStep, Sgd, SgdConfig};
    let _generator = lock_generator();
    let x = Tensor::randn([6, 1, 2, 3], (tch::Kind::Double, Device::Cpu));
    let y = Tensor::from_slice(&[0i64, 1, 2, 3, 0, 1]);
    let twins: Vec<(VarStore, Model)> = (0..2)
        .map(|_| {
            tch::manual_seed(4);
            build_f64("mlp", shape(1, 2, 3), 4, options)
        })
        .collect();
    let [(sam_vs, sam_model), (plain_vs, plain_model)] = twins.as_slice() else {
        unreachable!()
    };
    for model in [sam_model, plain_model] {
        model.set_noise_seed(5);
        let a = tch::no_grad(|| model.forward_mode(&x, Mode::Train));
        let b = tch::no_grad(|| model.forward_mode(&x, Mode::Train));
        assert!(a.equal(&b), "one seed, one network");
        model.set_noise_seed(6);
        let c = tch::no_grad(|| model.forward_mode(&x, Mode::Train));
        assert!(!a.equal(&c), "another seed, another network");
        model.set_noise_seed(5);
    }
    let sgd = SgdConfig {
        lr: 1.0,
        momentum: 0.0,
        nesterov: false,
        weight_decay: 0.0,
    };
    let batch = TrainBatch::plain(&x, &y).with_kl_weight(0.1);
    let config = SamConfig {
        rho: 0.0,
        perturbation: Perturbation::Sam,
        ..SamConfig::default()
    };
    let mut sam = SamStep::new(config, sam_vs).unwrap();
    let mut optimizer = Sgd::new(sam_vs, sgd).unwrap();
    sam.step_batch(sam_model, &batch, &mut optimizer).unwrap();
    let mut optimizer = Sgd::new(plain_vs, sgd).unwrap();
    let ce = TrainingLoss::default();
    plain_step(plain_model, &batch, &mut optimizer, &ce, None).unwrap();
    let plain = plain_vs.variables();
    for (name, value) in sam_vs.variables() {
        assert!(value.equal(&plain[&name]), "{name} after the step");
    }
}
