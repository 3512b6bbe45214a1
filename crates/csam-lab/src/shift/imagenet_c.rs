//! ImageNet-C's directory layout (Hendrycks & Dietterich 2019):
//! `DIR/<corruption>/<severity>/<class>/<file>`, severities `1` to `5`, the
//! class folders and file names those of the ImageNet validation set it was
//! made from.
//!
//! The paper's protocol evaluates ImageNet-C on the test part only: the
//! validation images a run held out for early stopping and temperature
//! scaling (20% of `val/`, [`csam_data::streaming::ImageNetSplits`]) are
//! removed from every severity folder by class and file name.

use std::path::{Path, PathBuf};

use crate::error::{LabError, LayoutProblem, Result};
use csam_data::streaming::ImageFiles;
use csam_train::train::error::TrainError;

/// One corruption's severity folders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageNetCCorruption {
    /// The folder name (`gaussian_noise`).
    pub name: String,
    /// `(level, folder)`, by level.
    pub severities: Vec<(u8, PathBuf)>,
}

/// Whether `dir` is laid out as ImageNet-C rather than CIFAR-10-C: it has
/// no `labels.npy` and a sub-folder holding severity folders.
pub fn is_imagenet_c(dir: &Path) -> bool {
    !dir.join(super::cifar_c::LABELS_FILE).exists()
        && sub_dirs(dir)
            .ok()
            .and_then(|corruptions| corruptions.into_iter().next())
            .is_some_and(|first| first.join("1").is_dir() || first.join("5").is_dir())
}

/// The corruptions of the ImageNet-C layout directory `dir`, sorted by name;
/// every corruption must have the same severity folders (among `1` to `5`).
pub fn open_imagenet_c(dir: &Path) -> Result<Vec<ImageNetCCorruption>> {
    let mut corruptions = Vec::new();
    for folder in sub_dirs(dir)? {
        let name = folder
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let severities: Vec<(u8, PathBuf)> = (1..=5u8)
            .map(|level| (level, folder.join(level.to_string())))
            .filter(|(_, path)| path.is_dir())
            .collect();
        if severities.is_empty() {
            return Err(LabError::layout(folder, LayoutProblem::NoSeverityFolders));
        }
        corruptions.push(ImageNetCCorruption { name, severities });
    }
    let Some(first) = corruptions.first() else {
        return Err(LabError::layout(dir, LayoutProblem::NoCorruptionFolders));
    };
    let levels = |c: &ImageNetCCorruption| c.severities.iter().map(|s| s.0).collect::<Vec<_>>();
    let expected = levels(first);
    if let Some(other) = corruptions.iter().find(|c| levels(c) != expected) {
        return Err(LabError::layout(
            dir,
            LayoutProblem::OtherSeverities {
                name: other.name.clone(),
                levels: levels(other),
                first_name: first.name.clone(),
                first_levels: expected,
            },
        ));
    }
    Ok(corruptions)
}

/// The images of one severity folder with the run's `classes` (label =
/// position), less `held_out` (see the module doc).
pub fn severity_files(
    folder: &Path,
    name: &str,
    classes: &[String],
    held_out: Option<&ImageFiles>,
) -> Result<ImageFiles> {
    let files = ImageFiles::list(folder, name, Some(classes))?;
    Ok(match held_out {
        Some(held_out) => files.without(held_out),
        None => files,
    })
}

/// The sub-folders of `dir` (hidden ones skipped), sorted by name.
fn sub_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(TrainError::io("list", dir))?;
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_dir()
                && !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    dirs.sort();
    Ok(dirs)
}
