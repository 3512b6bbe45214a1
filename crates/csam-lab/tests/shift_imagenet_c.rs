//! `csam eval` of a run trained on a streamed `imagenet:` folder: its test
//! part (80% of `val/`), and an ImageNet-C layout directory evaluated on the
//! test part only, the validation images the run held out removed from every
//! severity folder. A severity folder that is an unchanged copy of `val/`
//! must give exactly the clean metrics; a darkened one must not.

use std::path::Path;

use csam_data::DatasetSpec;
use csam_lab::eval::{evaluate_run, EvalRequest};
use csam_train::spec::{DataSpec, ModelSpec, RunSpec, Runtime};
use csam_train::train::{RunOutcome, Silent, TrainRequest};

const CLASSES: [&str; 3] = ["n001", "n002", "n003"];

/// An image of class `c`: noise with a class-dependent tint, darkened by
/// `dim` (1: unchanged).
fn image(c: usize, k: u32, dim: u32) -> image::RgbImage {
    let (w, h) = [(120, 90), (90, 120), (100, 100)][k as usize % 3];
    image::RgbImage::from_fn(w, h, |x, y| {
        let noise = ((x * 31 + y * 17 + k * 7) % 64) as u8;
        let mut px = [noise; 3];
        px[c] += 150;
        image::Rgb(px.map(|v| (u32::from(v) / dim) as u8))
    })
}

/// `root/<class>/<k>.JPEG` for `count` images per class.
fn class_folders(root: &Path, count: u32, dim: u32) {
    for (c, class) in CLASSES.iter().enumerate() {
        let dir = root.join(class);
        std::fs::create_dir_all(&dir).unwrap();
        for k in 0..count {
            image(c, k, dim)
                .save(dir.join(format!("{k}.JPEG")))
                .unwrap();
        }
    }
}

#[test]
fn imagenet_c_is_evaluated_on_the_test_part_only() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("imagenet");
    class_folders(&data.join("train"), 6, 1);
    class_folders(&data.join("val"), 10, 1);
    let corrupted = dir.path().join("imagenet-c");
    class_folders(&corrupted.join("copy/1"), 10, 1);
    class_folders(&corrupted.join("copy/3"), 10, 1);
    class_folders(&corrupted.join("dark/1"), 10, 2);
    class_folders(&corrupted.join("dark/3"), 10, 4);

    let mut spec = RunSpec::new(DataSpec::new(DatasetSpec::ImageNet(data.clone())));
    spec.model = ModelSpec {
        arch: "mlp".parse().unwrap(),
        mlp_hidden: Some(vec![16]),
        ..ModelSpec::default()
    }
    .normalized();
    spec.epochs = 2;
    spec.batch_size = 4;
    spec.seed = 3;
    let run = dir.path().join("run");
    let request = TrainRequest {
        spec,
        runtime: Runtime {
            device: Some("cpu".into()),
            threads: Some(1),
            workers: Some(2),
            ..Runtime::default()
        },
        out: run.clone(),
        resume: false,
        stop_after_epoch: None,
    };
    let outcome = csam_train::train::run(&request, &mut Silent).unwrap();
    let RunOutcome::Finished(summary) = outcome else {
        panic!("{outcome:?}");
    };

    let (report, _) = evaluate_run(&EvalRequest {
        runs: vec![run],
        data: None,
        corruptions: Some(corrupted.clone()),
        ood: None,
        mc_dropout: None,
        seed: 0,
        name: None,
        force: false,
        device: Some("cpu".into()),
        batch_size: 5,
        workers: Some(3),
    })
    .unwrap();
    // 30 validation images: 6 held out, 24 tested, as in training.
    assert_eq!((report.n, summary.n_test), (24, 24));
    assert_eq!(report.metrics.accuracy, summary.test.accuracy);
    assert_eq!(report.metrics.ece, summary.test.ece);

    let c = report.corruptions.expect("--corruptions was given");
    assert_eq!(
        c.corruptions
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>(),
        ["copy", "dark"]
    );
    for result in &c.corruptions {
        let levels: Vec<(u8, usize)> = result
            .severities
            .iter()
            .map(|s| (s.severity, s.n))
            .collect();
        assert_eq!(levels, [(1, 24), (3, 24)], "{}", result.name);
    }
    for copy in &c.corruptions[0].severities {
        assert_eq!(copy.metrics.accuracy, report.metrics.accuracy);
        assert_eq!(copy.metrics.ece, report.metrics.ece);
        assert_eq!(copy.metrics.nll, report.metrics.nll);
    }
    let darkest = &c.corruptions[1].severities[1].metrics;
    assert_ne!(
        darkest.nll, report.metrics.nll,
        "darkened images are other inputs"
    );

    // A corruption folder without severity folders is refused, naming the
    // layout it needs.
    let broken = dir.path().join("broken");
    std::fs::create_dir_all(broken.join("fog")).unwrap();
    let e = evaluate_run(&EvalRequest {
        runs: vec![dir.path().join("run")],
        data: None,
        corruptions: Some(broken),
        ood: None,
        mc_dropout: None,
        seed: 0,
        name: Some("broken".into()),
        force: false,
        device: Some("cpu".into()),
        batch_size: 5,
        workers: Some(1),
    })
    .unwrap_err();
    assert!(e.to_string().contains("severity folders"), "{e}");
}
