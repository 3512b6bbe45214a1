//! `.npy` image datasets (`npy:IMAGES,LABELS`, the CIFAR-10-C layout):
//! images as `uint8` `(N, H, W, C)` or `(N, H, W)` (one channel), labels as
//! `N` integers.
//!
//! The bytes are parsed by csam-calib's `.npy` reader, the workspace's one
//! strict and fuzzed `.npy` parser: images through its `uint8` path (one byte
//! per pixel, never widened: a 150 MB CIFAR-10-C file takes 150 MB), labels
//! widened to `i64`. This module checks what is specific to image datasets
//! (the layout, labels that are class indices, one label per image) and
//! reports every refusal as a [`DataError`] with its byte offset. NumPy never
//! compresses a `.npy` file, so unlike IDX files they are read as stored; a
//! gzipped one is refused with a hint.

use std::io::Read;
use std::path::Path;

use csam_calib::io::npy::NpyInput;
use csam_calib::io::{Elements, NpyError, NpyProblem};

use super::dataset::{hwc_to_chw, SampleShape};
use super::error::{DataError, Result};
use super::part::{LabelLocation, Part};

/// Reads the images file and the labels file of an `npy:` spec into one part.
pub(crate) fn read_files(images: &Path, labels: &Path) -> Result<Part> {
    read_part(
        NpyInput::open(images).map_err(refused)?,
        NpyInput::open(labels).map_err(refused)?,
    )
}

/// The `.npy` input held by `bytes` (named `name` in errors), header read.
pub(crate) fn input_from_bytes<'a>(name: &Path, bytes: &'a [u8]) -> Result<NpyInput<&'a [u8]>> {
    NpyInput::new(bytes, bytes.len() as u64, name).map_err(refused)
}

/// Reads an images input and a labels input (headers already read) into one
/// part; they must agree on the sample count.
pub(crate) fn read_part(images: NpyInput<impl Read>, labels: NpyInput<impl Read>) -> Result<Part> {
    let (images_path, labels_path) = (images.source().to_path_buf(), labels.source().to_path_buf());
    let (image_bytes, shape) = read_images(images)?;
    let n_images = image_bytes.len() / (shape.0 * shape.1 * shape.2);
    let (label_values, location) = read_labels(labels)?;
    if label_values.len() != n_images {
        return Err(DataError::CountMismatch {
            images: images_path,
            labels: labels_path,
            n_images,
            n_labels: label_values.len(),
        });
    }
    Ok(Part {
        images: image_bytes,
        labels: label_values,
        shape,
        label_locations: vec![location],
    })
}

/// Reads `(N, H, W, C)` or `(N, H, W)` `uint8` images as CHW samples; the
/// layout is checked on the header, before the data is read. Returns the
/// images and the `(C, H, W)` shape.
fn read_images(input: NpyInput<impl Read>) -> Result<(Vec<u8>, SampleShape)> {
    let shape = &input.header().shape;
    let bad_layout = |reason: String| DataError::BadHeader {
        path: input.source().to_path_buf(),
        offset: input.data_offset(),
        reason,
    };
    let (height, width, channels) = match shape[..] {
        [_, h, w, c] => (h, w, c),
        [_, h, w] => (h, w, 1),
        _ => {
            return Err(bad_layout(format!(
                "images must have shape (N, H, W, C) or (N, H, W), found {shape:?}"
            )))
        }
    };
    if height == 0 || width == 0 || channels == 0 {
        return Err(bad_layout(format!("empty image shape {shape:?}")));
    }
    let hwc = input.read_u8().map_err(refused)?.data;
    // One channel: HWC is already CHW.
    let chw = if channels == 1 {
        hwc
    } else {
        hwc_to_chw(&hwc, channels, height, width)
    };
    Ok((chw, (channels, height, width)))
}

/// Reads 1-D integer labels; a negative label is an error at its offset.
fn read_labels(input: NpyInput<impl Read>) -> Result<(Vec<usize>, LabelLocation)> {
    let path = input.source().to_path_buf();
    let (first, stride) = (input.data_offset(), input.header().dtype.size as u64);
    let bad_labels = |reason: String| DataError::BadHeader {
        path: path.clone(),
        offset: first,
        reason,
    };
    let [n] = input.header().shape[..] else {
        return Err(bad_labels(format!(
            "labels must be 1-D, found shape {:?}",
            input.header().shape
        )));
    };
    let dtype = input.header().dtype;
    let values = match input.read_elements().map_err(refused)?.elements {
        Elements::Integer(values) => values,
        Elements::Float(_) | Elements::Float32(_) => {
            return Err(bad_labels(format!(
                "labels must be integers, found dtype '{dtype}'"
            )))
        }
    };
    let labels = values
        .iter()
        .enumerate()
        .map(|(i, &value)| {
            usize::try_from(value).map_err(|_| DataError::NotAClassIndex {
                path: path.clone(),
                offset: first + i as u64 * stride,
                label: i128::from(value),
            })
        })
        .collect::<Result<Vec<usize>>>()?;
    let location = LabelLocation {
        path,
        first,
        stride,
        count: n,
    };
    Ok((labels, location))
}

