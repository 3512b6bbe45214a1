//! The driver of the Bayesian layers' PyTorch twins (mean-field Flipout,
//! rank-1): what the two tests share, around what differs (the noise each
//! layer draws, what a train-mode pass is compared by).

use std::path::Path;

use csam_nn::loss::TrainingLoss;
use csam_nn::mixing::TrainBatch;
use csam_nn::model::bayesian::prediction_seed;
use csam_nn::model::{InputShape, Mode, Model, TrainingPass};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use super::{close, run_twin, with_gradients};

const F64_CPU: (Kind, Device) = (Kind::Double, Device::Cpu);

/// One model of a twin run, built in float64 with its posterior's scales
/// already set where the test wants them.
pub struct TwinModel {
    pub arch: &'static str,
    pub input: InputShape,
    /// The layers with a posterior, by variable prefix.
    pub layers: Vec<&'static str>,
    pub vs: VarStore,
    pub model: Model,
    /// The reference script's fields of this model beyond those [`run`]
    /// writes (its prior's std, its members, ...).
    pub fields: serde_json::Value,
}

impl TwinModel {
    /// `built` (store and model) of `arch` for `input`, with posteriors on
    /// `layers` and the script's extra `fields`.
    pub fn new(
        (arch, input): (&'static str, InputShape),
        layers: Vec<&'static str>,
        (vs, model): (VarStore, Model),
        fields: serde_json::Value,
    ) -> TwinModel {
        TwinModel {
            arch,
            input,
            layers,
            vs,
            model,
            fields,
        }
    }
}

/// What every model of a twin run shares.
pub struct TwinRun {
    /// The reference script in tests/fixtures.
    pub script: &'static str,
    /// Prediction samples.
    pub samples: i64,
    /// The noise seed of the train-mode pass.
    pub train_seed: u64,
    /// The KL term's weight in the objective.
    pub kl_weight: f64,
}

/// The labels of the twin batch (4 classes).
const LABELS: [i64; 5] = [0, 1, 0, 3, 2];

/// The rows of the twin batch.
pub const ROWS: i64 = LABELS.len() as i64;

/// Runs `twin.script` on `models` and checks, per model, the eval-mode
/// prediction, the train-mode pass (`train`: what it is compared by, under
/// the reference's key `train_key`), the KL, the objective `CE + w KL` and
/// every gradient, to 1e-12. `noise(model, seed, layer)` gives the noise
/// tensors that layer draws for a seed, by the part name the script reads.
/// Returns each model's gradients' names, for checks of what is trained.
pub fn run(
    python: &Path,
    twin: &TwinRun,
    models: &[TwinModel],
    noise: impl Fn(&TwinModel, u64, &str) -> Vec<(&'static str, Tensor)>,
    (train_key, train): (&str, impl Fn(&Model, &Tensor) -> Tensor),
) -> Vec<Vec<String>> {
    let y = Tensor::from_slice(&LABELS);
    let mut inputs = vec![("y".to_string(), y.shallow_clone())];
    let mut cases = Vec::new();
    let mut xs = Vec::new();
    for twin_model in models {
        let TwinModel {
            arch,
            input,
            vs,
            model,
            ..
        } = twin_model;
        // Running statistics away from their initial values, so that the
        // prediction reads them.
        let dims = [8, input.channels, input.height, input.width];
        let _ =
            tch::no_grad(|| model.forward_mode(&(Tensor::randn(dims, F64_CPU) + 0.5), Mode::Train));
        let x = Tensor::randn([ROWS, input.channels, input.height, input.width], F64_CPU);
        for (name, t) in &vs.variables() {
            inputs.push((format!("{arch}/{name}"), t.detach()));
        }
        inputs.push((format!("{arch}/x"), x.shallow_clone()));
        let seeds = std::iter::once(("train".to_string(), twin.train_seed))
            .chain((0..twin.samples as u64).map(|s| (format!("sample{s}"), prediction_seed(s))));
        for (tag, seed) in seeds {
            for layer in &twin_model.layers {
                for (part, tensor) in noise(twin_model, seed, layer) {
                    inputs.push((format!("{arch}/noise/{tag}/{layer}/{part}"), tensor));
                }
            }
        }
        let mut case = serde_json::json!({
            "arch": arch,
            "kl_weight": twin.kl_weight,
            "layers": twin_model.layers,
            "train": "train",
            "samples": (0..twin.samples).map(|s| format!("sample{s}")).collect::<Vec<_>>(),
        });
        if let (Some(case), Some(fields)) = (case.as_object_mut(), twin_model.fields.as_object()) {
            case.extend(fields.clone());
        }
        cases.push(case);
        xs.push(x);
    }
    let named: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let dir = tempfile::tempdir().unwrap();
    let reference = run_twin(python, twin.script, dir.path(), &named, cases.into());
    let expected = |key: String| &reference[&key];
    models
        .iter()
        .zip(&xs)
        .enumerate()
        .map(
            |(
                i,
                (
                    TwinModel {
                        arch, vs, model, ..
                    },
                    x,
                ),
            )| {
                model.set_noise_seed(twin.train_seed);
                let eval = tch::no_grad(|| model.forward_mode(x, Mode::Eval));
                close(&eval, expected(format!("eval_logits_{i}")), arch);
                let pass = tch::no_grad(|| train(model, x));
                close(&pass, expected(format!("{train_key}_{i}")), arch);
                let kl = model.kl_divergence().unwrap();
                close(&kl, expected(format!("kl_{i}")), &format!("{arch} KL"));
                let batch = TrainBatch::plain(x, &y).with_kl_weight(twin.kl_weight);
                let pass = batch.forward(model).unwrap();
                let loss = TrainingLoss::default();
                let value = pass.objective(|s, t| loss.mean_of(s, t)).unwrap();
                let (value, grads) = with_gradients(value, vs);
                close(&value, expected(format!("value_{i}")), arch);
                for (name, grad) in &grads {
                    let what = format!("{arch} d/d{name}");
                    close(grad, expected(format!("grad_{i}_{name}")), &what);
                }
                grads.into_iter().map(|(name, _)| name).collect()
            },
        )
        .collect()
}
