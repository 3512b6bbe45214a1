//! Training on a streamed `imagenet:` folder: the paper's hold-out of 20% of
//! `val/`, weights and logits that do not depend on the number of decoding
//! workers, and a resume that ends bit-identical to an uninterrupted run.

use std::path::Path;

use csam_data::DatasetSpec;
use csam_train::spec::{DataSpec, ModelSpec, RunSpec, Runtime, ValSize};
use csam_train::train::{RunOutcome, RunSummary, Silent, TrainError, TrainRequest};

/// `root/{train,val}/<class>/*.JPEG`: 3 classes, 6 training and 5
/// validation images each, of three sizes, noise with a class-dependent tint.
fn imagenet_tree(root: &Path) {
    for (part, count) in [("train", 6u32), ("val", 5)] {
        for (c, class) in ["n001", "n002", "n003"].iter().enumerate() {
            let dir = root.join(part).join(class);
            std::fs::create_dir_all(&dir).unwrap();
            for k in 0..count {
                let (w, h) = [(120, 90), (90, 120), (100, 100)][k as usize % 3];
                let image = image::RgbImage::from_fn(w, h, |x, y| {
                    let noise = (x * 31 + y * 17 + k * 7) % 64;
                    let mut px = [noise as u8; 3];
                    px[c] += 150;
                    image::Rgb(px)
                });
                image.save(dir.join(format!("{k}.JPEG"))).unwrap();
            }
        }
    }
}

fn spec(root: &Path) -> RunSpec {
    let mut spec = RunSpec::new(DataSpec::new(DatasetSpec::ImageNet(root.to_path_buf())));
    spec.model = ModelSpec {
        arch: "mlp".parse().unwrap(),
        mlp_hidden: Some(vec![16]),
        ..ModelSpec::default()
    }
    .normalized();
    spec.epochs = 2;
    spec.batch_size = 4;
    spec.optim.lr = 0.01;
    spec
}

fn request(spec: RunSpec, out: &Path, workers: usize) -> TrainRequest {
    TrainRequest {
        spec,
        runtime: Runtime {
            device: Some("cpu".into()),
            threads: Some(1),
            workers: Some(workers),
            ..Runtime::default()
        },
        out: out.to_path_buf(),
        resume: false,
        stop_after_epoch: None,
    }
}

fn finished(outcome: RunOutcome) -> RunSummary {
    match outcome {
        RunOutcome::Finished(summary) => *summary,
        other => panic!("the run did not finish: {other:?}"),
    }
}

#[test]
fn streamed_runs_do_not_depend_on_workers_and_resume_bit_identically() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("imagenet");
    imagenet_tree(&root);
    let run = |request: &TrainRequest| csam_train::train::run(request, &mut Silent).unwrap();

    let whole = dir.path().join("whole");
    let summary = finished(run(&request(spec(&root), &whole, 1)));
    assert_eq!(
        (summary.n_train, summary.n_val, summary.n_test),
        (18, 3, 12)
    );

    let split = dir.path().join("split");
    let first = TrainRequest {
        stop_after_epoch: Some(1),
        ..request(spec(&root), &split, 3)
    };
    assert_eq!(run(&first), RunOutcome::Stopped { epoch: 1 });
    let resumed = TrainRequest {
        resume: true,
        ..request(spec(&root), &split, 2)
    };
    finished(run(&resumed));
    for file in [
        "model-last.safetensors",
        "model.safetensors",
        "val_logits.npy",
        "test_logits.npy",
    ] {
        let (a, b) = (
            std::fs::read(whole.join(file)).unwrap(),
            std::fs::read(split.join(file)).unwrap(),
        );
        assert!(
            a == b,
            "{file} differs between 1 worker and 3 then 2 workers with a resume"
        );
    }
}

#[test]
fn a_streamed_source_refuses_a_validation_size() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("imagenet");
    imagenet_tree(&root);
    let mut spec = spec(&root);
    spec.data.val_size = ValSize::Count(5);
    let e = csam_train::train::run(&request(spec, &dir.path().join("run"), 1), &mut Silent)
        .unwrap_err();
    assert!(matches!(e, TrainError::Config(_)), "{e}");
    assert!(e.to_string().contains("20% of val/"), "{e}");
}
