//! Crash safety of `csam train` through the binary: SIGKILL at random
//! moments and in the middle of a checkpoint write, a disk that fills up
//! mid-run, an unwritable run directory, a diverging run. After every
//! failure each file of the run directory is whole, and `--resume` ends with
//! the weights of an uninterrupted run, bit for bit.

mod support;

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use csam_train::tensorboard;
use csam_train::train::atomic::is_temporary;
use csam_train::train::lock::LOCK_FILE;
use support::{assert_one_line_error, text};

const EPOCHS: &str = "5";

/// The signal number of SIGKILL on Linux.
const SIGKILL: i32 = 9;

/// A small SAM run on the bundled digits: about 0.1 s per epoch on a CPU.
#[rustfmt::skip]
const RUN: &[&str] = &[
    "--data", "digits", "--model", "mlp", "--mlp-hidden", "64", "--val-size", "300", "--augment",
    "--batch-size", "32", "--lr", "0.05", "--optimizer", "sam", "--dropout", "0.1", "--epochs",
    EPOCHS, "--device", "cpu", "--threads", "1", "--quiet",
];

/// `csam train` of RUN into `out`, with `--resume` once the directory
/// exists, and `CSAM_FAULT` set to `fault` when given.
fn train_command(out: &Path, fault: Option<&str>) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_csam"));
    command.args(["train", "--out"]).arg(out).args(RUN);
    if out.exists() {
        command.arg("--resume");
    }
    command.env_remove("CSAM_FAULT");
    if let Some(fault) = fault {
        command.env("CSAM_FAULT", fault);
    }
    command
}

fn train(out: &Path, fault: Option<&str>) -> Output {
    train_command(out, fault)
        .output()
        .expect("the csam binary runs")
}

fn finish(out: &Path) {
    let output = train(out, None);
    assert!(output.status.success(), "{}", text(&output));
}

