//! A strict reader of the `.npy` files used for image datasets such as
//! CIFAR-10-C: images as `uint8` arrays `(N, H, W, C)` (or `(N, H, W)`, one
//! channel) and labels as a 1-D integer array.
//!
//! Format (NumPy format spec, versions 1.0 to 3.0): `\x93NUMPY`, major and
//! minor version bytes, the header length (u16 little-endian in 1.0, u32 in
//! 2.0 and 3.0), an ASCII header holding a Python dict literal with `descr`,
//! `fortran_order` and `shape`, then the data. Only C order is accepted for
//! images (labels are 1-D, where order does not matter).

use super::dataset::SampleShape;
use super::error::{DataError, Result};
use super::part::{LabelLocation, Part};
use super::stream::ByteStream;

const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// An element type from a `descr` string such as `|u1` or `<i8`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Dtype {
    signed: bool,
    size: usize,
    big_endian: bool,
}

/// A parsed `.npy` header.
#[derive(Debug)]
struct Header {
    dtype: Dtype,
    fortran_order: bool,
    shape: Vec<usize>,
    /// Byte offset of the first element.
    data_offset: u64,
}

fn read_header(stream: &mut ByteStream<'_>) -> Result<Header> {
    let magic = stream.read_array::<6>()?;
    if &magic != MAGIC {
        return Err(DataError::BadMagic {
            path: stream.path().to_path_buf(),
            offset: 0,
            expected: "\\x93NUMPY (a .npy file)".into(),
            found: format!("{:02x?}", magic),
        });
    }
    let [major, _minor] = stream.read_array::<2>()?;
    let header_len = match major {
        1 => u16::from_le_bytes(stream.read_array::<2>()?) as u64,
        2 | 3 => u32::from_le_bytes(stream.read_array::<4>()?) as u64,
        _ => {
            return Err(stream.bad_header(6, format!("unsupported .npy version {major}")));
        }
    };
    let start = stream.offset();
    let text = stream.read_vec(header_len, "the header")?;
    let text = std::str::from_utf8(&text)
        .map_err(|e| stream.bad_header(start + e.valid_up_to() as u64, "header is not text"))?;
    let field = |key: &str| -> Result<(u64, &str)> {
        let pattern = format!("'{key}':");
        let at = text
            .find(&pattern)
            .ok_or_else(|| stream.bad_header(start, format!("header lacks '{key}'")))?;
        let value_start = at + pattern.len();
        Ok((start + value_start as u64, text[value_start..].trim_start()))
    };
    let (descr_at, descr) = field("descr")?;
    let dtype = parse_descr(descr)
        .ok_or_else(|| stream.bad_header(descr_at, format!("unsupported dtype in {descr:.12}..; expected an integer type such as '|u1' or '<i8'")))?;
    let (order_at, order) = field("fortran_order")?;
    let fortran_order = if order.starts_with("False") {
        false
    } else if order.starts_with("True") {
        true
    } else {
        return Err(stream.bad_header(order_at, "fortran_order is neither True nor False"));
    };
    let (shape_at, shape) = field("shape")?;
    let shape = parse_shape(shape)
        .ok_or_else(|| stream.bad_header(shape_at, "shape is not a tuple of integers"))?;
    Ok(Header {
        dtype,
        fortran_order,
        shape,
        data_offset: stream.offset(),
    })
}

/// `'|u1'`, `'<i8'`, `'>u2'`... (quoted, as in the header) to a [`Dtype`].
fn parse_descr(value: &str) -> Option<Dtype> {
    let quoted = value.strip_prefix('\'')?;
    let descr = &quoted[..quoted.find('\'')?];
    let mut chars = descr.chars();
    let big_endian = match chars.next()? {
        '>' => true,
        '<' | '|' | '=' => false,
        _ => return None,
    };
    let signed = match chars.next()? {
        'i' => true,
        'u' => false,
        _ => return None,
    };
    let size: usize = chars.as_str().parse().ok()?;
    [1, 2, 4, 8].contains(&size).then_some(Dtype {
        signed,
        size,
        big_endian,
    })
}

/// `(10000, 32, 32, 3), ...` or `(5,), ...` to the dimensions.
fn parse_shape(value: &str) -> Option<Vec<usize>> {
    let inner = value.strip_prefix('(')?;
    let inner = &inner[..inner.find(')')?];
    inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().ok())
        .collect()
}

/// Bytes of data the header announces: the product of the shape times the
/// element size.
fn data_len(stream: &ByteStream<'_>, header: &Header) -> Result<u64> {
    header
        .shape
        .iter()
        .try_fold(header.dtype.size as u64, |acc, &d| {
            acc.checked_mul(d as u64)
        })
        .ok_or_else(|| stream.bad_header(0, format!("shape {:?} overflows", header.shape)))
}

