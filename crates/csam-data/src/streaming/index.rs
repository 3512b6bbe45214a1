//! The files of a streamed image-folder data set: paths and labels only, so
//! that listing ImageNet's 1.28 million training images costs tens of
//! megabytes, not the ~140 GB their decoded pixels would.
//!
//! Layout of `imagenet:DIR`: `DIR/train/<class>/*` and `DIR/val/<class>/*`
//! (PNG or JPEG), class folders named alike in both (the WordNet ids
//! `n01440764`, ... for ImageNet-1K); classes sorted by folder name, label
//! `k` for the `k`-th, files in name order, hidden entries skipped, as for
//! `folder:` sources.
//!
//! The paper's ImageNet protocol holds out 20% of the official validation
//! set, stratified by class and drawn from a seed, for early stopping and
//! temperature scaling; the other 80% is the test set
//! ([`ImageFiles::hold_out`]). [`ImageFiles::without`] removes the held-out
//! images from an ImageNet-C directory of the same file names.

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::error::{DataError, Result};
use crate::folder::{class_dirs, image_files};
use crate::rng::{stream, Purpose};
use crate::split::stratified_mask;

/// Image files with their labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageFiles {
    /// `<spec>/train`, `<spec>/val`, ...: named in errors and results.
    pub name: String,
    pub files: Vec<PathBuf>,
    pub labels: Vec<usize>,
    /// The class folder names; label `k` is `classes[k]`.
    pub classes: Vec<String>,
}

/// The share of the official validation set held out for validation.
pub const IMAGENET_HELD_OUT_FRACTION: f64 = 0.2;

impl ImageFiles {
    /// Lists `dir/<class>/*` for the given classes (label = position), or
    /// for every class folder of `dir` when `classes` is `None`.
    pub fn list(dir: &Path, name: &str, classes: Option<&[String]>) -> Result<ImageFiles> {
        let classes: Vec<String> = match classes {
            Some(classes) => classes.to_vec(),
            None => class_dirs(dir)?
                .iter()
                .filter_map(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
                .collect(),
        };
        let mut files = Vec::new();
        let mut labels = Vec::new();
        for (label, class) in classes.iter().enumerate() {
            let class_dir = dir.join(class);
            if !class_dir.is_dir() {
                return Err(DataError::Missing {
                    path: class_dir,
                    hint: format!(
                        "every class folder of the training part must be here too ({name})"
                    ),
                });
            }
            for path in image_files(&class_dir)? {
                files.push(path);
                labels.push(label);
            }
        }
        if files.is_empty() {
            return Err(DataError::Empty {
                path: dir.to_path_buf(),
                hint: "no png/jpg/jpeg files in the class folders".into(),
            });
        }
        Ok(ImageFiles {
            name: name.to_string(),
            files,
            labels,
            classes,
        })
    }

    /// Number of images.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Number of classes.
    pub fn n_classes(&self) -> usize {
        self.classes.len()
    }

    /// The first `n` images (all of them when there are fewer).
    pub fn first(&self, n: usize) -> ImageFiles {
        let indices: Vec<usize> = (0..n.min(self.len())).collect();
        self.select(&indices, self.name.clone())
    }

    /// The images at `indices`, in that order, named `name`.
    fn select(&self, indices: &[usize], name: String) -> ImageFiles {
        ImageFiles {
            name,
            files: indices.iter().map(|&i| self.files[i].clone()).collect(),
            labels: indices.iter().map(|&i| self.labels[i]).collect(),
            classes: self.classes.clone(),
        }
    }

    /// Splits off `round(fraction * n)` images (at least 1, fewer than
    /// `n`), stratified by class and drawn from `seed`: `(held_out, rest)`,
    /// both in file order, named `<base>/val` and `<base>/test`.
    pub fn hold_out(
        &self,
        fraction: f64,
        seed: u64,
        base: &str,
    ) -> Result<(ImageFiles, ImageFiles)> {
        let n = self.len();
        let size = ((fraction * n as f64).round() as usize).max(1);
        if !(fraction > 0.0 && fraction < 1.0) || size >= n {
            return Err(DataError::Invalid(format!(
                "{}: cannot hold out {fraction} of {n} images and keep a test part",
                self.name
            )));
        }
        let mut rng = stream(seed, Purpose::Split, 0);
        let mask = stratified_mask(&self.labels, self.n_classes(), size, &mut rng);
        let (held, rest): (Vec<usize>, Vec<usize>) = (0..n).partition(|&i| mask[i]);
        Ok((
            self.select(&held, format!("{base}/val")),
            self.select(&rest, format!("{base}/test")),
        ))
    }

    /// These files less those whose `(class folder, file name)` is in
    /// `excluded`: an ImageNet-C severity folder less the validation images
    /// a run held out (ImageNet-C keeps the validation set's file names).
    pub fn without(&self, excluded: &ImageFiles) -> ImageFiles {
        let key = |path: &Path, label: usize, classes: &[String]| -> (String, OsString) {
            (
                classes[label].clone(),
                path.file_name().map(OsString::from).unwrap_or_default(),
            )
        };
        let drop: HashSet<(String, OsString)> = excluded
            .files
            .iter()
            .zip(&excluded.labels)
            .map(|(p, &l)| key(p, l, &excluded.classes))
            .collect();
        let kept: Vec<usize> = (0..self.len())
            .filter(|&i| !drop.contains(&key(&self.files[i], self.labels[i], &self.classes)))
            .collect();
        self.select(&kept, self.name.clone())
    }
}

/// The parts of an `imagenet:DIR` data set under the paper's protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageNetSplits {
    pub train: ImageFiles,
    /// [`IMAGENET_HELD_OUT_FRACTION`] of `DIR/val`, seeded.
    pub val: ImageFiles,
    /// The rest of `DIR/val`.
    pub test: ImageFiles,
}

impl ImageNetSplits {
    /// Lists `dir/train` and `dir/val` (same class folders) and holds out
    /// the validation part with `split_seed`; parts named `<name>/train`,
    /// `<name>/val`, `<name>/test`.
    pub fn open(dir: &Path, name: &str, split_seed: u64) -> Result<ImageNetSplits> {
        let (train_dir, val_dir) = (dir.join("train"), dir.join("val"));
        for part in [&train_dir, &val_dir] {
            if !part.is_dir() {
                return Err(DataError::Missing {
                    path: part.clone(),
                    hint: "an imagenet: data set has train/<class>/ and val/<class>/ folders \
                           (the official validation images sorted into class folders)"
                        .into(),
                });
            }
        }
        let train = ImageFiles::list(&train_dir, &format!("{name}/train"), None)?;
        let official_val =
            ImageFiles::list(&val_dir, &format!("{name}/val"), Some(&train.classes))?;
        let extra = class_dirs(&val_dir)?.len();
        if extra != train.n_classes() {
            return Err(DataError::Inconsistent {
                name: name.to_string(),
                reason: format!(
                    "val/ has {extra} class folders, train/ has {}",
                    train.n_classes()
                ),
            });
        }
        let (val, test) = official_val.hold_out(IMAGENET_HELD_OUT_FRACTION, split_seed, name)?;
        Ok(ImageNetSplits { train, val, test })
    }
}
