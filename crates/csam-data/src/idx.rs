//! IDX files, the format of MNIST, Fashion-MNIST, KMNIST, EMNIST...
//!
//! Layout (big-endian): two zero bytes, the element type (`0x08` = unsigned
//! byte, the only one accepted here), the rank `r`, then `r` u32 dimensions,
//! then the elements row-major. Images are rank 3 `(N, H, W)` and load as one
//! channel; labels are rank 1 `(N)`. Files may be gzipped.
//!
//! A directory holds the standard names `train-images-idx3-ubyte`,
//! `train-labels-idx1-ubyte`, `t10k-images-idx3-ubyte`,
//! `t10k-labels-idx1-ubyte`, each optionally with `.gz`. The two train files
//! may both be absent (a test-only source).

use std::path::Path;

use super::error::{DataError, Result};
use super::part::{LabelLocation, Part};
use super::stream::{find_optionally_gzipped, ByteStream};

/// IDX element type code of unsigned bytes.
const UBYTE: u8 = 0x08;

/// The standard file stems of one part (`train` or `t10k`).
pub(crate) fn file_names(prefix: &str) -> [String; 2] {
    [
        format!("{prefix}-images-idx3-ubyte"),
        format!("{prefix}-labels-idx1-ubyte"),
    ]
}

/// An IDX array of unsigned bytes.
struct IdxArray {
    dims: Vec<usize>,
    data: Vec<u8>,
    /// Byte offset of the first element.
    data_offset: u64,
}

fn read_array(stream: &mut ByteStream<'_>, rank: u8) -> Result<IdxArray> {
    let magic = stream.read_array::<4>()?;
    if magic[0] != 0 || magic[1] != 0 || magic[3] != rank {
        return Err(DataError::BadMagic {
            path: stream.path().to_path_buf(),
            offset: 0,
            expected: format!("00 00 08 {rank:02x} (IDX, unsigned bytes, rank {rank})"),
            found: format!(
                "{:02x} {:02x} {:02x} {:02x}",
                magic[0], magic[1], magic[2], magic[3]
            ),
        });
    }
    if magic[2] != UBYTE {
        return Err(stream.bad_header(
            2,
            format!(
                "element type 0x{:02x}; only unsigned bytes (0x08) are supported",
                magic[2]
            ),
        ));
    }
    let mut dims = Vec::with_capacity(rank as usize);
    for _ in 0..rank {
        dims.push(u32::from_be_bytes(stream.read_array::<4>()?) as usize);
    }
    let data_offset = stream.offset();
    let len = dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d as u64))
        .ok_or_else(|| stream.bad_header(4, format!("dimensions {dims:?} overflow")))?;
    let data = stream.read_vec(len, "the elements")?;
    Ok(IdxArray {
        dims,
        data,
        data_offset,
    })
}

/// Reads one part from an images stream (rank 3) and a labels stream
/// (rank 1) that must agree on the sample count; both streams must end
/// exactly where their data ends.
pub(crate) fn read_part(mut images: ByteStream<'_>, mut labels: ByteStream<'_>) -> Result<Part> {
    let image_array = read_array(&mut images, 3)?;
    let label_array = read_array(&mut labels, 1)?;
    let (n, height, width) = (
        image_array.dims[0],
        image_array.dims[1],
        image_array.dims[2],
    );
    if height == 0 || width == 0 {
        return Err(images.bad_header(8, format!("empty image size {height}x{width}")));
    }
    if label_array.dims[0] != n {
        return Err(DataError::CountMismatch {
            images: images.path().to_path_buf(),
            labels: labels.path().to_path_buf(),
            n_images: n,
            n_labels: label_array.dims[0],
        });
    }
    let label_location = LabelLocation {
        path: labels.path().to_path_buf(),
        first: label_array.data_offset,
        stride: 1,
        count: n,
    };
    images.finish()?;
    labels.finish()?;
    Ok(Part {
        images: image_array.data,
        labels: label_array.data.iter().map(|&l| l as usize).collect(),
        shape: (1, height, width),
        label_locations: vec![label_location],
    })
}

/// Loads the train part (if present) and the test part from `dir`.
pub(crate) fn load_dir(dir: &Path) -> Result<(Option<Part>, Part)> {
    if !dir.is_dir() {
        return Err(DataError::Missing {
            path: dir.to_path_buf(),
            hint: "expected a directory of IDX files (train-images-idx3-ubyte[.gz], ...)".into(),
        });
    }
    let train = load_part(dir, "train", true)?;
    let test = load_part(dir, "t10k", false)?;
    // Invariant: load_part returns Some whenever `optional` is false.
    Ok((train, test.expect("test part is required")))
}

