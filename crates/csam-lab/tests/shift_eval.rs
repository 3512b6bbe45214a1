//! Deep ensembles and MC-Dropout against independently computed
//! probabilities: the ensemble's are the mean of the softmax of each
//! member's own saved test logits; an MC-Dropout pass of a model without
//! dropout is the plain eval-mode pass.
//!
//! libtorch's random generator is process-global, so the tests of this file
//! take a lock and never overlap.

use std::path::Path;
use std::sync::Mutex;

use csam_data::{load, DatasetSpec};
use csam_lab::shift::predictor::{Predictor, Sampling};
use csam_nn::model::{build_model, InputShape, Mode, ModelKind};
use csam_train::spec::SpecLayers;
use csam_train::train::evaluate::{predict, predict_mode};
use csam_train::train::TrainedRun;
use csam_train::train::{RunOutcome, Silent, TrainRequest};
use tch::{nn::VarStore, Device, Kind, Tensor};

static SERIAL: Mutex<()> = Mutex::new(());

/// A run reported to no one.
fn run(request: &TrainRequest) -> Result<RunOutcome, csam_train::train::TrainError> {
    csam_train::train::run(request, &mut Silent)
}

fn train_digits(out: &Path, seed: u64, dropout: f64) {
    let flags: toml::Table = format!(
        "data = \"digits\"\nval_size = 300\nmodel = \"mlp\"\nepochs = 2\nbatch_size = 64\n\
         lr = 0.05\nseed = {seed}\ndropout = {dropout:?}\naugment = false\n\
         device = \"cpu\"\nthreads = 1\n"
    )
    .parse()
    .unwrap();
    let (spec, runtime) = SpecLayers::new().flags(flags).unwrap().build().unwrap();
    let request = TrainRequest {
        spec,
        runtime,
        out: out.to_path_buf(),
        resume: false,
        stop_after_epoch: None,
    };
    assert!(matches!(run(&request).unwrap(), RunOutcome::Finished(_)));
}

/// Softmax of the run's saved `test_logits.npy`, row by row, in f64.
fn saved_test_probabilities(run_dir: &Path) -> Vec<Vec<f64>> {
    let logits = csam_calib::io::load_matrix(run_dir.join("test_logits.npy"), None).unwrap();
    logits
        .rows()
        .into_iter()
        .map(|row| {
            let max = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let exp: Vec<f64> = row.iter().map(|v| (v - max).exp()).collect();
            let total: f64 = exp.iter().sum();
            exp.iter().map(|e| e / total).collect()
        })
        .collect()
}

#[test]
fn an_ensemble_averages_its_members_probabilities() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let members: Vec<_> = (0..3)
        .map(|seed| dir.path().join(format!("seed{seed}")))
        .collect();
    for (seed, member) in members.iter().enumerate() {
        train_digits(member, seed as u64, 0.0);
    }
    let test = load(&DatasetSpec::Digits).unwrap().test;
    let runs: Vec<TrainedRun> = members
        .iter()
        .map(|m| TrainedRun::open(m).unwrap())
        .collect();
    let predictor = Predictor::new(
        runs.clone(),
        &test,
        "digits",
        Sampling::Deterministic,
        50,
        Device::Cpu,
    )
    .unwrap();
    let probs = predictor.probabilities(&test).unwrap();
    assert_eq!(probs.dim(), (355, 10));
    let saved: Vec<Vec<Vec<f64>>> = members
        .iter()
        .map(|m| saved_test_probabilities(m))
        .collect();
    let mut worst: f64 = 0.0;
    for i in 0..355 {
        for k in 0..10 {
            let mean = saved.iter().map(|p| p[i][k]).sum::<f64>() / 3.0;
            worst = worst.max((probs[[i, k]] - mean).abs());
        }
    }
    // The predictor's batches (50) are not the run's, and libtorch may sum each f32
    // dot (K = 64, 256, 256) in another order: worst case K * 6e-8 of the terms'
    // magnitudes, propagated through the layers, is 4.6e-3 on a logit of a PyTorch
    // replica of this MLP, so <= 2.3e-3 on a probability (softmax moves p by <= half
    // the largest logit shift). Averaging logits, or dropping a member, moves some
    // entry by > 0.2 on the replica.
    assert!(worst < 5e-3, "largest difference {worst}");
    // The members differ (different seeds), so the average is not one of them.
    assert!(saved[0] != saved[1]);

    let mut other_model = runs.clone();
    other_model[2].spec.model.arch = "cnn".parse().unwrap();
    let refused = Predictor::new(
        other_model,
        &test,
        "digits",
        Sampling::Deterministic,
        50,
        Device::Cpu,
    );
    let message = refused.err().unwrap().to_string();
    assert!(
        message.contains("must share data and model") && message.contains("cnn"),
        "{message}"
    );
}

