//! Image folders: `DIR/<class name>/*.{png,jpg,jpeg}`.
//!
//! Conventions:
//! - Classes are the sub-directories, sorted by name (byte order of the
//!   name); label `k` is the `k`-th name. Hidden entries (`.name`) and
//!   files with other extensions are skipped. Images within a class are
//!   read in file-name order.
//! - If `DIR/train` is a directory, the source is `DIR/train` (training)
//!   plus `DIR/test` (required, same class names). Otherwise all of `DIR` is
//!   a test-only source (evaluation sets).
//! - Every image must have the size of the first one read. The dataset has 3
//!   channels (RGB) if any image has colour, else 1 (grey); alpha is dropped.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use image::DynamicImage;

use super::error::{DataError, Result};
use super::part::{into_source, Classes, LabelLocation, Part};
use super::DataSource;

const EXTENSIONS: [&str; 3] = ["png", "jpg", "jpeg"];

/// Loads a folder dataset (see the module doc); the parts are named
/// `<name>/train` and `<name>/test`.
pub(crate) fn load(dir: &Path, name: &str) -> Result<DataSource> {
    let train_dir = dir.join("train");
    if train_dir.is_dir() {
        let test_dir = dir.join("test");
        if !test_dir.is_dir() {
            return Err(DataError::Missing {
                path: test_dir,
                hint: "a folder dataset with train/ also needs test/".into(),
            });
        }
        let train_classes = class_dirs(&train_dir)?;
        let test_classes = class_dirs(&test_dir)?;
        if names(&train_classes) != names(&test_classes) {
            return Err(DataError::Inconsistent {
                name: name.to_string(),
                reason: format!(
                    "class folders differ: train {:?}, test {:?}",
                    names(&train_classes),
                    names(&test_classes)
                ),
            });
        }
        let n_classes = train_classes.len();
        let train = read_part(&train_dir, &train_classes)?;
        let test = read_part(&test_dir, &test_classes)?;
        into_source(name, Some(train), test, Classes::Fixed(n_classes))
    } else {
        let classes = class_dirs(dir)?;
        let n_classes = classes.len();
        let test = read_part(dir, &classes)?;
        into_source(name, None, test, Classes::Fixed(n_classes))
    }
}

fn names(dirs: &[PathBuf]) -> Vec<OsString> {
    dirs.iter()
        .filter_map(|d| d.file_name().map(OsString::from))
        .collect()
}

fn is_hidden(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
}

/// Entries of `dir` passing `keep`, sorted by file name.
fn sorted_entries(dir: &Path, keep: impl Fn(&Path) -> bool) -> Result<Vec<PathBuf>> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| DataError::io(dir, e))? {
        let path = entry.map_err(|e| DataError::io(dir, e))?.path();
        if !is_hidden(&path) && keep(&path) {
            entries.push(path);
        }
    }
    entries.sort();
    Ok(entries)
}

fn class_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
    if !dir.is_dir() {
        return Err(DataError::Missing {
            path: dir.to_path_buf(),
            hint: "expected a directory of class folders".into(),
        });
    }
    let classes = sorted_entries(dir, Path::is_dir)?;
    if classes.is_empty() {
        return Err(DataError::Empty {
            path: dir.to_path_buf(),
            hint: "expected one sub-directory per class".into(),
        });
    }
    Ok(classes)
}

fn is_image_file(path: &Path) -> bool {
    path.is_file()
        && path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// Decodes every image of every class folder (label = folder index).
fn read_part(dir: &Path, classes: &[PathBuf]) -> Result<Part> {
    let mut decoded: Vec<(PathBuf, DynamicImage)> = Vec::new();
    let mut labels = Vec::new();
    for (label, class_dir) in classes.iter().enumerate() {
        for path in sorted_entries(class_dir, is_image_file)? {
            let image = image::open(&path).map_err(|source| DataError::Decode {
                path: path.clone(),
                source,
            })?;
            decoded.push((path, image));
            labels.push(label);
        }
    }
    let Some((_, first)) = decoded.first() else {
        return Err(DataError::Empty {
            path: dir.to_path_buf(),
            hint: format!("no {} files in the class folders", EXTENSIONS.join("/")),
        });
    };
    let (width, height) = (first.width(), first.height());
    let channels = if decoded.iter().any(|(_, im)| im.color().has_color()) {
        3
    } else {
        1
    };
    let mut images = Vec::with_capacity(decoded.len() * channels * (width * height) as usize);
    for (path, image) in &decoded {
        if (image.width(), image.height()) != (width, height) {
            return Err(DataError::ShapeMismatch {
                path: path.clone(),
                expected: format!("{width}x{height} pixels"),
                found: format!("{}x{} pixels", image.width(), image.height()),
            });
        }
        if channels == 3 {
            let rgb = image.to_rgb8();
            images.extend(super::dataset::hwc_to_chw(
                rgb.as_raw(),
                3,
                height as usize,
                width as usize,
            ));
        } else {
            images.extend_from_slice(image.to_luma8().as_raw());
        }
    }
    let n = labels.len();
    Ok(Part {
        images,
        labels,
        shape: (channels, height as usize, width as usize),
        // Labels come from folder names and are in range by construction.
        label_locations: vec![LabelLocation {
            path: dir.to_path_buf(),
            first: 0,
            stride: 0,
            count: n,
        }],
    })
}
