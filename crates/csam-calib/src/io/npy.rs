//! `.npy` files (NumPy format versions 1.0, 2.0 and 3.0): a strict reader and
//! an atomic writer.
//!
//! Layout: the magic `\x93NUMPY`, a major and minor version byte, the header
//! length (`u16` little-endian in version 1, `u32` in versions 2 and 3), the
//! header (a Python dict literal, see [`super::NpyHeader`]) ending in `\n`,
//! then the raw elements in C order.
//!
//! The reader checks the size the header claims against the bytes that are
//! actually there *before* it allocates anything for the data, so a header that
//! claims 10^12 elements is refused, not allocated.

use std::io::{BufReader, Read};
use std::path::Path;

use ndarray::ArrayView2;

use super::array::{format_error, io_error, open_regular_file, shape_text, Elements, LoadedArray};
use super::atomic::write_atomically;
use super::npy_header::{ByteOrder, Dtype, Header, Kind};
use crate::error::{CalibError, Result};

const MAGIC: &[u8; 6] = b"\x93NUMPY";
/// Longest header accepted. NumPy itself refuses headers over 10 000 bytes by
/// default; anything this reader supports needs well under 200.
const MAX_HEADER_LEN: u64 = 65_536;

/// Reads the `.npy` file at `path`.
pub fn read(path: &Path) -> Result<LoadedArray> {
    let (file, len) = open_regular_file(path)?;
    read_from(BufReader::new(file), len, path)
}

/// Reads one `.npy` array from `reader`, which holds exactly `len` bytes
/// (the file length, or the uncompressed size of an `.npz` member). `source`
/// names the input in errors.
pub fn read_from(mut reader: impl Read, len: u64, source: &Path) -> Result<LoadedArray> {
    let fail = |detail: String| format_error(source, detail);
    let prefix = read_prefix(&mut reader, len, source)?;
    // header_len <= MAX_HEADER_LEN, so this allocation is small.
    let mut header_bytes = vec![0u8; prefix.header_len as usize];
    read_exact_or_truncated(
        &mut reader,
        &mut header_bytes,
        prefix.header_start,
        len,
        source,
    )?;
    let header = decode_header(&header_bytes, prefix.major).map_err(&fail)?;
    if header.fortran_order {
        return Err(fail(
            "the array is stored in Fortran (column-major) order; save it in C order \
             (numpy.ascontiguousarray) instead"
                .into(),
        ));
    }
    let data_start = prefix.header_start + prefix.header_len;
    let data_len = data_length(&header).map_err(&fail)?;
    check_file_length(&header, data_start, data_len, len).map_err(&fail)?;

    // The length was checked against the real input above; read_to_end grows
    // the buffer only as bytes actually arrive.
    let mut data = Vec::new();
    reader
        .take(data_len)
        .read_to_end(&mut data)
        .map_err(|e| read_error(source, e, &format!("the data from byte {data_start}")))?;
    if (data.len() as u64) < data_len {
        return Err(fail(format!(
            "truncated: expected data up to byte {}, found only {} bytes",
            data_start + data_len,
            data_start + data.len() as u64
        )));
    }
    let elements = decode_elements(&data, header.dtype).map_err(&fail)?;
    Ok(LoadedArray {
        shape: header.shape,
        elements,
    })
}

/// What the fixed-size start of a `.npy` file says.
struct Prefix {
    major: u8,
    /// Offset of the header text.
    header_start: u64,
    header_len: u64,
}

/// Reads and checks the magic string, the version and the header length.
fn read_prefix(reader: &mut impl Read, len: u64, source: &Path) -> Result<Prefix> {
    let fail = |detail: String| format_error(source, detail);
    let mut start = [0u8; 8];
    read_exact_or_truncated(reader, &mut start, 0, len, source)?;
    if &start[..6] != MAGIC {
        return Err(fail(
            "not a .npy file (the magic string \\x93NUMPY is missing)".into(),
        ));
    }
    let (major, minor) = (start[6], start[7]);
    let (header_len, header_start) = match (major, minor) {
        (1, 0) => {
            let mut n = [0u8; 2];
            read_exact_or_truncated(reader, &mut n, 8, len, source)?;
            (u64::from(u16::from_le_bytes(n)), 10)
        }
        (2 | 3, 0) => {
            let mut n = [0u8; 4];
            read_exact_or_truncated(reader, &mut n, 8, len, source)?;
            (u64::from(u32::from_le_bytes(n)), 12)
        }
        _ => {
            return Err(fail(format!(
                "unsupported .npy format version {major}.{minor}"
            )))
        }
    };
    if header_len > MAX_HEADER_LEN {
        return Err(fail(format!(
            "header length {header_len} exceeds the limit of {MAX_HEADER_LEN} bytes"
        )));
    }
    if header_start + header_len > len {
        return Err(fail(format!(
            "truncated: the header should end at byte {}, the file has {len} bytes",
            header_start + header_len
        )));
    }
    Ok(Prefix {
        major,
        header_start,
        header_len,
    })
}

