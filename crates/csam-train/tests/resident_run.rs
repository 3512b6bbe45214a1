//! `resident_data` (the training split kept on the device, batches built
//! there) is a runtime setting: a digits run with it ends with the same
//! weights' bytes as without it, also when a run stopped after epoch 1 with
//! it resumes without it; a streamed source refuses it.
//!
//! libtorch's random generator is process-global, so the runs of this file
//! take a lock and never overlap.

use std::path::Path;
use std::sync::Mutex;

use csam_train::spec::{RunSpec, Runtime, SpecLayers};
use csam_train::train::{RunOutcome, Silent, TrainError, TrainRequest};

static SERIAL: Mutex<()> = Mutex::new(());

/// A two-epoch MLP run of the data `data` names (with digits: crop padding 1
/// and flips on 8x8 images, and a partial last batch).
fn spec(data: &str) -> RunSpec {
    let flags: toml::Table = format!(
        "{data}\nmodel = \"mlp\"\nmlp_hidden = [32]\nepochs = 2\n\
         batch_size = 100\naugment = true\nlr = 0.05\n"
    )
    .parse()
    .unwrap();
    let (spec, _) = SpecLayers::new().flags(flags).unwrap().build().unwrap();
    spec.validate().unwrap();
    spec
}

fn train(
    spec: &RunSpec,
    out: &Path,
    resident_data: bool,
    resume: bool,
    stop: Option<usize>,
) -> Result<RunOutcome, TrainError> {
    let request = TrainRequest {
        spec: spec.clone(),
        runtime: Runtime {
            device: Some("cpu".into()),
            threads: Some(1),
            resident_data,
            ..Runtime::default()
        },
        out: out.to_path_buf(),
        resume,
        stop_after_epoch: stop,
    };
    csam_train::train::run(&request, &mut Silent)
}

fn last_weights(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join("model-last.safetensors")).unwrap()
}

#[test]
fn a_resident_run_ends_with_the_host_runs_bytes_and_resumes_without_it() {
    let _serial = SERIAL.lock().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let spec = spec("data = \"digits\"\nval_size = 300");
    let (host, resident, switched) = (
        dir.path().join("host"),
        dir.path().join("resident"),
        dir.path().join("switched"),
    );
    train(&spec, &host, false, false, None).unwrap();
    train(&spec, &resident, true, false, None).unwrap();
    assert_eq!(
        last_weights(&host),
        last_weights(&resident),
        "resident_data changed the run"
    );
    let runtime = std::fs::read_to_string(resident.join(Runtime::FILE)).unwrap();
    assert!(runtime.contains("resident_data = true"), "{runtime}");
    train(&spec, &switched, true, false, Some(1)).unwrap();
    train(&spec, &switched, false, true, None).unwrap();
    assert_eq!(
        last_weights(&host),
        last_weights(&switched),
        "a resident run resumed on the host differs"
    );
}

#[test]
fn a_streamed_source_refuses_resident_data() {
    let _serial = SERIAL.lock().unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("imagenet/train")).unwrap();
    let data = format!(
        "data = \"imagenet:{}\"",
        dir.path().join("imagenet").display()
    );
    let message = train(&spec(&data), &dir.path().join("run"), true, false, None)
        .expect_err("resident_data with a streamed source")
        .to_string();
    assert!(message.contains("resident_data"), "{message}");
    assert!(!message.contains('\n'), "{message}");
    let without = train(&spec(&data), &dir.path().join("run"), false, false, None)
        .expect_err("an empty imagenet directory")
        .to_string();
    assert!(!without.contains("resident_data"), "{without}");
}
