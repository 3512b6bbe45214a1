//! `csam train --resume` checks the run directory against its checkpoint
//! before it continues: a `metrics.jsonl` emptied, deleted, with a repeated
//! line or an edited epoch number, a `config.toml` with another learning
//! rate or fewer epochs than done, a checkpoint file with a flipped byte or
//! gone, a `state.json` deleted after two epochs: each is refused with one
//! error line that names the file, and the directory is left byte for byte
//! as it was. An untouched, reformatted or pre-record checkpoint resumes.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use support::{assert_one_line_error, copy_run, csam, flip_last_byte, text, DIGITS_MLP};

/// Trains the small digits run into `dir/name` for `epochs` epochs and
/// stops it (as if killed) after epoch `stop`.
fn stopped_run(dir: &Path, name: &str, epochs: &str, stop: &str) -> PathBuf {
    let out = dir.join(name);
    let mut args = vec!["train", "--out", out.to_str().unwrap()];
    args.extend_from_slice(DIGITS_MLP);
    args.extend_from_slice(&["--epochs", epochs, "--stop-after-epoch", stop]);
    let stopped = csam(&args);
    assert!(stopped.status.success(), "{}", text(&stopped));
    out
}

/// Every file of the run directory and of its `checkpoint/`, by path.
fn snapshot(run: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    [run.to_path_buf(), run.join("checkpoint")]
        .iter()
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flat_map(|entries| entries.flatten().map(|e| e.path()))
        .filter(|path| path.is_file())
        .map(|path| {
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect()
}

/// `csam train --out RUN --resume`: the settings come from its config.toml.
fn resume(run: &Path) -> Output {
    csam(&[
        "train",
        "--out",
        run.to_str().unwrap(),
        "--resume",
        "--quiet",
    ])
}

fn rewrite(path: &Path, change: impl FnOnce(String) -> String) {
    let text = std::fs::read_to_string(path).unwrap();
    let changed = change(text.clone());
    assert_ne!(changed, text, "{} unchanged", path.display());
    std::fs::write(path, changed).unwrap();
}

fn remove(path: &Path) {
    std::fs::remove_file(path).unwrap();
}

/// One way of damaging a run stopped after epoch 2 of 3, and the words its
/// refusal must hold.
struct Tampering {
    name: &'static str,
    damage: fn(&Path),
    needles: &'static [&'static str],
}

const TAMPERINGS: &[Tampering] = &[
    Tampering {
        name: "log-emptied",
        damage: |run| std::fs::write(run.join("metrics.jsonl"), "").unwrap(),
        needles: &["metrics.jsonl logs no epoch, though the checkpoint has 2 epochs done"],
    },
    Tampering {
        name: "log-deleted",
        damage: |run| remove(&run.join("metrics.jsonl")),
        needles: &["metrics.jsonl is missing, though the checkpoint has 2 epochs done"],
    },
    Tampering {
        name: "log-last-line-repeated",
        damage: |run| {
            rewrite(&run.join("metrics.jsonl"), |text| {
                let last = text.lines().last().unwrap().to_string();
                format!("{text}{last}\n")
            })
        },
        needles: &["metrics.jsonl has epoch 2 on line 3, where epoch 3 belongs"],
    },
    Tampering {
        name: "log-epoch-edited",
        damage: |run| {
            rewrite(&run.join("metrics.jsonl"), |text| {
                text.replacen("{\"epoch\":2,", "{\"epoch\":5,", 1)
            })
        },
        needles: &["metrics.jsonl has epoch 5 on line 2, where epoch 2 belongs"],
    },
    Tampering {
        name: "config-lr",
        damage: |run| {
            rewrite(&run.join("config.toml"), |text| {
                text.replacen("\nlr = 0.05\n", "\nlr = 0.1\n", 1)
            })
        },
        needles: &[
            "config.toml was changed after the checkpoint of epoch 2 was written (lr 0.05 -> \
             0.1); a resumed run continues with the settings it started with",
        ],
    },
    Tampering {
        name: "config-fewer-epochs",
        damage: |run| {
            rewrite(&run.join("config.toml"), |text| {
                text.replacen("\nepochs = 3\n", "\nepochs = 1\n", 1)
            })
        },
        needles: &["config.toml sets epochs = 1, fewer than the 2 epochs the checkpoint has done"],
    },
    Tampering {
        name: "weights-flipped",
        damage: |run| flip_last_byte(&run.join("checkpoint/weights-2.safetensors")),
        needles: &[
            "checkpoint/weights-2.safetensors is not the file the run wrote (its SHA-256 differs",
        ],
    },
    Tampering {
        name: "optimizer-flipped",
        damage: |run| flip_last_byte(&run.join("checkpoint/optimizer-2.safetensors")),
        needles: &["checkpoint/optimizer-2.safetensors is not the file the run wrote"],
    },
    Tampering {
        name: "weights-deleted",
        damage: |run| remove(&run.join("checkpoint/weights-2.safetensors")),
        needles: &[
            "checkpoint/weights-2.safetensors is missing, though the checkpoint has 2 epochs done",
        ],
    },
    Tampering {
        name: "state-deleted",
        damage: |run| remove(&run.join("checkpoint/state.json")),
        needles: &[
            "checkpoint/state.json is missing, though metrics.jsonl logs 2 epochs: the \
             checkpoint was removed",
            "choose another directory, or delete this one",
        ],
    },
];

#[test]
fn each_tampering_is_refused_in_one_line_naming_the_file_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let stopped = stopped_run(dir.path(), "stopped", "3", "2");
    for tampering in TAMPERINGS {
        let run = dir.path().join(tampering.name);
        copy_run(&stopped, &run);
        (tampering.damage)(&run);
        let before = snapshot(&run);
        let refused = resume(&run);
        let error = assert_one_line_error(&refused, tampering.needles);
        assert!(
            error.starts_with(&format!(
                "error: training into {}: refusing to resume: {}",
                run.display(),
                run.display()
            )) && error.trim_end().ends_with("; nothing was changed"),
            "{}: {error}",
            tampering.name
        );
        assert!(
            before == snapshot(&run),
            "{}: the refusal changed the run directory",
            tampering.name
        );
    }
}