/// Bytes of element data the header describes, refusing overflowing shapes.
fn data_length(header: &Header) -> std::result::Result<u64, String> {
    header
        .shape
        .iter()
        .try_fold(header.dtype.size as u64, |acc, &d| {
            acc.checked_mul(d as u64)
        })
        .ok_or_else(|| format!("shape {} has too many elements", shape_text(&header.shape)))
}

/// The input must end exactly where the data does.
fn check_file_length(
    header: &Header,
    data_start: u64,
    data_len: u64,
    len: u64,
) -> std::result::Result<(), String> {
    let expected_end = data_start
        .checked_add(data_len)
        .ok_or_else(|| "data size overflows".to_string())?;
    if expected_end > len {
        return Err(format!(
            "truncated: shape {} needs {data_len} data bytes from byte {data_start}, so the \
             file should have {expected_end} bytes, but it has {len}",
            shape_text(&header.shape)
        ));
    }
    if expected_end < len {
        return Err(format!(
            "{} unexpected bytes after the data, which ends at byte {expected_end}",
            len - expected_end
        ));
    }
    Ok(())
}

fn read_exact_or_truncated(
    reader: &mut impl Read,
    buf: &mut [u8],
    offset: u64,
    len: u64,
    source: &Path,
) -> Result<()> {
    let end = offset + buf.len() as u64;
    if end > len {
        return Err(format_error(
            source,
            format!("truncated: expected at least {end} bytes, the file has {len}"),
        ));
    }
    reader
        .read_exact(buf)
        .map_err(|e| read_error(source, e, &format!("bytes {offset}..{end}")))
}

/// A failed read: the input ended early or its container (an `.npz` member)
/// is corrupt, a format error; anything else (a directory, a device error) an
/// I/O error.
fn read_error(source: &Path, error: std::io::Error, what: &str) -> CalibError {
    use std::io::ErrorKind;
    match error.kind() {
        ErrorKind::UnexpectedEof => {
            format_error(source, format!("truncated: reading {what}: {error}"))
        }
        ErrorKind::InvalidData => format_error(source, format!("reading {what}: {error}")),
        _ => io_error(source, error),
    }
}

fn decode_header(bytes: &[u8], major: u8) -> std::result::Result<Header, String> {
    // Versions 1 and 2 are latin-1, version 3 UTF-8; every valid header is ASCII.
    if major < 3 && !bytes.is_ascii() {
        return Err("the header contains non-ASCII bytes".into());
    }
    let text =
        std::str::from_utf8(bytes).map_err(|_| "the header is not valid UTF-8".to_string())?;
    if !text.ends_with('\n') {
        return Err("the header does not end with a newline".into());
    }
    Header::parse(text)
}

fn decode_elements(data: &[u8], dtype: Dtype) -> std::result::Result<Elements, String> {
    let big = dtype.order == ByteOrder::Big;
    let chunks = data.chunks_exact(dtype.size);
    // Copies an n-byte chunk into an array; chunks_exact guarantees the length.
    fn bytes<const N: usize>(c: &[u8]) -> [u8; N] {
        let mut b = [0u8; N];
        b.copy_from_slice(c);
        b
    }
    macro_rules! num {
        ($t:ty, $n:literal) => {
            chunks.map(|c| {
                if big {
                    <$t>::from_be_bytes(bytes::<$n>(c))
                } else {
                    <$t>::from_le_bytes(bytes::<$n>(c))
                }
            })
        };
    }
    Ok(match (dtype.kind, dtype.size) {
        (Kind::Float, 4) => Elements::Float(num!(f32, 4).map(f64::from).collect()),
        (Kind::Float, 8) => Elements::Float(num!(f64, 8).collect()),
        (Kind::Signed, 1) => Elements::Integer(num!(i8, 1).map(i64::from).collect()),
        (Kind::Signed, 2) => Elements::Integer(num!(i16, 2).map(i64::from).collect()),
        (Kind::Signed, 4) => Elements::Integer(num!(i32, 4).map(i64::from).collect()),
        (Kind::Signed, 8) => Elements::Integer(num!(i64, 8).collect()),
        (Kind::Unsigned, 1) => Elements::Integer(num!(u8, 1).map(i64::from).collect()),
        (Kind::Unsigned, 2) => Elements::Integer(num!(u16, 2).map(i64::from).collect()),
        (Kind::Unsigned, 4) => Elements::Integer(num!(u32, 4).map(i64::from).collect()),
        (Kind::Unsigned, 8) => Elements::Integer(
            num!(u64, 8)
                .enumerate()
                .map(|(i, v)| {
                    i64::try_from(v)
                        .map_err(|_| format!("uint64 value {v} at index {i} does not fit in int64"))
                })
                .collect::<std::result::Result<_, _>>()?,
        ),
        (Kind::Bool, 1) => Elements::Integer(data.iter().map(|&b| i64::from(b != 0)).collect()),
        // Dtype::parse only builds the combinations above.
        (kind, size) => return Err(format!("unsupported element type {kind:?} of {size} bytes")),
    })
}