/// Every file of the run directory and its `checkpoint/`.
fn files(run: &Path) -> Vec<PathBuf> {
    [run.to_path_buf(), run.join("checkpoint")]
        .iter()
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flat_map(|entries| entries.flatten().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect()
}

fn is_temporary_path(path: &Path) -> bool {
    is_temporary(&path.file_name().unwrap().to_string_lossy())
}

/// Parses `path` by its kind; a torn file fails.
fn parse(path: &Path) -> Result<(), String> {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let text = || String::from_utf8(bytes.clone()).map_err(|e| e.to_string());
    if name.starts_with(tensorboard::FILE_PREFIX) {
        // Appended record by record: a last record cut short is the
        // format's "not yet written" (the resumed run drops it), a record
        // that fails its checksum is torn.
        return tensorboard::read_events(&bytes)
            .map(drop)
            .map_err(|e| e.to_string());
    }
    match name.rsplit_once('.').map(|(_, ext)| ext) {
        Some("json") => serde_json::from_slice::<serde_json::Value>(&bytes)
            .map(drop)
            .map_err(|e| e.to_string()),
        Some("jsonl") => text()?
            .lines()
            .try_for_each(|l| serde_json::from_str::<serde_json::Value>(l).map(drop))
            .map_err(|e| e.to_string()),
        Some("toml") => text()?
            .parse::<toml::Table>()
            .map(drop)
            .map_err(|e| e.to_string()),
        Some("safetensors") => tch::Tensor::read_safetensors(path)
            .map(drop)
            .map_err(|e| e.to_string()),
        Some("npy") => csam_calib::io::npy::read(path)
            .map(drop)
            .map_err(|e| e.to_string()),
        _ => Err("a file no run writes".to_string()),
    }
}

/// Asserts that every file the run keeps parses; returns the temporary
/// files a killed writer left (which `--resume` must ignore and remove).
/// The lock file a killed writer leaves is neither: the next run takes it
/// over (see `csam_train::train::lock`).
fn assert_whole(run: &Path, when: &str) -> Vec<PathBuf> {
    let (temporary, kept): (Vec<_>, Vec<_>) = files(run)
        .into_iter()
        .filter(|p| !p.ends_with(LOCK_FILE))
        .partition(|p| is_temporary_path(p));
    for path in kept {
        if let Err(e) = parse(&path) {
            panic!("{when}: {} is torn: {e}", path.display());
        }
    }
    temporary
}

/// Asserts that the finished run `run` ended with the weights of `whole`,
/// that no temporary file is left and that its one event file holds each
/// epoch once.
fn assert_same_weights(whole: &Path, run: &Path, when: &str) {
    let events = tensorboard::event_files(run).unwrap();
    assert_eq!(events.len(), 1, "{when}: {events:?}");
    let read = tensorboard::read_events(&std::fs::read(&events[0]).unwrap()).unwrap();
    let epochs: Vec<i64> = read
        .events
        .iter()
        .filter(|e| e.scalars().iter().any(|s| s.tag == "lr"))
        .map(|e| e.step)
        .collect();
    let all: Vec<i64> = (1..=EPOCHS.parse().unwrap()).collect();
    assert_eq!(epochs, all, "{when}: the epochs of the event file");
    for file in ["model-last.safetensors", "model.safetensors"] {
        let a = std::fs::read(whole.join(file)).unwrap();
        let b = std::fs::read(run.join(file)).unwrap();
        assert!(a == b, "{when}: {file} differs from the uninterrupted run");
    }
    let left: Vec<_> = files(run)
        .into_iter()
        .filter(|p| is_temporary_path(p))
        .collect();
    assert!(
        left.is_empty(),
        "{when}: temporaries left after resume: {left:?}"
    );
}

fn uninterrupted(dir: &Path) -> PathBuf {
    let whole = dir.join("whole");
    finish(&whole);
    whole
}

/// Kill attempts of the random-moment test.
const KILLS: usize = 6;
/// The longest delay after an epoch line (start-up alone takes longer).
const MAX_DELAY: Duration = Duration::from_millis(150);

/// SplitMix64: the test's own seeded random stream.
struct SplitMix(u64);

impl SplitMix {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }
}

