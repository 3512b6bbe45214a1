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
//!
//! Random state needs no saving: data order is a pure function of
//! (seed, epoch) and libtorch's generator is re-seeded at the start of every
//! epoch from (seed, epoch), see [`epoch_seed`].

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use tch::{nn::VarStore, Tensor};

use super::atomic::{write_atomic, write_atomic_with};
use super::error::{Result, TrainError};
use super::rundir::RunDir;
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

fn state_path(run: &RunDir) -> PathBuf {
    run.checkpoint_dir().join("state.json")
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

/// Saves the checkpoint after epoch `state.epochs_done` (see the module doc
/// for the order that makes it atomic as a whole). When a write fails (a full
/// disk, say), the new epoch's files already written are removed again: the
/// previous checkpoint stays the whole of `checkpoint/`, and the space is
/// free for the resumed run.
pub fn save(
    run: &RunDir,
    state: &TrainState,
    vs: &VarStore,
    optimizer_state: &[(String, Tensor)],
) -> Result<()> {
    let epoch = state.epochs_done;
    let dir = run.checkpoint_dir();
    std::fs::create_dir_all(&dir).map_err(TrainError::io("create", &dir))?;
    let written = save_files(run, state, vs, optimizer_state);
    if written.is_err() {
        for path in [weights_path(run, epoch), optimizer_path(run, epoch)] {
            // Best effort: the write's own error is the one to report, and
            // state.json does not name these files.
            let _ = std::fs::remove_file(path);
        }
    }
    written?;
    remove_older_epochs(run, epoch)
}

/// The three files of the checkpoint after `state.epochs_done`, state.json last.
fn save_files(
    run: &RunDir,
    state: &TrainState,
    vs: &VarStore,
    optimizer_state: &[(String, Tensor)],
) -> Result<()> {
    let epoch = state.epochs_done;
    save_weights(vs, &weights_path(run, epoch))?;
    write_atomic_with(&optimizer_path(run, epoch), |tmp| {
        Tensor::write_safetensors(optimizer_state, tmp).map_err(TrainError::from)
    })?;
    let json = serde_json::to_vec_pretty(state).map_err(|e| TrainError::Corrupt {
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
        let name = entry.file_name().to_string_lossy().into_owned();
        let epoch = name
            .strip_suffix(".safetensors")
            .and_then(|stem| stem.rsplit_once('-'))
            .and_then(|(_, n)| n.parse::<usize>().ok());
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

/// Restores the checkpoint's weights into `vs` and returns the loop state
/// and the optimizer tensors. None when the run has no checkpoint.
pub fn load(run: &RunDir, vs: &mut VarStore) -> Result<Option<Restored>> {
    let path = state_path(run);
    if !path.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path).map_err(TrainError::io("read", &path))?;
    let state: TrainState = serde_json::from_str(&text).map_err(|e| TrainError::Corrupt {
        path: path.clone(),
        message: e.to_string(),
    })?;
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
            save(&run, &state, &vs, &momentum).unwrap();
        }
        let files = std::fs::read_dir(run.checkpoint_dir()).unwrap().count();
        assert_eq!(files, 3, "only the latest epoch's files are kept");

        let mut fresh = VarStore::new(Device::Cpu);
        let w2 = fresh.root().zeros("w", &[3, 2]);
        let Restored { state, optimizer } = load(&run, &mut fresh).unwrap().unwrap();
        assert_eq!(state.epochs_done, 2);
        assert_eq!(state.global_step, 20);
        assert!(w2.equal(&w));
        assert_eq!(optimizer[0].0, "w.momentum");
        assert!(optimizer[0].1.equal(&momentum[0].1));
    }
}
