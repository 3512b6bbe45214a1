//! Per-epoch checkpoints: everything `--resume` needs to continue a killed
//! run so that it ends with the same weights, bit for bit, as an
//! uninterrupted one.
//!
//! A checkpoint after epoch N is three files in `checkpoint/`:
//! `weights-N.safetensors` (the VarStore, BatchNorm buffers included),
//! `optimizer-N.safetensors` (momentum / Adam moment buffers), and
//! `state.json` ([`TrainState`]), written last and atomically: it names the
//! epoch whose files are complete, so a kill at any moment leaves a
//! consistent checkpoint. Older epochs' files are deleted afterwards.
//! `state.json` also keeps a [`Record`]: the SHA-256 of the other two files
//! and the run's `config.toml` as written, which `--resume` checks the run
//! directory against before it trusts it (see [`super::integrity`]).
//!
//! Random state needs no saving: data order is a pure function of
//! (seed, epoch) and libtorch's generator is re-seeded at the start of every
//! epoch from (seed, epoch), see [`epoch_seed`].

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use tch::{nn::VarStore, Tensor};

use super::atomic::{write_atomic, write_atomic_with};
use super::error::{Result, TrainError};
use super::integrity::sha256_file;
use super::rundir::RunDir;
use crate::spec::RunSpec;
use csam_nn::model::weights::save_safetensors;

/// The best validation score so far and the epoch (1-based) that reached it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BestRecord {
    /// 1-based epoch.
    pub epoch: usize,
    /// Value of the configured best metric.
    pub value: f64,
}

/// The loop's counters at the end of an epoch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainState {
    /// Number of finished epochs (the next epoch to run is `epochs_done + 1`).
    pub epochs_done: usize,
    /// Optimizer steps taken so far (the schedule's position).
    pub global_step: usize,
    /// Best validation score so far.
    pub best: Option<BestRecord>,
    /// Training wall time so far, in seconds (accumulated across resumes).
    pub elapsed_s: f64,
    /// The data-parallel processes that trained it (1: one process; absent
    /// from the checkpoints of one process). A resume must use as many:
    /// their number sets SAM's m-sharpness and BatchNorm's batches.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub processes: usize,
}

/// What `state.json` keeps besides the counters, for `--resume` to check
/// the run directory against (see [`super::integrity`]). Checkpoints of
/// releases before it have none: both fields are then empty.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The SHA-256 (lowercase hex) of each of the checkpoint's files,
    /// by file name (`weights-N.safetensors`, `optimizer-N.safetensors`),
    /// of the bytes as written.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sha256: BTreeMap<String, String>,
    /// The run's `config.toml` as the run wrote it: the settings the
    /// checkpoint was trained with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<String>,
}

/// The content of `state.json`: the counters and the record, side by side
/// at the top level (so that a release that knows only the counters reads it).
#[derive(Serialize, Deserialize)]
struct StateFile {
    #[serde(flatten)]
    state: TrainState,
    #[serde(flatten)]
    record: Record,
}

fn one() -> usize {
    1
}

fn is_one(processes: &usize) -> bool {
    *processes == 1
}

