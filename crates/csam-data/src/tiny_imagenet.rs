//! Tiny-ImageNet-200 (Stanford CS231N, <http://cs231n.stanford.edu/tiny-imagenet-200.zip>)
//! in the layout of its archive.
//!
//! - `DIR/wnids.txt`: the 200 WordNet ids, one a line; label `k` is the id
//!   on line `k` (the archive's order, not sorted).
//! - `DIR/train/<wnid>/images/*.JPEG`: 500 training images per class, read
//!   class by class in `wnids.txt` order, file-name order within a class
//!   (`<wnid>_boxes.txt` beside `images/` is not read).
//! - `DIR/val/images/*.JPEG` with `DIR/val/val_annotations.txt` (one line
//!   per image, tab-separated: file name, wnid, then the bounding box, not
//!   read): the 10,000 validation images, the test part here, in the order
//!   of the annotations. The archive's `DIR/test` has no labels and is not
//!   read.
//!
//! Every image is 64x64; the few greyscale JPEGs become RGB (the grey value
//! in all three channels). Without `DIR/train` the source is test-only. A
//! wnid that `wnids.txt` does not list, an annotated file that is missing,
//! a validation image without an annotation and an image of another size
//! are errors.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::dataset::hwc_to_chw;
use super::error::{DataError, Result};
use super::folder::{decode_image, is_image_file, sorted_entries};
use super::part::{into_source, Classes, LabelLocation, Part};
use super::DataSource;

/// `(width, height)` of every image.
const IMAGE_SIZE: (usize, usize) = (64, 64);

/// Loads `dir` (see the module doc); the parts are named `<name>/train` and
/// `<name>/test`.
pub(crate) fn load(dir: &Path, name: &str) -> Result<DataSource> {
    let wnids = read_wnids(&dir.join("wnids.txt"))?;
    let train_dir = dir.join("train");
    let train = if train_dir.is_dir() {
        Some(read_train(&train_dir, &wnids)?)
    } else {
        None
    };
    let test = read_val(&dir.join("val"), &wnids)?;
    into_source(name, train, test, Classes::Fixed(wnids.len()))
}

/// The wnids of `wnids.txt` in line order, each once.
fn read_wnids(path: &Path) -> Result<Vec<String>> {
    let text = read_text(
        path,
        "a Tiny-ImageNet directory holds wnids.txt, one class id a line",
    )?;
    let mut wnids: Vec<String> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let wnid = line.trim();
        if wnid.is_empty() {
            continue;
        }
        if wnids.iter().any(|w| w == wnid) {
            return Err(bad_line(path, i, format!("{wnid} is listed twice")));
        }
        wnids.push(wnid.to_string());
    }
    if wnids.is_empty() {
        return Err(DataError::Empty {
            path: path.to_path_buf(),
            hint: "wnids.txt lists no class".into(),
        });
    }
    Ok(wnids)
}

/// `train/<wnid>/images/*` of every wnid, in `wnids` order; a class folder
/// not in `wnids` is an error.
fn read_train(dir: &Path, wnids: &[String]) -> Result<Part> {
    let listed: HashSet<OsString> = wnids.iter().map(OsString::from).collect();
    for folder in sorted_entries(dir, Path::is_dir)? {
        if !folder.file_name().is_some_and(|n| listed.contains(n)) {
            return Err(DataError::Inconsistent {
                name: dir.display().to_string(),
                reason: format!(
                    "class folder {} is not listed in wnids.txt",
                    folder.display()
                ),
            });
        }
    }
    let mut files = Vec::new();
    for (label, wnid) in wnids.iter().enumerate() {
        let images = dir.join(wnid).join("images");
        if !images.is_dir() {
            return Err(DataError::Missing {
                path: images,
                hint: format!(
                    "every class of wnids.txt has its training images in train/{wnid}/images"
                ),
            });
        }
        let class_files = sorted_entries(&images, is_image_file)?;
        if class_files.is_empty() {
            return Err(DataError::Empty {
                path: images,
                hint: "no JPEG in a class's training folder".into(),
            });
        }
        files.extend(class_files.into_iter().map(|path| (path, label)));
    }
    read_images(dir, files)
}

/// `val/images/*` labelled by `val/val_annotations.txt`.
fn read_val(dir: &Path, wnids: &[String]) -> Result<Part> {
    let annotations = dir.join("val_annotations.txt");
    let text = read_text(
        &annotations,
        "a Tiny-ImageNet directory holds val/val_annotations.txt (file, wnid, box, tab-separated)",
    )?;
    let label_of: HashMap<&str, usize> = wnids
        .iter()
        .enumerate()
        .map(|(k, w)| (w.as_str(), k))
        .collect();
    let images = dir.join("images");
    let mut files = Vec::new();
    let mut annotated = HashSet::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut fields = line.split('\t');
        let (Some(file), Some(wnid)) = (fields.next(), fields.next()) else {
            return Err(bad_line(
                &annotations,
                i,
                "expected FILE<tab>WNID<tab>box".into(),
            ));
        };
        let label = *label_of
            .get(wnid)
            .ok_or_else(|| bad_line(&annotations, i, format!("{wnid} is not in wnids.txt")))?;
        if !annotated.insert(file.to_string()) {
            return Err(bad_line(
                &annotations,
                i,
                format!("{file} is annotated twice"),
            ));
        }
        let path = images.join(file);
        if !path.is_file() {
            return Err(DataError::Missing {
                path,
                hint: format!("line {} of {} names it", i + 1, annotations.display()),
            });
        }
        files.push((path, label));
    }
    if let Some(stray) = sorted_entries(&images, is_image_file)?
        .into_iter()
        .find(|p| {
            !p.file_name()
                .is_some_and(|n| annotated.contains(&*n.to_string_lossy()))
        })
    {
        return Err(DataError::Inconsistent {
            name: dir.display().to_string(),
            reason: format!(
                "{} has no line in {}",
                stray.display(),
                annotations.display()
            ),
        });
    }
    if files.is_empty() {
        return Err(DataError::Empty {
            path: annotations,
            hint: "no annotated validation image".into(),
        });
    }
    read_images(dir, files)
}

/// Decodes `(file, label)` pairs into a part of 3x64x64 RGB images.
fn read_images(dir: &Path, files: Vec<(PathBuf, usize)>) -> Result<Part> {
    let (width, height) = IMAGE_SIZE;
    let mut images = Vec::with_capacity(files.len() * 3 * width * height);
    let mut labels = Vec::with_capacity(files.len());
    for (path, label) in files {
        let image = decode_image(&path, IMAGE_SIZE)?;
        images.extend(hwc_to_chw(image.to_rgb8().as_raw(), 3, height, width));
        labels.push(label);
    }
    let count = labels.len();
    Ok(Part {
        images,
        labels,
        shape: (3, height, width),
        // Labels are indices into wnids.txt, in range by construction.
        label_locations: vec![LabelLocation {
            path: dir.to_path_buf(),
            first: 0,
            stride: 0,
            count,
        }],
    })
}

fn read_text(path: &Path, hint: &str) -> Result<String> {
    if !path.is_file() {
        return Err(DataError::Missing {
            path: path.to_path_buf(),
            hint: hint.into(),
        });
    }
    std::fs::read_to_string(path).map_err(|e| DataError::io(path, e))
}

fn bad_line(path: &Path, index: usize, reason: String) -> DataError {
    DataError::BadRecord {
        path: path.to_path_buf(),
        line: index + 1,
        reason,
    }
}