/// Kills a run with SIGKILL after a seeded random number of epoch lines and
/// a seeded random delay, then resumes, KILLS times (fewer if a run
/// finishes first), then lets it finish; after every kill no kept file is
/// torn.
#[test]
fn kill_at_random_moments_then_resume_gives_identical_weights() {
    let dir = tempfile::tempdir().unwrap();
    let whole = uninterrupted(dir.path());
    let run = dir.path().join("killed");
    let epochs: u64 = EPOCHS.parse().unwrap();
    let mut random = SplitMix(20_251_126);
    let mut kills = 0;
    for _ in 0..KILLS {
        if run.join("summary.json").exists() {
            break; // a kill after summary.json's rename found the run finished
        }
        let done = std::fs::read(run.join("checkpoint/state.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|state| state["epochs_done"].as_u64())
            .unwrap_or(0);
        let mut child = train_command(&run, None)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Epoch lines to wait for, leaving at least one whole epoch after
        // the one in progress (0: start-up or the first epoch to run), then
        // a delay shorter than the last epoch took, so that the kill lands
        // in the next epoch or its checkpoint however fast the machine is.
        let remaining = epochs - done;
        let lines = random.below(remaining.saturating_sub(1).max(1));
        let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        // The recipe line comes first, before any epoch.
        let _recipe = stdout.next();
        let mut last_line = Instant::now();
        let mut epoch_time = MAX_DELAY;
        let mut reached = true;
        for _ in 0..lines {
            if !matches!(stdout.next(), Some(Ok(_))) {
                reached = false;
                break;
            }
            epoch_time = last_line.elapsed().min(MAX_DELAY);
            last_line = Instant::now();
        }
        if reached {
            let bound = epoch_time.as_micros().max(1) as u64;
            std::thread::sleep(Duration::from_micros(random.below(bound)));
        }
        child.kill().unwrap(); // SIGKILL; an error only if already reaped
        let status = child.wait().unwrap();
        if status.success() {
            break;
        }
        assert_eq!(status.signal(), Some(SIGKILL), "{status:?}");
        kills += 1;
        assert_whole(&run, &format!("after kill {kills}"));
    }
    assert!(kills >= 2, "only {kills} kills landed");
    if !run.join("summary.json").exists() {
        finish(&run);
    }
    assert_same_weights(&whole, &run, "random kills");
}

/// SIGKILL in the middle of each kind of atomic write (temporary file
/// written, not yet renamed): the checkpoint's weights, optimizer state and
/// state.json, the best model, the log, the very first file, and the
/// summary at the end. The temporary file is there, every kept file parses,
/// and the resumed run removes it and ends bit-identical.
#[test]
fn kill_during_each_checkpoint_write_then_resume_gives_identical_weights() {
    let dir = tempfile::tempdir().unwrap();
    let whole = uninterrupted(dir.path());
    let targets = [
        "config.toml",
        "weights-2.safetensors",
        "optimizer-3.safetensors",
        "state.json",
        "model.safetensors",
        "metrics.jsonl",
        "model-last.safetensors",
        "summary.json",
    ];
    for target in targets {
        let run = dir.path().join(format!("kill-{target}"));
        let killed = train(&run, Some(&format!("kill:{target}")));
        assert_eq!(
            killed.status.signal(),
            Some(SIGKILL),
            "{target}: {}",
            text(&killed)
        );
        let temporary = assert_whole(&run, target);
        let name = |p: &PathBuf| p.file_name().unwrap().to_string_lossy().into_owned();
        let stem = target.split('.').next().unwrap();
        assert!(
            temporary
                .iter()
                .any(|p| name(p).starts_with(&format!(".{stem}.tmp-"))),
            "{target}: killed without its temporary file: {temporary:?}"
        );
        if target == "summary.json" {
            assert!(!run.join(target).exists(), "summary.json before its rename");
        }
        finish(&run);
        assert_same_weights(&whole, &run, target);
    }
}

/// A disk that fills up while epoch 2's checkpoint is written: a clear
/// error naming the epoch, epoch 1's checkpoint intact, no temporary file;
/// resuming once there is space ends bit-identical.
#[test]
fn disk_full_mid_run_keeps_the_previous_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let whole = uninterrupted(dir.path());
    let run = dir.path().join("full");
    let failed = train(&run, Some("enospc:weights-2.safetensors"));
    assert_one_line_error(
        &failed,
        &[
            "could not save epoch 2",
            "No space left on device",
            "checkpoint of epoch 1",
            "--resume",
        ],
    );
    let temporary = assert_whole(&run, "disk full");
    assert!(temporary.is_empty(), "{temporary:?}");
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("checkpoint/state.json")).unwrap()).unwrap();
    assert_eq!(state["epochs_done"], 1);
    assert!(!run.join("summary.json").exists());
    finish(&run);
    assert_same_weights(&whole, &run, "disk full");
}

/// A disk full on the second file of a checkpoint: the first (the epoch's
/// weights) is removed again, so `checkpoint/` holds the previous epoch's
/// checkpoint only.
#[test]
fn disk_full_on_the_optimizer_file_leaves_no_orphan_weights() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("full");
    let failed = train(&run, Some("enospc:optimizer-2.safetensors"));
    assert_one_line_error(
        &failed,
        &["could not save epoch 2", "checkpoint of epoch 1"],
    );
    let mut names: Vec<String> = std::fs::read_dir(run.join("checkpoint"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "optimizer-1.safetensors",
            "state.json",
            "weights-1.safetensors"
        ]
    );
}