/// The seed of libtorch's generator for the 1-based `epoch` of a run with
/// `seed` (SplitMix64 of the pair, so neighbouring epochs get unrelated
/// streams). Epoch 0 is the model's initialisation.
pub fn epoch_seed(seed: u64, epoch: usize) -> i64 {
    let mut z = seed ^ (epoch as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    // libtorch takes a signed 64-bit seed; keep it non-negative.
    (z >> 1) as i64
}

/// `checkpoint/state.json`.
pub fn state_path(run: &RunDir) -> PathBuf {
    run.checkpoint_dir().join("state.json")
}

/// The files of the checkpoint after `epoch` besides `state.json`: its
/// weights and its optimizer state.
pub fn files(run: &RunDir, epoch: usize) -> [PathBuf; 2] {
    [weights_path(run, epoch), optimizer_path(run, epoch)]
}

/// The epoch of a checkpoint file's name (`weights-3.safetensors`: 3);
/// None for `state.json` and names no checkpoint writes.
pub fn file_epoch(name: &str) -> Option<usize> {
    name.strip_suffix(".safetensors")
        .and_then(|stem| stem.rsplit_once('-'))
        .and_then(|(_, n)| n.parse::<usize>().ok())
}

fn weights_path(run: &RunDir, epoch: usize) -> PathBuf {
    run.checkpoint_dir()
        .join(format!("weights-{epoch}.safetensors"))
}

fn optimizer_path(run: &RunDir, epoch: usize) -> PathBuf {
    run.checkpoint_dir()
        .join(format!("optimizer-{epoch}.safetensors"))
}

/// True when the run directory holds a complete checkpoint.
pub fn exists(run: &RunDir) -> bool {
    state_path(run).exists()
}

/// Saves the checkpoint after epoch `state.epochs_done` of the run `spec`
/// (see the module doc for the order that makes it atomic as a whole, and
/// for what `state.json` records). When a write fails (a full
/// disk, say), the new epoch's files already written are removed again: the
/// previous checkpoint stays the whole of `checkpoint/`, and the space is
/// free for the resumed run.
pub fn save(
    run: &RunDir,
    state: &TrainState,
    vs: &VarStore,
    optimizer_state: &[(String, Tensor)],
    spec: &RunSpec,
) -> Result<()> {
    let epoch = state.epochs_done;
    let dir = run.checkpoint_dir();
    std::fs::create_dir_all(&dir).map_err(TrainError::io("create", &dir))?;
    let written = save_files(run, state, vs, optimizer_state, spec);
    if written.is_err() {
        for path in files(run, epoch) {
            // Best effort: the write's own error is the one to report, and
            // state.json does not name these files.
            let _ = std::fs::remove_file(path);
        }
    }
    written?;
    remove_older_epochs(run, epoch)
}

/// The three files of the checkpoint after `state.epochs_done`, state.json
/// last, with the SHA-256 of the other two as written.
fn save_files(
    run: &RunDir,
    state: &TrainState,
    vs: &VarStore,
    optimizer_state: &[(String, Tensor)],
    spec: &RunSpec,
) -> Result<()> {
    let [weights, optimizer] = files(run, state.epochs_done);
    save_weights(vs, &weights)?;
    write_atomic_with(&optimizer, |tmp| {
        Tensor::write_safetensors(optimizer_state, tmp).map_err(TrainError::from)
    })?;
    let mut sha256 = BTreeMap::new();
    for path in [&weights, &optimizer] {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        sha256.insert(name.into_owned(), sha256_file(path)?);
    }
    let file = StateFile {
        state: state.clone(),
        record: Record {
            sha256,
            spec: Some(spec.to_toml()),
        },
    };
    let json = serde_json::to_vec_pretty(&file).map_err(|e| TrainError::Corrupt {
        path: state_path(run),
        message: e.to_string(),
    })?;
    write_atomic(&state_path(run), &json)
}

/// Saves a VarStore to `path` atomically (safetensors, names of the
/// PyTorch twin), in the standard layout whatever the model's memory format
/// ([`csam_nn::model::weights::save_safetensors`]).
pub fn save_weights(vs: &VarStore, path: &std::path::Path) -> Result<()> {
    write_atomic_with(path, |tmp| {
        save_safetensors(vs, tmp).map_err(TrainError::from)
    })
}

fn remove_older_epochs(run: &RunDir, keep: usize) -> Result<()> {
    let dir = run.checkpoint_dir();
    let entries = std::fs::read_dir(&dir).map_err(TrainError::io("read directory", &dir))?;
    for entry in entries.flatten() {
        let epoch = file_epoch(&entry.file_name().to_string_lossy());
        if matches!(epoch, Some(e) if e != keep) {
            std::fs::remove_file(entry.path()).map_err(TrainError::io("remove", entry.path()))?;
        }
    }
    Ok(())
}

/// What [`load`] returns besides the weights it loads into the VarStore.
pub struct Restored {
    /// The loop's counters.
    pub state: TrainState,
    /// The optimizer's named state tensors, for `BaseOptimizer::load_state`.
    pub optimizer: Vec<(String, Tensor)>,
}

/// The checkpoint's `state.json`: the loop state and the record kept with
/// it. None when the run has no checkpoint.
pub fn read_state(run: &RunDir) -> Result<Option<(TrainState, Record)>> {
    let path = state_path(run);
    if !path.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path).map_err(TrainError::io("read", &path))?;
    let file: StateFile = serde_json::from_str(&text).map_err(|e| TrainError::Corrupt {
        path: path.clone(),
        message: e.to_string(),
    })?;
    Ok(Some((file.state, file.record)))
}

