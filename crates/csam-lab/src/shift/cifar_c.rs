//! The CIFAR-10-C directory layout: `DIR/<corruption>.npy` holds the test
//! images corrupted at each severity, stacked in severity order (`uint8`,
//! `(S * N, H, W, C)`), and `DIR/labels.npy` the labels repeated `S` times.
//! Hendrycks & Dietterich's release has `S = 5` and no other file;
//! [`write_corruption_set`] also writes `meta.json` (which severities, seed,
//! source), which [`open_corruption_set`] uses when it is there.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{LabError, LayoutProblem, Result};
use csam_data::corrupt::{Corruption, FrostTextures, Severity, SEVERITIES};
use csam_data::{self as data, chw_to_hwc, Dataset, DatasetSpec};
use csam_train::train::error::{Remedy, TrainError};

/// The labels file of the layout.
pub const LABELS_FILE: &str = "labels.npy";
/// csam's description of a corruption set it wrote.
pub const META_FILE: &str = "meta.json";

/// What `meta.json` records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorruptionSetMeta {
    /// Version of csam that wrote the set.
    pub csam_version: String,
    /// The dataset spec and split the clean images came from.
    pub source: String,
    /// Clean images per severity.
    pub n: usize,
    /// The severities stacked in every file, in order.
    pub severities: Vec<u8>,
    /// The corruptions written.
    pub corruptions: Vec<Corruption>,
    /// Seed of the random draws.
    pub seed: u64,
}

/// One corruption file read back, split by severity.
#[derive(Debug, Clone)]
pub struct CorruptionFile {
    /// The file stem (`gaussian_noise`), any name for files csam did not write.
    pub name: String,
    /// The file.
    pub path: PathBuf,
    /// `(severity level, images at that severity)`, in file order.
    pub severities: Vec<(u8, Dataset)>,
}

/// What to corrupt and how.
#[derive(Debug, Clone)]
pub struct CorruptionPlan {
    /// The corruptions, one file each.
    pub corruptions: Vec<Corruption>,
    /// The severities stacked in every file, in this order.
    pub severities: Vec<Severity>,
    /// Seed of the random draws (see [`Corruption::corrupt_sample`]).
    pub seed: u64,
    /// The frost photographs, which the frost corruption needs and csam does
    /// not bundle ([`FrostTextures::load`]).
    pub frost: Option<FrostTextures>,
}

/// What [`write_corruption_set`] reports while it works, for the caller's
/// progress display (the library itself prints nothing).
pub trait CorruptionObserver {
    /// Image `done` of `total` is corrupted; `corruption` is the file being written.
    fn image(&mut self, corruption: Corruption, done: usize, total: usize) {
        let _ = (corruption, done, total);
    }
}

/// Reports nothing.
impl CorruptionObserver for csam_train::train::Silent {}

/// Writes `dataset` (named `source` in `meta.json`) corrupted as `plan` says
/// into `dir` in the CIFAR-10-C layout, each file atomically. Refuses
/// (before writing anything) when one of the files exists, unless `force`.
/// Reports each image to `observer`. Returns the files written.
pub fn write_corruption_set(
    dir: &Path,
    dataset: &Dataset,
    source: &str,
    plan: &CorruptionPlan,
    force: bool,
    observer: &mut dyn CorruptionObserver,
) -> Result<Vec<PathBuf>> {
    let CorruptionPlan {
        corruptions,
        severities,
        seed,
        frost,
    } = plan;
    let seed = *seed;
    if frost.is_none() && corruptions.iter().any(|c| c.needs_frost_textures()) {
        return Err(LabError::FrostNeedsTextures);
    }
    let targets: Vec<PathBuf> = corruptions
        .iter()
        .map(|c| dir.join(format!("{}.npy", c.name())))
        .chain([dir.join(LABELS_FILE), dir.join(META_FILE)])
        .collect();
    if !force {
        if let Some(existing) = targets.iter().find(|p| p.exists()) {
            return Err(TrainError::refused(
                format!("{} exists", existing.display()),
                Remedy::Replace,
            )
            .into());
        }
    }
    std::fs::create_dir_all(dir).map_err(TrainError::io("create", dir))?;
    let total = corruptions.len() * severities.len() * dataset.n;
    let mut done = 0;
    let shape = [
        severities.len() * dataset.n,
        dataset.height,
        dataset.width,
        dataset.channels,
    ];
    for (corruption, path) in corruptions.iter().zip(&targets) {
        let mut chw = Vec::with_capacity(shape.iter().product());
        for &severity in severities {
            for i in 0..dataset.n {
                chw.extend(corruption.corrupt_sample(
                    dataset,
                    i,
                    severity,
                    seed,
                    frost.as_ref(),
                )?);
                done += 1;
                observer.image(*corruption, done, total);
            }
        }
        let hwc = chw_to_hwc(&chw, dataset.channels, dataset.height, dataset.width);
        write_npy_u8(path, &shape, &hwc)?;
    }
    let labels: Vec<i64> = severities
        .iter()
        .flat_map(|_| dataset.labels.iter().map(|&y| y as i64))
        .collect();
    let labels_path = dir.join(LABELS_FILE);
    csam_calib::io::npy::write_i64(&labels_path, &labels)?;
    let meta = CorruptionSetMeta {
        csam_version: env!("CARGO_PKG_VERSION").to_string(),
        source: source.to_string(),
        n: dataset.n,
        severities: severities.iter().map(|s| s.level()).collect(),
        corruptions: corruptions.clone(),
        seed,
    };
    let meta_path = dir.join(META_FILE);
    let json = serde_json::to_vec_pretty(&meta).map_err(|e| TrainError::Corrupt {
        path: meta_path.clone(),
        message: e.to_string(),
    })?;
    csam_calib::io::write_atomically(&meta_path, &json)?;
    Ok(targets)
}