/// A disk full in the first epoch: the message says in words that there is
/// no checkpoint yet, not "epoch 0".
#[test]
fn disk_full_before_the_first_checkpoint_says_there_is_none() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("full");
    let failed = train(&run, Some("enospc:weights-1.safetensors"));
    let error = assert_one_line_error(
        &failed,
        &[
            "could not save epoch 1",
            "No space left on device",
            "no epoch was checkpointed yet, so the run starts again from epoch 1",
        ],
    );
    assert!(
        !error.contains("epoch 0") && !error.contains("(0:"),
        "{error}"
    );
    assert!(!run.join("checkpoint/state.json").exists());
}

/// A run directory that cannot be created or written is refused before any
/// epoch: below a regular file (any user), in a read-only directory (skipped
/// where the test runs with root's power to write anyway).
#[test]
fn unwritable_run_directory_is_refused_before_training() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "mine").unwrap();
    let refused = |out: &Path, needle: &str| {
        let output = train(out, None);
        assert_one_line_error(&output, &[needle]);
        assert!(
            !String::from_utf8_lossy(&output.stdout).contains("epoch 1/"),
            "{}",
            text(&output)
        );
    };
    refused(&file.join("run"), "notes.txt is not a directory");

    let locked = dir.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    let mut permissions = std::fs::metadata(&locked).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o555);
    std::fs::set_permissions(&locked, permissions).unwrap();
    if std::fs::write(locked.join("probe"), "x").is_ok() {
        eprintln!("skipped the read-only directory case: this user writes through permissions");
    } else {
        refused(&locked.join("run"), "is not writable");
    }
}

/// A huge learning rate after one good epoch: the run stops with a message
/// naming the epoch and step, epoch 1's checkpoint is intact, and resuming
/// it with the original settings ends bit-identical to an uninterrupted run.
#[test]
fn divergence_stops_with_the_epoch_and_a_loadable_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let whole = uninterrupted(dir.path());
    let run = dir.path().join("diverged");
    let mut first = train_command(&run, None);
    let stopped = first.args(["--stop-after-epoch", "1"]).output().unwrap();
    assert!(stopped.status.success(), "{}", text(&stopped));
    // --resume pins the saved settings, and the checkpoint records them (a
    // resume refuses a config.toml that differs from the record), so raise
    // the learning rate in both.
    let config_path = run.join("config.toml");
    let state_path = run.join("checkpoint/state.json");
    let sane = std::fs::read_to_string(&config_path).unwrap();
    let sane_state = std::fs::read(&state_path).unwrap();
    let mut huge: toml::Table = sane.parse().unwrap();
    huge["optim"]
        .as_table_mut()
        .expect("config.toml has an [optim] table")
        .insert("lr".into(), toml::Value::Float(1e30));
    std::fs::write(&config_path, huge.to_string()).unwrap();
    let mut recorded: serde_json::Value = serde_json::from_slice(&sane_state).unwrap();
    recorded["spec"] = huge.to_string().into();
    std::fs::write(&state_path, serde_json::to_vec_pretty(&recorded).unwrap()).unwrap();
    let checkpoint = |name: &str| std::fs::read(run.join("checkpoint").join(name)).unwrap();
    let before = (
        checkpoint("state.json"),
        checkpoint("weights-1.safetensors"),
    );

    let diverged = Command::new(env!("CARGO_BIN_EXE_csam"))
        .args(["train", "--resume", "--quiet", "--out"])
        .arg(&run)
        .output()
        .unwrap();
    assert_one_line_error(
        &diverged,
        &[
            "training diverged at epoch 2, step",
            "checkpoint of epoch 1",
            "--lr",
        ],
    );
    assert_eq!(
        (
            checkpoint("state.json"),
            checkpoint("weights-1.safetensors")
        ),
        before,
        "the last good checkpoint changed"
    );
    assert!(assert_whole(&run, "divergence").is_empty());

    std::fs::write(&config_path, sane).unwrap();
    std::fs::write(&state_path, sane_state).unwrap();
    finish(&run);
    assert_same_weights(&whole, &run, "divergence then resume");
}