/// The reader's refusal as the data module's error, offsets kept.
fn refused(error: NpyError) -> DataError {
    let path = error.path;
    match error.problem {
        NpyProblem::Io(source) | NpyProblem::Broken { source, .. } => {
            DataError::Io { path, source }
        }
        NpyProblem::BadMagic { found } => {
            let gzip = if found.starts_with(&[0x1f, 0x8b]) {
                " (a gzip stream: decompress the file first)"
            } else {
                ""
            };
            DataError::BadMagic {
                path,
                offset: 0,
                expected: "\\x93NUMPY (a .npy file)".into(),
                found: format!("{found:02x?}{gzip}"),
            }
        }
        NpyProblem::Truncated {
            expected, found, ..
        } => DataError::Truncated {
            path,
            offset: found,
            expected,
            found,
            decompressed: false,
        },
        NpyProblem::TrailingBytes { end, extra } => DataError::TrailingBytes {
            path,
            offset: end,
            extra,
            decompressed: false,
        },
        NpyProblem::Invalid { offset, detail } => DataError::BadHeader {
            path,
            offset,
            reason: detail,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A version 1.0 `.npy` file as numpy writes it (header padded with
    /// spaces to a multiple of 64 bytes, ending in a newline).
    fn npy(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
        let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
        let header = format!(
            "{dict:<width$}\n",
            width = (dict.len() + 11).div_ceil(64) * 64 - 11
        );
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(data);
        bytes
    }

    fn part(images: &[u8], labels: &[u8]) -> Result<Part> {
        read_part(
            input_from_bytes(Path::new("images.npy"), images)?,
            input_from_bytes(Path::new("labels.npy"), labels)?,
        )
    }

    #[test]
    fn hand_made_pair_transposes_and_decodes() {
        // Two 1x2 RGB images, big-endian u16 labels 3 and 258.
        let images = npy(
            "|u1",
            "(2, 1, 2, 3)",
            &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12],
        );
        let labels = npy(">u2", "(2,)", &[0, 3, 1, 2]);
        let p = part(&images, &labels).unwrap();
        assert_eq!(p.shape, (3, 1, 2));
        assert_eq!(p.images, vec![1, 4, 2, 5, 3, 6, 7, 10, 8, 11, 9, 12]);
        assert_eq!(p.labels, vec![3, 258]);
        assert_eq!(
            p.label_locations[0].first, 128,
            "header padded to 128 bytes"
        );
        assert_eq!(p.label_locations[0].stride, 2);
    }

    #[test]
    fn one_channel_images_are_kept_as_read() {
        let images = npy("|u1", "(2, 1, 3)", &[1, 2, 3, 4, 5, 6]);
        let labels = npy("|i1", "(2,)", &[0, 1]);
        let p = part(&images, &labels).unwrap();
        assert_eq!((p.shape, p.images), ((1, 1, 3), vec![1, 2, 3, 4, 5, 6]));
    }

    #[test]
    fn layout_refusals_are_located() {
        let labels = npy("|u1", "(2,)", &[0, 1]);
        let refuse = |images: &[u8], labels: &[u8]| match part(images, labels) {
            Err(DataError::BadHeader {
                path,
                offset,
                reason,
            }) => (path, offset, reason),
            other => panic!("expected BadHeader, got {other:?}"),
        };
        let (path, offset, reason) = refuse(&npy("|u1", "(2, 6)", &[0; 12]), &labels);
        assert_eq!((path.to_str(), offset), (Some("images.npy"), 128));
        assert!(reason.contains("(N, H, W, C)"), "{reason}");
        let (_, _, reason) = refuse(&npy("|u1", "(2, 0, 3)", &[]), &labels);
        assert!(reason.contains("empty image shape"), "{reason}");
        let images = npy("|u1", "(2, 1, 1)", &[5, 6]);
        let (path, _, reason) = refuse(&images, &npy("<f4", "(2,)", &[0; 8]));
        assert_eq!(path.to_str(), Some("labels.npy"));
        assert!(reason.contains("integers, found dtype '<f4'"), "{reason}");
        let (_, _, reason) = refuse(&images, &npy("|u1", "(1, 2)", &[0, 1]));
        assert!(reason.contains("1-D"), "{reason}");
    }

    #[test]
    fn gzipped_file_gets_a_hint() {
        let mut gz = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0];
        gz.extend_from_slice(&[0; 16]);
        match input_from_bytes(Path::new("images.npy.gz"), &gz) {
            Err(DataError::BadMagic {
                offset: 0, found, ..
            }) => {
                assert!(found.contains("decompress the file first"), "{found}")
            }
            other => panic!("expected BadMagic, got {other:?}"),
        }
    }

    proptest! {
        #[test]
        fn damaged_files_give_errors_not_panics(
            cut in 0usize..80,
            edits in proptest::collection::vec((0usize..80, any::<u8>()), 0..4),
        ) {
            let mut labels = npy("<i4", "(2,)", &[1, 0, 0, 0, 2, 0, 0, 0]);
            for (at, value) in edits {
                let at = at % labels.len();
                labels[at] = value;
            }
            labels.truncate(cut);
            let images = npy("|u1", "(2, 1, 1)", &[5, 6]);
            let _ = part(&images, &labels);
        }
    }
}
