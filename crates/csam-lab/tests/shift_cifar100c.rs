//! `csam eval --corruptions DIR` on a CIFAR-100-C layout directory with a
//! CIFAR-100 model: Hendrycks & Dietterich's CIFAR-100-C is laid out as
//! CIFAR-10-C (`<corruption>.npy`, `uint8 (5 * N, 32, 32, 3)`, severities 1..5
//! stacked, and `labels.npy`, `uint8 (5 * N,)`) but holds CIFAR-100's fine
//! labels 0..99. A small such directory is written here beside a small
//! CIFAR-100 binary directory; a run trained on the latter is evaluated on
//! the former through `evaluate_run` (all of `csam eval`), and every
//! severity's accuracy must equal the one computed from the run's own
//! probabilities on that severity's images, read as a plain `npy:` source.

use std::path::Path;

use csam_calib::io::npy::write_u8;
use csam_data::{chw_to_hwc, load, DatasetSpec};
use csam_lab::eval::{evaluate_run, EvalRequest};
use csam_lab::shift::predictor::{Predictor, Sampling};
use csam_train::spec::SpecLayers;
use csam_train::train::{RunOutcome, Silent, TrainRequest, TrainedRun};
use tch::Device;

/// Test images per severity.
const N_TEST: usize = 40;
const SEVERITIES: usize = 5;

/// A reproducible byte sequence (a 64-bit LCG's high bytes).
fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed;
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 56) as u8
        })
        .collect()
}

/// CIFAR-100 binary records (coarse, fine, 3072 CHW bytes) of `labels`.
fn cifar100_file(path: &Path, labels: &[u8], seed: u64) {
    let pixels = bytes(seed, labels.len() * 3072);
    let mut file = Vec::new();
    for (i, &fine) in labels.iter().enumerate() {
        file.extend([fine / 5, fine]);
        file.extend_from_slice(&pixels[i * 3072..(i + 1) * 3072]);
    }
    std::fs::write(path, file).unwrap();
}

#[test]
fn cifar100_c_layout_is_evaluated_with_fine_labels() {
    let tmp = tempfile::tempdir().unwrap();
    let (data, corrupted, run_dir) = (
        tmp.path().join("cifar-100"),
        tmp.path().join("cifar-100-c"),
        tmp.path().join("run"),
    );
    std::fs::create_dir_all(&data).unwrap();
    std::fs::create_dir_all(&corrupted).unwrap();
    let train_labels: Vec<u8> = (0..300).map(|i| (i % 100) as u8).collect();
    // Test labels reach 99: a reader assuming CIFAR-10's 10 classes fails.
    let test_labels: Vec<u8> = (0..N_TEST).map(|i| (99 - 2 * i) as u8).collect();
    cifar100_file(&data.join("train.bin"), &train_labels, 1);
    cifar100_file(&data.join("test.bin"), &test_labels, 2);

    let spec = format!("cifar100:{}", data.display());
    let flags: toml::Table = format!(
        "data = {spec:?}\nval_size = 100\nmodel = \"mlp\"\nepochs = 1\nbatch_size = 50\n\
         lr = 0.05\nseed = 0\naugment = false\ndevice = \"cpu\"\nthreads = 1\n"
    )
    .parse()
    .unwrap();
    let (spec_built, runtime) = SpecLayers::new().flags(flags).unwrap().build().unwrap();
    let request = TrainRequest {
        spec: spec_built,
        runtime,
        out: run_dir.clone(),
        resume: false,
        stop_after_epoch: None,
    };
    assert!(matches!(
        csam_train::train::run(&request, &mut Silent).unwrap(),
        RunOutcome::Finished(_)
    ));

    // CIFAR-100-C's layout: one corruption file of 5 severities (different
    // images at each), fine labels repeated 5 times, as uint8; no meta.json.
    let hwc = bytes(3, SEVERITIES * N_TEST * 3072);
    write_u8(
        &corrupted.join("gaussian_noise.npy"),
        &[SEVERITIES * N_TEST, 32, 32, 3],
        &hwc,
    )
    .unwrap();
    let labels: Vec<u8> = (0..SEVERITIES).flat_map(|_| test_labels.clone()).collect();
    write_u8(&corrupted.join("labels.npy"), &[labels.len()], &labels).unwrap();

    let (report, _) = evaluate_run(&EvalRequest {
        runs: vec![run_dir.clone()],
        data: Some(spec.clone()),
        corruptions: Some(corrupted.clone()),
        ood: None,
        mc_dropout: None,
        seed: 0,
        name: None,
        force: false,
        device: Some("cpu".into()),
        batch_size: 64,
        workers: None,
    })
    .unwrap();
    let corruptions = report.corruptions.expect("--corruptions was given");
    assert_eq!(corruptions.corruptions.len(), 1);
    let gaussian = &corruptions.corruptions[0];
    assert_eq!(gaussian.name, "gaussian_noise");
    let levels: Vec<u8> = gaussian.severities.iter().map(|s| s.severity).collect();
    assert_eq!(levels, [1, 2, 3, 4, 5]);

    // The same images read as an npy: source with 100 classes, one severity
    // at a time, through the run's own predictor.
    let all = load(&DatasetSpec::Npy {
        images: corrupted.join("gaussian_noise.npy"),
        labels: corrupted.join("labels.npy"),
        n_classes: Some(100),
    })
    .unwrap()
    .test;
    assert_eq!(chw_to_hwc(&all.images, 3, 32, 32), hwc, "the npy is HWC");
    let reference = load(&spec.parse::<DatasetSpec>().unwrap()).unwrap().test;
    assert_eq!(reference.n_classes, 100);
    let predictor = Predictor::new(
        vec![TrainedRun::open(&run_dir).unwrap()],
        &reference,
        &spec,
        Sampling::Deterministic,
        64,
        Device::Cpu,
    )
    .unwrap();
    for (k, severity) in gaussian.severities.iter().enumerate() {
        let indices: Vec<usize> = (k * N_TEST..(k + 1) * N_TEST).collect();
        let part = all.select(&indices);
        let probs = predictor.probabilities(&part).unwrap();
        assert_eq!(probs.ncols(), 100);
        let correct = probs
            .rows()
            .into_iter()
            .zip(&part.labels)
            .filter(|(row, &label)| {
                let best = row
                    .iter()
                    .enumerate()
                    .max_by(|a, b| a.1.total_cmp(b.1))
                    .map(|(i, _)| i);
                best == Some(label)
            })
            .count();
        assert_eq!(severity.n, N_TEST);
        assert_eq!(
            severity.metrics.accuracy,
            correct as f64 / N_TEST as f64,
            "severity {}",
            severity.severity
        );
    }
}