fn load_part(dir: &Path, prefix: &str, optional: bool) -> Result<Option<Part>> {
    let [images_name, labels_name] = file_names(prefix);
    let images = find_optionally_gzipped(dir, &images_name);
    let labels = find_optionally_gzipped(dir, &labels_name);
    let missing = |name: &str| DataError::Missing {
        path: dir.join(name),
        hint: format!("an IDX directory needs {name} (optionally .gz)"),
    };
    match (images, labels) {
        (None, None) if optional => Ok(None),
        (Some(images), Some(labels)) => Ok(Some(read_part(
            ByteStream::open(&images)?,
            ByteStream::open(&labels)?,
        )?)),
        (None, _) => Err(missing(&images_name)),
        (_, None) => Err(missing(&labels_name)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn idx(magic: [u8; 4], dims: &[u32], data: &[u8]) -> Vec<u8> {
        let mut bytes = magic.to_vec();
        for d in dims {
            bytes.extend_from_slice(&d.to_be_bytes());
        }
        bytes.extend_from_slice(data);
        bytes
    }

    fn part(images: &[u8], labels: &[u8]) -> Result<Part> {
        read_part(
            ByteStream::from_bytes(Path::new("images"), images),
            ByteStream::from_bytes(Path::new("labels"), labels),
        )
    }

    #[test]
    fn reads_a_hand_made_pair() {
        let images = idx([0, 0, 8, 3], &[2, 1, 3], &[1, 2, 3, 4, 5, 6]);
        let labels = idx([0, 0, 8, 1], &[2], &[7, 1]);
        let p = part(&images, &labels).unwrap();
        assert_eq!(p.shape, (1, 1, 3));
        assert_eq!(p.images, vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(p.labels, vec![7, 1]);
        assert_eq!(p.label_locations[0].first, 8);
    }

    #[test]
    fn wrong_magic_and_type_are_refused() {
        let labels = idx([0, 0, 8, 1], &[1], &[0]);
        let rank_one = idx([0, 0, 8, 1], &[1], &[0]);
        assert!(matches!(
            part(&rank_one, &labels),
            Err(DataError::BadMagic { offset: 0, .. })
        ));
        let floats = idx([0, 0, 0x0d, 3], &[1, 1, 1], &[0, 0, 0, 0]);
        assert!(matches!(
            part(&floats, &labels),
            Err(DataError::BadHeader { offset: 2, .. })
        ));
    }

    #[test]
    fn truncated_data_names_the_offset() {
        let images = idx([0, 0, 8, 3], &[2, 2, 2], &[0; 7]);
        let labels = idx([0, 0, 8, 1], &[2], &[0, 1]);
        match part(&images, &labels) {
            Err(DataError::Truncated {
                offset, expected, ..
            }) => assert_eq!(
                (offset, expected),
                (23, 24),
                "8 elements after a 16-byte header"
            ),
            other => panic!("expected Truncated, got {other:?}"),
        }
    }

    #[test]
    fn absurd_header_is_refused_before_allocating() {
        let labels = idx([0, 0, 8, 1], &[1], &[0]);
        let overflowing = idx([0, 0, 8, 3], &[u32::MAX, u32::MAX, u32::MAX], &[0; 4]);
        assert!(matches!(
            part(&overflowing, &labels),
            Err(DataError::BadHeader { offset: 4, .. })
        ));
        let huge = idx([0, 0, 8, 3], &[u32::MAX, 1000, 1000], &[0; 4]);
        match part(&huge, &labels) {
            Err(DataError::Truncated {
                offset, expected, ..
            }) => assert_eq!((offset, expected), (20, 16 + u32::MAX as u64 * 1_000_000)),
            other => panic!("expected Truncated, got {other:?}"),
        }
    }

    #[test]
    fn count_mismatch_and_trailing_bytes_are_refused() {
        let images = idx([0, 0, 8, 3], &[2, 1, 1], &[0, 0]);
        let labels = idx([0, 0, 8, 1], &[3], &[0, 1, 2]);
        assert!(matches!(
            part(&images, &labels),
            Err(DataError::CountMismatch { .. })
        ));
        let long = idx([0, 0, 8, 3], &[2, 1, 1], &[0, 0, 9]);
        let labels = idx([0, 0, 8, 1], &[2], &[0, 1]);
        assert!(matches!(
            part(&long, &labels),
            Err(DataError::TrailingBytes { offset: 18, .. })
        ));
    }

    proptest! {
        #[test]
        fn random_arrays_round_trip(
            (n, h, w, pixels) in (0usize..4, 1usize..5, 1usize..5).prop_flat_map(|(n, h, w)| {
                (Just(n), Just(h), Just(w), proptest::collection::vec(any::<u8>(), n * h * w))
            }),
            label_seed in any::<u8>(),
        ) {
            let labels: Vec<u8> = (0..n as u8).map(|i| i.wrapping_mul(31) ^ label_seed).collect();
            let images = idx([0, 0, 8, 3], &[n as u32, h as u32, w as u32], &pixels);
            let label_file = idx([0, 0, 8, 1], &[n as u32], &labels);
            let p = part(&images, &label_file).unwrap();
            prop_assert_eq!(p.shape, (1, h, w));
            prop_assert_eq!(p.images, pixels);
            prop_assert_eq!(p.labels, labels.iter().map(|&l| l as usize).collect::<Vec<_>>());
        }

        #[test]
        fn damaged_files_give_errors_not_panics(
            cut in 0usize..40,
            edits in proptest::collection::vec((0usize..40, any::<u8>()), 0..4),
        ) {
            let mut images = idx([0, 0, 8, 3], &[2, 2, 3], &[9; 12]);
            for (at, value) in edits {
                let at = at % images.len();
                images[at] = value;
            }
            images.truncate(cut);
            let labels = idx([0, 0, 8, 1], &[2], &[0, 1]);
            let _ = part(&images, &labels);
        }
    }
}