/// Restores the checkpoint's weights into `vs` and returns the loop state
/// and the optimizer tensors. None when the run has no checkpoint.
pub fn load(run: &RunDir, vs: &mut VarStore) -> Result<Option<Restored>> {
    let Some((state, _)) = read_state(run)? else {
        return Ok(None);
    };
    vs.load(weights_path(run, state.epochs_done))?;
    let optimizer = Tensor::read_safetensors(optimizer_path(run, state.epochs_done))?;
    Ok(Some(Restored { state, optimizer }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind};

    #[test]
    fn epoch_seeds_differ_and_are_non_negative() {
        let seeds: Vec<i64> = (0..100).map(|e| epoch_seed(7, e)).collect();
        let mut unique = seeds.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), seeds.len());
        assert!(seeds.iter().all(|&s| s >= 0));
        assert_ne!(epoch_seed(1, 1), epoch_seed(2, 1));
    }

    fn spec() -> RunSpec {
        RunSpec::new(crate::spec::DataSpec::new(csam_data::DatasetSpec::Digits))
    }

    #[test]
    fn save_then_load_restores_weights_state_and_optimizer() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(dir.path());
        run.create().unwrap();
        let vs = VarStore::new(Device::Cpu);
        let w = vs.root().randn("w", &[3, 2], 0.0, 1.0);
        let momentum = vec![(
            "w.momentum".to_string(),
            Tensor::ones([3, 2], (Kind::Float, Device::Cpu)),
        )];
        for epoch in 1..=2 {
            let state = TrainState {
                epochs_done: epoch,
                global_step: 10 * epoch,
                best: Some(BestRecord {
                    epoch: 1,
                    value: 0.5,
                }),
                elapsed_s: 1.5,
                processes: 1,
            };
            save(&run, &state, &vs, &momentum, &spec()).unwrap();
        }
        let files = std::fs::read_dir(run.checkpoint_dir()).unwrap().count();
        assert_eq!(files, 3, "only the latest epoch's files are kept");
        let (_, record) = read_state(&run).unwrap().unwrap();
        assert_eq!(record.spec, Some(spec().to_toml()));
        let names: Vec<&str> = record.sha256.keys().map(String::as_str).collect();
        assert_eq!(names, ["optimizer-2.safetensors", "weights-2.safetensors"]);
        let weights = run.checkpoint_dir().join("weights-2.safetensors");
        assert_eq!(
            record.sha256["weights-2.safetensors"],
            sha256_file(&weights).unwrap()
        );

        let mut fresh = VarStore::new(Device::Cpu);
        let w2 = fresh.root().zeros("w", &[3, 2]);
        let Restored { state, optimizer } = load(&run, &mut fresh).unwrap().unwrap();
        assert_eq!(state.epochs_done, 2);
        assert_eq!(state.global_step, 20);
        assert!(w2.equal(&w));
        assert_eq!(optimizer[0].0, "w.momentum");
        assert!(optimizer[0].1.equal(&momentum[0].1));
    }

    #[test]
    fn a_state_file_without_a_record_reads_with_an_empty_one() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(dir.path());
        std::fs::create_dir(run.checkpoint_dir()).unwrap();
        // As releases before the record wrote it; the score needs every digit.
        let old = r#"{"epochs_done": 2, "global_step": 40,
            "best": {"epoch": 1, "value": 0.36962365351011683}, "elapsed_s": 1.5}"#;
        std::fs::write(state_path(&run), old).unwrap();
        let (state, record) = read_state(&run).unwrap().unwrap();
        assert_eq!(record, Record::default());
        assert_eq!((state.epochs_done, state.processes), (2, 1));
        assert_eq!(state.best.unwrap().value, 0.369_623_653_510_116_83);
    }
}