fn write_npy_u8(path: &Path, shape: &[usize], data: &[u8]) -> Result<()> {
    Ok(csam_calib::io::npy::write_u8(path, shape, data)?)
}

/// A CIFAR-10-C layout directory, opened: its corruption files are read
/// one at a time by [`CorruptionSet::load`] (the real CIFAR-10-C holds 19
/// files of 150 MB).
#[derive(Debug, Clone)]
pub struct CorruptionSet {
    /// Every `<name>.npy` but `labels.npy`, sorted by name.
    pub files: Vec<PathBuf>,
    /// The severities stacked in each file: those of `meta.json` when csam
    /// wrote the set, 1..5 otherwise.
    pub severities: Vec<u8>,
    labels: PathBuf,
}

/// Lists the corruption files of the CIFAR-10-C layout directory `dir`.
pub fn open_corruption_set(dir: &Path) -> Result<CorruptionSet> {
    let labels = dir.join(LABELS_FILE);
    if !labels.is_file() {
        return Err(LabError::layout(labels, LayoutProblem::NoLabels));
    }
    let severities = read_severities(dir)?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(TrainError::io("list", dir))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|e| e == "npy") && p.file_name() != Some(LABELS_FILE.as_ref())
        })
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(LabError::layout(dir, LayoutProblem::NoCorruptionFiles));
    }
    Ok(CorruptionSet {
        files,
        severities,
        labels,
    })
}

fn read_severities(dir: &Path) -> Result<Vec<u8>> {
    let meta_path = dir.join(META_FILE);
    if !meta_path.exists() {
        return Ok(SEVERITIES.iter().map(|s| s.level()).collect());
    }
    let text = std::fs::read_to_string(&meta_path).map_err(TrainError::io("read", &meta_path))?;
    let meta: CorruptionSetMeta = serde_json::from_str(&text).map_err(|e| TrainError::Corrupt {
        path: meta_path.clone(),
        message: e.to_string(),
    })?;
    if meta.severities.is_empty() {
        return Err(TrainError::Corrupt {
            path: meta_path,
            message: "no severities listed".into(),
        }
        .into());
    }
    Ok(meta.severities)
}

impl CorruptionSet {
    /// Reads one of [`CorruptionSet::files`] with `n_classes` classes,
    /// split by severity.
    pub fn load(&self, path: &Path, n_classes: usize) -> Result<CorruptionFile> {
        let severities = &self.severities;
        let (path, labels) = (path.to_path_buf(), self.labels.as_path());
        let spec = DatasetSpec::Npy {
            images: path.clone(),
            labels: labels.to_path_buf(),
            n_classes: Some(n_classes),
        };
        let all = data::load(&spec)?.test;
        if all.n % severities.len() != 0 {
            return Err(LabError::layout(
                path,
                LayoutProblem::UnevenSeverities {
                    images: all.n,
                    severities: severities.len(),
                },
            ));
        }
        let per = all.n / severities.len();
        let name = path
            .file_stem()
            .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
        let severities = severities
            .iter()
            .enumerate()
            .map(|(k, &level)| {
                let indices: Vec<usize> = (k * per..(k + 1) * per).collect();
                let named = format!("{} (severity {level})", path.display());
                (level, all.select(&indices).renamed(named))
            })
            .collect();
        Ok(CorruptionFile {
            name,
            path,
            severities,
        })
    }
}