#[test]
fn mc_dropout_without_dropout_is_the_eval_pass_and_batch_norm_stays_in_eval_mode() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    tch::manual_seed(3);
    let vs = VarStore::new(Device::Cpu);
    let input = InputShape {
        channels: 3,
        height: 8,
        width: 8,
    };
    let model = build_model("cnn".parse::<ModelKind>().unwrap(), &vs.root(), input, 4).unwrap();
    let xs = Tensor::randn([6, 3, 8, 8], (Kind::Float, Device::Cpu));
    let ys = Tensor::zeros([6], (Kind::Int64, Device::Cpu));
    let batch = || vec![(xs.shallow_clone(), ys.shallow_clone())];
    let eval = predict(&model, batch(), 4).unwrap();
    let mc = predict_mode(&model, batch(), 4, Mode::McDropout).unwrap();
    assert_eq!(mc.logits, eval.logits);
    // Batch statistics would change the outputs: the comparison above can fail.
    let train = tch::no_grad(|| model.forward_mode(&xs, Mode::Train));
    let eval_out = tch::no_grad(|| model.forward_mode(&xs, Mode::Eval));
    // The same statistics would agree to f32 round-off (dots of <= 576 terms: < 576 *
    // 6e-8 relative), far inside 1e-4; batch against initial running statistics
    // (mean 0, variance 1) on randn input moves outputs by O(0.1).
    assert!(!train.allclose(&eval_out, 1e-4, 1e-4, false));
}

#[test]
fn mc_dropout_is_seeded_differs_from_eval_and_needs_dropout() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (with, without) = (dir.path().join("dropout"), dir.path().join("plain"));
    train_digits(&with, 0, 0.3);
    train_digits(&without, 0, 0.0);
    let test = load(&DatasetSpec::Digits).unwrap().test;
    let open = |p: &Path| vec![TrainedRun::open(p).unwrap()];
    let mc = |seed| {
        let sampling = Sampling::McDropout { passes: 3, seed };
        let predictor =
            Predictor::new(open(&with), &test, "digits", sampling, 64, Device::Cpu).unwrap();
        predictor.probabilities(&test).unwrap()
    };
    let (a, again, other) = (mc(5), mc(5), mc(6));
    assert_eq!(a, again);
    assert_ne!(a, other);
    let plain = Predictor::new(
        open(&with),
        &test,
        "digits",
        Sampling::Deterministic,
        64,
        Device::Cpu,
    )
    .unwrap()
    .probabilities(&test)
    .unwrap();
    assert_ne!(a, plain);
    // f64 softmax rows of 10 averaged over 3 passes: < 40 * 2.2e-16 ~ 9e-15 off 1.
    let row_sums_ok = a.rows().into_iter().all(|r| (r.sum() - 1.0).abs() < 1e-9);
    assert!(row_sums_ok);

    let sampling = Sampling::McDropout { passes: 3, seed: 5 };
    let refused = Predictor::new(open(&without), &test, "digits", sampling, 64, Device::Cpu);
    let message = refused.err().unwrap().to_string();
    assert!(message.contains("trained without dropout"), "{message}");
}