/// Reads `(N, H, W, C)` or `(N, H, W)` `uint8` images and transposes them to
/// CHW. Returns the images and the `(C, H, W)` shape.
fn read_images(mut stream: ByteStream<'_>) -> Result<(Vec<u8>, SampleShape)> {
    let header = read_header(&mut stream)?;
    let ubyte = Dtype {
        signed: false,
        size: 1,
        big_endian: false,
    };
    if header.dtype != ubyte {
        return Err(stream.bad_header(
            header.data_offset,
            format!("images must be uint8 ('|u1'), found {:?}", header.dtype),
        ));
    }
    if header.fortran_order {
        return Err(stream.bad_header(
            header.data_offset,
            "images in Fortran order; save them with np.ascontiguousarray",
        ));
    }
    let (height, width, channels) = match header.shape[..] {
        [_, h, w, c] => (h, w, c),
        [_, h, w] => (h, w, 1),
        _ => {
            return Err(stream.bad_header(
                header.data_offset,
                format!(
                    "images must have shape (N, H, W, C) or (N, H, W), found {:?}",
                    header.shape
                ),
            ))
        }
    };
    if height == 0 || width == 0 || channels == 0 {
        return Err(stream.bad_header(
            header.data_offset,
            format!("empty image shape {:?}", header.shape),
        ));
    }
    let hwc = stream.read_vec(data_len(&stream, &header)?, "the images")?;
    stream.finish()?;
    Ok((
        super::dataset::hwc_to_chw(&hwc, channels, height, width),
        (channels, height, width),
    ))
}

/// Reads 1-D integer labels; a negative label is an error at its offset.
fn read_labels(mut stream: ByteStream<'_>) -> Result<(Vec<usize>, LabelLocation)> {
    let header = read_header(&mut stream)?;
    let [n] = header.shape[..] else {
        return Err(stream.bad_header(
            header.data_offset,
            format!("labels must be 1-D, found shape {:?}", header.shape),
        ));
    };
    let bytes = stream.read_vec(data_len(&stream, &header)?, "the labels")?;
    let path = stream.path().to_path_buf();
    stream.finish()?;
    let size = header.dtype.size;
    let mut labels = Vec::with_capacity(n);
    for (i, raw) in bytes.chunks_exact(size).enumerate() {
        let value = decode_integer(raw, header.dtype);
        let label = usize::try_from(value).map_err(|_| DataError::NotAClassIndex {
            path: path.clone(),
            offset: header.data_offset + (i * size) as u64,
            label: value,
        })?;
        labels.push(label);
    }
    let location = LabelLocation {
        path,
        first: header.data_offset,
        stride: size as u64,
        count: n,
    };
    Ok((labels, location))
}

fn decode_integer(raw: &[u8], dtype: Dtype) -> i128 {
    let mut bytes = [0u8; 8];
    if dtype.big_endian {
        bytes[8 - raw.len()..].copy_from_slice(raw);
        bytes.reverse();
    } else {
        bytes[..raw.len()].copy_from_slice(raw);
    }
    let unsigned = u64::from_le_bytes(bytes);
    let bits = 8 * raw.len() as u32;
    if dtype.signed && bits < 64 && unsigned >> (bits - 1) & 1 == 1 {
        unsigned as i128 - (1i128 << bits)
    } else if dtype.signed {
        unsigned as i64 as i128
    } else {
        unsigned as i128
    }
}

/// Reads an images stream and a labels stream into one part; they must
/// agree on the sample count.
pub(crate) fn read_part(images: ByteStream<'_>, labels: ByteStream<'_>) -> Result<Part> {
    let (images_path, labels_path) = (images.path().to_path_buf(), labels.path().to_path_buf());
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::path::Path;

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
            ByteStream::from_bytes(Path::new("images.npy"), images),
            ByteStream::from_bytes(Path::new("labels.npy"), labels),
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
    }

    #[test]
    fn descr_and_shape_parse() {
        let u1 = parse_descr("'|u1', 'fortran_order'").unwrap();
        assert_eq!((u1.signed, u1.size), (false, 1));
        let i8 = parse_descr("'>i8'").unwrap();
        assert_eq!((i8.signed, i8.size, i8.big_endian), (true, 8, true));
        assert!(parse_descr("'<f4'").is_none());
        assert!(parse_descr("'<i3'").is_none());
        assert_eq!(parse_shape("(5,), }").unwrap(), vec![5]);
        assert_eq!(parse_shape("(2, 32, 32, 3)").unwrap(), vec![2, 32, 32, 3]);
        assert!(parse_shape("(2, x)").is_none());
    }

    #[test]
    fn integers_decode_in_both_byte_orders() {
        let le = |signed, size| Dtype {
            signed,
            size,
            big_endian: false,
        };
        assert_eq!(decode_integer(&[0xff], le(true, 1)), -1);
        assert_eq!(decode_integer(&[0xff], le(false, 1)), 255);
        assert_eq!(decode_integer(&[0xfe, 0xff, 0xff, 0xff], le(true, 4)), -2);
        assert_eq!(decode_integer(&[7, 0, 0, 0, 0, 0, 0, 0], le(true, 8)), 7);
        assert_eq!(
            decode_integer(&[0xff; 8], le(true, 8)),
            -1,
            "all ones is -1 for i64"
        );
        let be = Dtype {
            signed: false,
            size: 2,
            big_endian: true,
        };
        assert_eq!(decode_integer(&[1, 2], be), 258);
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