/// Writes `matrix` as a version-1.0 `.npy` file of little-endian `float32`
/// (`<f4`, C order), atomically: a temporary file in the same directory is
/// written, synced and renamed over `path`.
pub fn write_f32(path: &Path, matrix: &ArrayView2<'_, f32>) -> Result<()> {
    let data: Vec<u8> = matrix.iter().flat_map(|v| v.to_le_bytes()).collect();
    write_npy(path, "<f4", &[matrix.nrows(), matrix.ncols()], &data)
}

/// Writes `labels` as a 1-D version-1.0 `.npy` file of little-endian `int64`
/// (`<i8`), atomically (see [`write_f32`]).
pub fn write_i64(path: &Path, labels: &[i64]) -> Result<()> {
    let data: Vec<u8> = labels.iter().flat_map(|v| v.to_le_bytes()).collect();
    write_npy(path, "<i8", &[labels.len()], &data)
}

/// Writes `data` as a version-1.0 `.npy` file of `uint8` (`|u1`, C order)
/// with the given `shape` (images as `(N, H, W, C)`, the CIFAR-10-C layout),
/// atomically (see [`write_f32`]). The shape must hold exactly `data.len()`
/// elements.
pub fn write_u8(path: &Path, shape: &[usize], data: &[u8]) -> Result<()> {
    if shape.iter().product::<usize>() != data.len() {
        return Err(format_error(
            path,
            format!(
                "shape {} does not hold {} bytes",
                shape_text(shape),
                data.len()
            ),
        ));
    }
    write_npy(path, "|u1", shape, data)
}

