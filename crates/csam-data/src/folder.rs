//! Image folders: `DIR/<class name>/*.{png,jpg,jpeg}`, in one of three
//! layouts.
//!
//! | layout | train part | test part |
//! |---|---|---|
//! | `DIR/train/<class>/`, `DIR/test/<class>/` | `DIR/train` | `DIR/test` (same class names) |
//! | `DIR/test/<class>/` only | none (an evaluation set) | `DIR/test` |
//! | `DIR/<class>/` (flat) | the other 80% | [`FLAT_TEST_FRACTION`] of the images, drawn per class |
//!
//! Conventions:
//! - Classes are the sub-directories, sorted by name (byte order of the
//!   name); label `k` is the `k`-th name. Hidden entries (`.name`) and
//!   files with other extensions are skipped. Images within a class are
//!   read in file-name order.
//! - The flat layout's test part is `floor(N / 5)` (at least 1) of the `N`
//!   images, stratified like a validation split (each class gives its
//!   proportional share, largest remainders first) and drawn uniformly
//!   within each class from the fixed seed [`FLAT_TEST_SEED`]: every run,
//!   whatever its own seed, and every evaluation of the same folder sees the
//!   same test images. Both parts keep file order.
//! - The decoded images must fit in the memory available (checked from the
//!   headers before decoding); a larger set is refused with the advice to
//!   stream it as `imagenet:DIR` ([`crate::streaming`]).
//! - Every image must have the size of the first one read. The dataset has 3
//!   channels (RGB) if any image has colour, else 1 (grey); alpha is dropped.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use image::ImageDecoder;

use super::dataset::{hwc_to_chw, Dataset};
use super::error::{DataError, Result};
use super::part::{into_source, Classes, LabelLocation, Part};
use super::rng::{stream, Purpose};
use super::split::stratified_mask;
use super::DataSource;

const EXTENSIONS: [&str; 3] = ["png", "jpg", "jpeg"];

/// The share of a flat folder's images that forms its test part.
const FLAT_TEST_FRACTION: f64 = 0.2;

/// The seed of the draw of a flat folder's test part (the same for every
/// run, so that train and test never swap images between runs).
const FLAT_TEST_SEED: u64 = 0;

/// Loads a folder dataset (see the module doc); the parts are named
/// `<name>/train` and `<name>/test`.
pub(crate) fn load(dir: &Path, name: &str) -> Result<DataSource> {
    let (train_dir, test_dir) = (dir.join("train"), dir.join("test"));
    match (train_dir.is_dir(), test_dir.is_dir()) {
        (true, true) => load_split(&train_dir, &test_dir, name),
        (true, false) => Err(DataError::Missing {
            path: test_dir,
            hint: "a folder data set with train/ also needs test/ with the same class \
                   folders; or put the class folders directly in the directory for a \
                   seeded 80/20 train/test split"
                .into(),
        }),
        (false, true) => {
            let classes = class_dirs(&test_dir)?;
            let test = read_part(&test_dir, &classes)?;
            into_source(name, None, test, Classes::Fixed(classes.len()))
        }
        (false, false) => load_flat(dir, name),
    }
}

/// The `train/` + `test/` layout.
fn load_split(train_dir: &Path, test_dir: &Path, name: &str) -> Result<DataSource> {
    let train_classes = class_dirs(train_dir)?;
    let test_classes = class_dirs(test_dir)?;
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
    let train = read_part(train_dir, &train_classes)?;
    let test = read_part(test_dir, &test_classes)?;
    into_source(name, Some(train), test, Classes::Fixed(n_classes))
}