#[test]
fn an_untouched_reformatted_or_unrecorded_checkpoint_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let stopped = stopped_run(dir.path(), "stopped", "3", "2");
    let state = |run: &Path| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(run.join("checkpoint/state.json")).unwrap()).unwrap()
    };
    assert!(state(&stopped)["sha256"]["weights-2.safetensors"].is_string());
    assert!(state(&stopped)["spec"].is_string());

    // A comment and blank lines change config.toml's bytes, not its settings.
    let reformatted = dir.path().join("reformatted");
    copy_run(&stopped, &reformatted);
    rewrite(&reformatted.join("config.toml"), |text| {
        format!("# my note\n\n{text}")
    });
    // A checkpoint as releases before the record wrote it.
    let unrecorded = dir.path().join("unrecorded");
    copy_run(&stopped, &unrecorded);
    let mut old = state(&stopped);
    let fields = old.as_object_mut().unwrap();
    fields.remove("sha256");
    fields.remove("spec");
    std::fs::write(
        unrecorded.join("checkpoint/state.json"),
        serde_json::to_vec_pretty(&old).unwrap(),
    )
    .unwrap();
    for run in [&stopped, &reformatted, &unrecorded] {
        let resumed = resume(run);
        assert!(resumed.status.success(), "{}", text(&resumed));
        let stdout = String::from_utf8_lossy(&resumed.stdout);
        assert!(
            stdout.contains("epoch 3/3") && !stdout.contains("epoch 2/3"),
            "{}",
            text(&resumed)
        );
        let stderr = String::from_utf8_lossy(&resumed.stderr);
        let warned = stderr.contains(&format!(
            "warning: the checkpoint in {} was written by an earlier csam, which recorded \
             neither the SHA-256 of its files nor the settings it was trained with: resuming \
             without checking them",
            run.display()
        ));
        assert_eq!(warned, *run == unrecorded, "{}", text(&resumed));
        assert!(run.join("summary.json").is_file());
        // The last checkpoint keeps the record, also for the old one.
        assert!(state(run)["sha256"]["weights-3.safetensors"].is_string());
    }
}

#[test]
fn a_first_epoch_without_its_checkpoint_is_trained_again_and_said_so() {
    let dir = tempfile::tempdir().unwrap();
    let run = stopped_run(dir.path(), "run", "2", "1");
    remove(&run.join("checkpoint/state.json"));
    let resumed = resume(&run);
    assert!(resumed.status.success(), "{}", text(&resumed));
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    let expected = format!(
        "warning: nothing to resume in {} (its run trained its first epoch but has no \
         checkpoint of it: checkpoint/state.json is missing); starting a new run from epoch 1",
        run.display()
    );
    assert!(stderr.contains(&expected), "{}", text(&resumed));
    assert!(!stderr.contains("stopped before finishing an epoch"));
    let stdout = String::from_utf8_lossy(&resumed.stdout);
    assert!(stdout.contains("epoch 1/2"), "{}", text(&resumed));
    assert!(run.join("summary.json").is_file());
}