fn write_npy(path: &Path, descr: &str, shape: &[usize], data: &[u8]) -> Result<()> {
    let dict = format!(
        "{{'descr': '{descr}', 'fortran_order': False, 'shape': {}, }}",
        shape_text(shape)
    );
    // NumPy pads the header with spaces so that the data starts at a multiple of 64.
    let unpadded = MAGIC.len() + 2 + 2 + dict.len() + 1;
    let padding = (64 - unpadded % 64) % 64;
    let header_len = dict.len() + padding + 1;
    let header_len_u16 = u16::try_from(header_len).map_err(|_| {
        format_error(
            path,
            format!("shape {} makes the header too long", shape_text(shape)),
        )
    })?;
    let mut bytes = Vec::with_capacity(unpadded + padding + data.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&[1, 0]);
    bytes.extend_from_slice(&header_len_u16.to_le_bytes());
    bytes.extend_from_slice(dict.as_bytes());
    bytes.resize(bytes.len() + padding, b' ');
    bytes.push(b'\n');
    bytes.extend_from_slice(data);
    write_atomically(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    fn npy_bytes(major: u8, header: &str, data: &[u8]) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&[major, 0]);
        if major == 1 {
            b.extend_from_slice(&(header.len() as u16).to_le_bytes());
        } else {
            b.extend_from_slice(&(header.len() as u32).to_le_bytes());
        }
        b.extend_from_slice(header.as_bytes());
        b.extend_from_slice(data);
        b
    }

    fn parse(bytes: &[u8]) -> Result<LoadedArray> {
        read_from(bytes, bytes.len() as u64, Path::new("p.npy"))
    }

    fn err(bytes: &[u8]) -> String {
        parse(bytes).unwrap_err().to_string()
    }

    const F4_2X2: &str = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }\n";

    #[test]
    fn reads_versions_1_2_3() {
        let data: Vec<u8> = [1.0f32, 2.0, 3.0, 4.5]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        for major in [1, 2, 3] {
            let a = parse(&npy_bytes(major, F4_2X2, &data)).unwrap();
            assert_eq!(a.shape, vec![2, 2]);
            assert_eq!(a.elements, Elements::Float(vec![1.0, 2.0, 3.0, 4.5]));
        }
    }

    #[test]
    fn big_endian_and_integers() {
        let h = "{'descr': '>i2', 'fortran_order': False, 'shape': (3,), }\n";
        let data: Vec<u8> = [-2i16, 7, 300]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .collect();
        assert_eq!(
            parse(&npy_bytes(1, h, &data)).unwrap().elements,
            Elements::Integer(vec![-2, 7, 300])
        );
        let h = "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }\n";
        assert_eq!(
            parse(&npy_bytes(1, h, &[0, 1, 2])).unwrap().elements,
            Elements::Integer(vec![0, 1, 1])
        );
    }

    #[test]
    fn huge_claimed_shape_is_refused_without_allocating() {
        let h = "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000, 1000000), }\n";
        let e = err(&npy_bytes(1, h, &[0; 16]));
        assert!(
            e.contains("truncated") && e.contains("8000000000000"),
            "{e}"
        );
        let h = "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }\n";
        assert!(err(&npy_bytes(1, h, &[])).contains("too many elements"));
    }

    #[test]
    fn truncated_data_names_offsets() {
        let bytes = npy_bytes(1, F4_2X2, &[0; 12]);
        let e = err(&bytes);
        let header_end = 10 + F4_2X2.len();
        assert!(e.starts_with("p.npy: truncated"), "{e}");
        assert!(
            e.contains(&format!("{}", header_end + 16))
                && e.contains(&format!("{}", header_end + 12)),
            "{e}"
        );
    }

    #[test]
    fn refuses_bad_prefixes_and_trailing_bytes() {
        assert!(err(b"\x93NUMP").contains("truncated"));
        assert!(err(b"PK\x03\x04xxxxxxxxxxxx").contains("magic"));
        assert!(err(&npy_bytes(4, F4_2X2, &[0; 16])).contains("version 4.0"));
        let mut long = npy_bytes(1, F4_2X2, &[0; 16]);
        long.push(0);
        assert!(err(&long).contains("1 unexpected bytes"));
        let no_newline = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), } ";
        assert!(err(&npy_bytes(1, no_newline, &[0; 16])).contains("newline"));
        let mut huge_header = MAGIC.to_vec();
        huge_header.extend_from_slice(&[2, 0]);
        huge_header.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(err(&huge_header).contains("exceeds the limit"));
        let mut short_header = npy_bytes(1, F4_2X2, &[]);
        short_header.truncate(30);
        assert!(err(&short_header).contains("truncated"));
    }

    #[test]
    fn refuses_fortran_order_and_oversized_uint64() {
        let h = "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }\n";
        assert!(err(&npy_bytes(1, h, &[0; 16])).contains("Fortran"));
        let h = "{'descr': '<u8', 'fortran_order': False, 'shape': (1,), }\n";
        assert!(err(&npy_bytes(1, h, &u64::MAX.to_le_bytes())).contains("does not fit"));
    }

    #[test]
    fn write_read_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let m = array![[1.5f32, -2.0, 3.25], [0.0, f32::MAX, 1e-8]];
        let path = dir.path().join("m.npy");
        write_f32(&path, &m.view()).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(
            (bytes.len() - 24) % 64,
            0,
            "data starts on a 64-byte boundary"
        );
        let back = read(&path).unwrap().into_matrix(&path).unwrap();
        assert_eq!(back, m.mapv(f64::from));
        // A transposed (non-contiguous) view is written in its logical order.
        write_f32(&path, &m.t()).unwrap();
        assert_eq!(
            read(&path).unwrap().into_matrix(&path).unwrap(),
            m.t().mapv(f64::from)
        );

        let labels = [0i64, 9, -1, i64::MAX];
        let lpath = dir.path().join("l.npy");
        write_i64(&lpath, &labels).unwrap();
        assert_eq!(read(&lpath).unwrap().into_labels(&lpath).unwrap(), labels);
        let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 2, "no temporary files left behind");
    }

    #[test]
    fn a_directory_is_an_io_error_not_a_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let e = read(dir.path()).unwrap_err();
        assert!(matches!(e, crate::CalibError::Io { .. }), "{e:?}");
    }

    #[test]
    fn missing_file_is_an_io_error_naming_it() {
        let e = read(Path::new("/nonexistent/zz.npy")).unwrap_err();
        assert!(matches!(e, crate::CalibError::Io { .. }));
        assert!(e.to_string().contains("/nonexistent/zz.npy"));
    }

    proptest::proptest! {
        /// Arbitrary bytes never panic the reader.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let _ = parse(&bytes);
            let mut with_magic = npy_bytes(1, F4_2X2, &[]);
            with_magic.truncate(10);
            with_magic.extend_from_slice(&bytes);
            let _ = parse(&with_magic);
        }

        /// Any f32 matrix survives a write / read round trip bit for bit.
        #[test]
        fn f32_round_trip(rows in 1usize..5, cols in 1usize..5, seed in proptest::num::u32::ANY) {
            let m = ndarray::Array2::from_shape_fn((rows, cols), |(i, j)| {
                f32::from_bits(seed.wrapping_mul(2_654_435_761).wrapping_add((i * 7 + j) as u32) & 0x7f7f_ffff)
            });
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("r.npy");
            write_f32(&path, &m.view()).unwrap();
            let back = read(&path).unwrap().into_matrix(&path).unwrap();
            proptest::prop_assert_eq!(back, m.mapv(f64::from));
        }
    }
}