/// The flat layout: every image read, then split (see the module doc).
fn load_flat(dir: &Path, name: &str) -> Result<DataSource> {
    let classes = class_dirs(dir)?;
    let all = into_source(
        name,
        None,
        read_part(dir, &classes)?,
        Classes::Fixed(classes.len()),
    )?
    .test;
    if all.n < 2 {
        return Err(DataError::Invalid(format!(
            "{}: a flat image folder is split into train and test, which needs at least 2 \
             images; it holds {}",
            dir.display(),
            all.n
        )));
    }
    let test_size = ((all.n as f64 * FLAT_TEST_FRACTION) as usize).max(1);
    let mut rng = stream(FLAT_TEST_SEED, Purpose::FolderTest, 0);
    let is_test = stratified_mask(&all.labels, all.n_classes, test_size, &mut rng);
    let (test, train): (Vec<usize>, Vec<usize>) = (0..all.n).partition(|&i| is_test[i]);
    let part = |indices: &[usize], which: &str| -> Dataset {
        all.select(indices).renamed(format!("{name}/{which}"))
    };
    DataSource::new(Some(part(&train, "train")), part(&test, "test"))
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

/// Entries of `dir` passing `keep`, sorted by file name, hidden ones
/// (`.name`) left out.
pub(crate) fn sorted_entries(dir: &Path, keep: impl Fn(&Path) -> bool) -> Result<Vec<PathBuf>> {
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

/// The class folders of `dir`, sorted by name (hidden ones skipped).
pub(crate) fn class_dirs(dir: &Path) -> Result<Vec<PathBuf>> {
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

/// The image files of one class folder, sorted by name.
pub(crate) fn image_files(class_dir: &Path) -> Result<Vec<PathBuf>> {
    sorted_entries(class_dir, is_image_file)
}

/// A file with an image extension (png, jpg, jpeg, any case).
pub(crate) fn is_image_file(path: &Path) -> bool {
    path.is_file()
        && path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

/// The size and colour of an image file, read from its header only.
fn probe(path: &Path) -> Result<((u32, u32), bool)> {
    let decode_error = |source| DataError::Decode {
        path: path.to_path_buf(),
        source,
    };
    let decoder = image::ImageReader::open(path)
        .map_err(|e| DataError::io(path, e))?
        .with_guessed_format()
        .map_err(|e| DataError::io(path, e))?
        .into_decoder()
        .map_err(decode_error)?;
    Ok((decoder.dimensions(), decoder.color_type().has_color()))
}

/// Decodes an image file, which must be `width x height` pixels.
pub(crate) fn decode_image(
    path: &Path,
    (width, height): (usize, usize),
) -> Result<image::DynamicImage> {
    let image = image::open(path).map_err(|source| DataError::Decode {
        path: path.to_path_buf(),
        source,
    })?;
    if (image.width() as usize, image.height() as usize) != (width, height) {
        return Err(DataError::ShapeMismatch {
            path: path.to_path_buf(),
            expected: format!("{width}x{height} pixels"),
            found: format!("{}x{} pixels", image.width(), image.height()),
        });
    }
    Ok(image)
}

/// The memory this machine has available, in bytes (`MemAvailable` of
/// `/proc/meminfo`); None where that is not known.
fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Refuses `needed` bytes of decoded images in `dir` when more than the
/// `available` memory, before anything is decoded.
fn check_fits(dir: &Path, needed: u64, available: Option<u64>) -> Result<()> {
    match available {
        Some(available) if needed > available => Err(DataError::TooLarge {
            path: dir.to_path_buf(),
            needed,
            available,
        }),
        _ => Ok(()),
    }
}

/// Reads every image of every class folder (label = folder index): a first
/// pass over the headers settles size and channel count, a second decodes
/// straight into the dataset's buffer.
fn read_part(dir: &Path, classes: &[PathBuf]) -> Result<Part> {
    let mut files = Vec::new();
    let mut labels = Vec::new();
    for (label, class_dir) in classes.iter().enumerate() {
        for path in image_files(class_dir)? {
            files.push(path);
            labels.push(label);
        }
    }
    if files.is_empty() {
        return Err(DataError::Empty {
            path: dir.to_path_buf(),
            hint: format!("no {} files in the class folders", EXTENSIONS.join("/")),
        });
    }
    let mut size = None;
    let mut has_colour = false;
    for path in &files {
        let (dimensions, colour) = probe(path)?;
        let expected = *size.get_or_insert(dimensions);
        if dimensions != expected {
            return Err(DataError::ShapeMismatch {
                path: path.clone(),
                expected: format!("{}x{} pixels", expected.0, expected.1),
                found: format!("{}x{} pixels", dimensions.0, dimensions.1),
            });
        }
        has_colour |= colour;
    }
    // Invariant: `files` is not empty, so the loop above set the size.
    let (width, height) = size.expect("size of the first image");
    let (width, height) = (width as usize, height as usize);
    let channels = if has_colour { 3 } else { 1 };
    let needed = (files.len() * channels * width * height) as u64;
    check_fits(dir, needed, available_memory())?;
    let mut images = Vec::with_capacity(needed as usize);
    for path in &files {
        let image = decode_image(path, (width, height))?;
        if has_colour {
            images.extend(hwc_to_chw(image.to_rgb8().as_raw(), 3, height, width));
        } else {
            images.extend_from_slice(image.to_luma8().as_raw());
        }
    }
    let n = labels.len();
    Ok(Part {
        images,
        labels,
        shape: (channels, height, width),
        // Labels come from folder names and are in range by construction.
        label_locations: vec![LabelLocation {
            path: dir.to_path_buf(),
            first: 0,
            stride: 0,
            count: n,
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_larger_than_memory_is_refused_with_the_way_to_stream_it() {
        let dir = Path::new("big");
        assert!(check_fits(dir, 10, Some(10)).is_ok());
        assert!(check_fits(dir, 10, None).is_ok(), "unknown memory: try");
        let e = check_fits(dir, 11, Some(10)).unwrap_err();
        assert!(matches!(
            e,
            DataError::TooLarge {
                needed: 11,
                available: 10,
                ..
            }
        ));
        assert!(e.to_string().contains("imagenet:DIR"), "{e}");
        assert!(available_memory().is_some_and(|m| m > 0) || !Path::new("/proc/meminfo").exists());
    }
}
