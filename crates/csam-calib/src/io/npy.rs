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
//! claims 10^12 elements is refused, not allocated. It is the one `.npy`
//! reader of the workspace: predictions and labels are widened to `f64` /
//! `i64` ([`read`]); image arrays are read as the bytes they are
//! ([`read_u8`], one byte per pixel: the real CIFAR-10-C's 150 MB files stay
//! 150 MB); [`NpyInput`] lets a caller look at the header before any data is
//! read.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use half::f16;
use ndarray::ArrayView2;

use super::array::{format_error, regular_file, shape_text, Elements, LoadedArray};
use super::atomic::write_atomically;
use super::npy_error::{NpyError, NpyProblem};
use super::npy_header::{ByteOrder, Dtype, Header, Kind};
use crate::error::Result;

const MAGIC: &[u8; 6] = b"\x93NUMPY";
/// Longest header accepted. NumPy itself refuses headers over 10 000 bytes by
/// default; anything this reader supports needs well under 200.
const MAX_HEADER_LEN: u64 = 65_536;
/// Bytes reserved up front for the data of an input whose length is only
/// declared (an `.npz` member); beyond this the buffer grows as bytes arrive.
const MAX_PREALLOCATION: u64 = 64 << 20;

/// Reads the `.npy` file at `path`.
pub fn read(path: &Path) -> Result<LoadedArray> {
    Ok(NpyInput::open(path)?.read_elements()?)
}

/// Reads one `.npy` array from `reader`, which holds exactly `len` bytes
/// (the file length, or the uncompressed size of an `.npz` member). `source`
/// names the input in errors.
pub fn read_from(reader: impl Read, len: u64, source: &Path) -> Result<LoadedArray> {
    Ok(NpyInput::new(reader, len, source)?.read_elements()?)
}

/// Reads the `uint8` (`|u1`) `.npy` file at `path` without widening its
/// elements (see [`NpyInput::read_u8`]).
pub fn read_u8(path: &Path) -> std::result::Result<U8Array, NpyError> {
    NpyInput::open(path)?.read_u8()
}

/// A `uint8` array as stored: one byte per element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct U8Array {
    /// Dimensions, outermost first; the product equals `data.len()`.
    pub shape: Vec<usize>,
    /// The elements in C (row-major) order.
    pub data: Vec<u8>,
}

/// A `.npy` input whose prefix and header have been read and checked
/// (version, header syntax and keys, C order, a size that does not overflow),
/// and nothing of its data yet: a caller can refuse the array on its header
/// alone, then read the data widened ([`NpyInput::read_elements`]) or as bytes
/// ([`NpyInput::read_u8`]). Either read checks the input's length against the
/// shape before it allocates.
#[derive(Debug)]
pub struct NpyInput<R> {
    reader: R,
    source: PathBuf,
    /// Bytes the input holds.
    len: u64,
    header: Header,
    header_start: u64,
    data_start: u64,
    data_len: u64,
    /// Most bytes reserved up front for the data.
    preallocation: u64,
}

impl NpyInput<BufReader<File>> {
    /// Opens the `.npy` file at `path` and reads its header. Its length is
    /// the file's, so the data can be allocated in one piece.
    pub fn open(path: &Path) -> std::result::Result<Self, NpyError> {
        let (file, len) = regular_file(path).map_err(|e| refusal(path, NpyProblem::Io(e)))?;
        Self::start(BufReader::new(file), len, path, len)
    }
}

impl<R: Read> NpyInput<R> {
    /// Reads the header of the `.npy` array `reader` holds, exactly `len`
    /// bytes (the file length, or the uncompressed size of an `.npz`
    /// member); `source` names the input in errors.
    pub fn new(reader: R, len: u64, source: &Path) -> std::result::Result<Self, NpyError> {
        Self::start(reader, len, source, MAX_PREALLOCATION)
    }

    fn start(
        mut reader: R,
        len: u64,
        source: &Path,
        preallocation: u64,
    ) -> std::result::Result<Self, NpyError> {
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
        let invalid = |detail: String| {
            refusal(
                source,
                NpyProblem::Invalid {
                    offset: prefix.header_start,
                    detail,
                },
            )
        };
        let header = decode_header(&header_bytes, prefix.major).map_err(invalid)?;
        if header.fortran_order {
            return Err(invalid(
                "the array is stored in Fortran (column-major) order; save it in C order \
                 (numpy.ascontiguousarray) instead"
                    .into(),
            ));
        }
        let data_len = data_length(&header).map_err(invalid)?;
        Ok(NpyInput {
            reader,
            source: source.to_path_buf(),
            len,
            header,
            header_start: prefix.header_start,
            data_start: prefix.header_start + prefix.header_len,
            data_len,
            preallocation,
        })
    }

    /// The name of the input in errors (its path, for a file).
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// The header: element type, shape (C order is checked already).
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Byte offset of the first element.
    pub fn data_offset(&self) -> u64 {
        self.data_start
    }

    /// Reads the elements: float16 and float32 as `f32`, float64 as `f64`,
    /// integers and booleans as `i64`; a `uint64` above `i64::MAX` is refused.
    pub fn read_elements(self) -> std::result::Result<LoadedArray, NpyError> {
        let (dtype, data_start, source) = (self.header.dtype, self.data_start, self.source.clone());
        let (shape, data) = self.read_data()?;
        let elements = decode_elements(&data, dtype).map_err(|detail| {
            refusal(
                &source,
                NpyProblem::Invalid {
                    offset: data_start,
                    detail,
                },
            )
        })?;
        Ok(LoadedArray { shape, elements })
    }

    /// Reads a `uint8` (`|u1`) array as its bytes, with no copy beyond the
    /// one read: the fast path for image arrays. Any other element type is
    /// refused before the data is read.
    pub fn read_u8(self) -> std::result::Result<U8Array, NpyError> {
        let dtype = self.header.dtype;
        if (dtype.kind, dtype.size) != (Kind::Unsigned, 1) {
            return Err(refusal(
                &self.source,
                NpyProblem::Invalid {
                    offset: self.header_start,
                    detail: format!("expected uint8 ('|u1') elements, found dtype '{dtype}'"),
                },
            ));
        }
        let (shape, data) = self.read_data()?;
        Ok(U8Array { shape, data })
    }

    /// Checks the input's length against the shape, then reads the data.
    fn read_data(self) -> std::result::Result<(Vec<usize>, Vec<u8>), NpyError> {
        let NpyInput {
            reader,
            source,
            len,
            header,
            data_start,
            data_len,
            preallocation,
            ..
        } = self;
        check_file_length(&header, data_start, data_len, len).map_err(|p| refusal(&source, p))?;
        // The length was checked against the input above; beyond the
        // preallocation the buffer grows only as bytes actually arrive.
        let capacity = usize::try_from(data_len.min(preallocation)).unwrap_or(0);
        let mut data = Vec::with_capacity(capacity);
        reader
            .take(data_len)
            .read_to_end(&mut data)
            .map_err(|e| read_error(&source, e, &format!("the data from byte {data_start}")))?;
        let found = data_start + data.len() as u64;
        if found < data_start + data_len {
            return Err(refusal(
                &source,
                NpyProblem::Truncated {
                    expected: data_start + data_len,
                    found,
                    detail: format!(
                        "expected data up to byte {}, found only {found} bytes",
                        data_start + data_len
                    ),
                },
            ));
        }
        Ok((header.shape, data))
    }
}

fn refusal(source: &Path, problem: NpyProblem) -> NpyError {
    NpyError {
        path: source.to_path_buf(),
        problem,
    }
}

/// What the fixed-size start of a `.npy` file says.
struct Prefix {
    major: u8,
    /// Offset of the header text.
    header_start: u64,
    header_len: u64,
}

/// Reads and checks the magic string, the version and the header length.
fn read_prefix(
    reader: &mut impl Read,
    len: u64,
    source: &Path,
) -> std::result::Result<Prefix, NpyError> {
    let fail = |problem| refusal(source, problem);
    let invalid = |offset, detail| fail(NpyProblem::Invalid { offset, detail });
    let mut start = [0u8; 8];
    read_exact_or_truncated(reader, &mut start, 0, len, source)?;
    if &start[..6] != MAGIC {
        return Err(fail(NpyProblem::BadMagic {
            found: start[..6].to_vec(),
        }));
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
            return Err(invalid(
                6,
                format!("unsupported .npy format version {major}.{minor}"),
            ))
        }
    };
    if header_len > MAX_HEADER_LEN {
        return Err(invalid(
            8,
            format!("header length {header_len} exceeds the limit of {MAX_HEADER_LEN} bytes"),
        ));
    }
    let header_end = header_start + header_len;
    if header_end > len {
        return Err(fail(NpyProblem::Truncated {
            expected: header_end,
            found: len,
            detail: format!("the header should end at byte {header_end}, the file has {len} bytes"),
        }));
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
) -> std::result::Result<(), NpyProblem> {
    let expected_end = data_start
        .checked_add(data_len)
        .ok_or_else(|| NpyProblem::Invalid {
            offset: data_start,
            detail: "data size overflows".to_string(),
        })?;
    if expected_end > len {
        return Err(NpyProblem::Truncated {
            expected: expected_end,
            found: len,
            detail: format!(
                "shape {} needs {data_len} data bytes from byte {data_start}, so the file \
                 should have {expected_end} bytes, but it has {len}",
                shape_text(&header.shape)
            ),
        });
    }
    if expected_end < len {
        return Err(NpyProblem::TrailingBytes {
            end: expected_end,
            extra: len - expected_end,
        });
    }
    Ok(())
}

fn read_exact_or_truncated(
    reader: &mut impl Read,
    buf: &mut [u8],
    offset: u64,
    len: u64,
    source: &Path,
) -> std::result::Result<(), NpyError> {
    let end = offset + buf.len() as u64;
    if end > len {
        return Err(refusal(
            source,
            NpyProblem::Truncated {
                expected: end,
                found: len,
                detail: format!("expected at least {end} bytes, the file has {len}"),
            },
        ));
    }
    reader
        .read_exact(buf)
        .map_err(|e| read_error(source, e, &format!("bytes {offset}..{end}")))
}

/// A failed read: the input ended early or its container (an `.npz` member)
/// is corrupt, [`NpyProblem::Broken`]; anything else (a directory, a device
/// error) an I/O error.
fn read_error(source: &Path, error: std::io::Error, what: &str) -> NpyError {
    use std::io::ErrorKind;
    let problem = match error.kind() {
        ErrorKind::UnexpectedEof | ErrorKind::InvalidData => NpyProblem::Broken {
            what: what.to_string(),
            source: error,
        },
        _ => NpyProblem::Io(error),
    };
    refusal(source, problem)
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
        // float16 is widened to float32 once, exactly; float32 stays float32.
        (Kind::Float, 2) => {
            Elements::Float32(num!(u16, 2).map(|b| f16::from_bits(b).to_f32()).collect())
        }
        (Kind::Float, 4) => Elements::Float32(num!(f32, 4).collect()),
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
/// (`<f4`, C order), atomically (see [`super::write_atomically`]: the old
/// file or the whole new one, never a torn one).
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
    use crate::io::Scores;
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
            assert_eq!(a.elements, Elements::Float32(vec![1.0, 2.0, 3.0, 4.5]));
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
    fn integers_decode_in_both_byte_orders() {
        let decode = |descr: &str, bytes: &[u8]| {
            let h = format!(
                "{{'descr': '{descr}', 'fortran_order': False, 'shape': ({},), }}\n",
                bytes.len() / Dtype::parse(descr).unwrap().size
            );
            parse(&npy_bytes(1, &h, bytes)).unwrap().elements
        };
        assert_eq!(decode("|i1", &[0xff]), Elements::Integer(vec![-1]));
        assert_eq!(decode("|u1", &[0xff]), Elements::Integer(vec![255]));
        assert_eq!(
            decode("<i4", &[0xfe, 0xff, 0xff, 0xff]),
            Elements::Integer(vec![-2])
        );
        assert_eq!(
            decode("<i8", &[7, 0, 0, 0, 0, 0, 0, 0]),
            Elements::Integer(vec![7])
        );
        assert_eq!(decode("<i8", &[0xff; 8]), Elements::Integer(vec![-1]));
        assert_eq!(decode(">u2", &[1, 2]), Elements::Integer(vec![258]));
        assert_eq!(decode("<u2", &[1, 2]), Elements::Integer(vec![513]));
    }

    /// Reads `bytes` through the `uint8` path.
    fn parse_u8(bytes: &[u8]) -> std::result::Result<U8Array, NpyError> {
        NpyInput::new(bytes, bytes.len() as u64, Path::new("i.npy"))?.read_u8()
    }

    #[test]
    fn u8_arrays_are_read_as_their_bytes() {
        let h = "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 1, 3), }\n";
        let a = parse_u8(&npy_bytes(1, h, &[1, 2, 3, 250, 251, 255])).unwrap();
        assert_eq!(a.shape, vec![2, 1, 3]);
        assert_eq!(a.data, vec![1, 2, 3, 250, 251, 255]);
        // '<u1' is the same type as '|u1'.
        let h = "{'descr': '<u1', 'fortran_order': False, 'shape': (1,), }\n";
        assert_eq!(parse_u8(&npy_bytes(2, h, &[9])).unwrap().data, vec![9]);

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("images.npy");
        let pixels: Vec<u8> = (0..=255).collect();
        write_u8(&path, &[4, 8, 8], &pixels).unwrap();
        let back = read_u8(&path).unwrap();
        assert_eq!((back.shape, back.data), (vec![4, 8, 8], pixels));
    }

    #[test]
    fn u8_path_refuses_other_types_before_reading_data() {
        // Claims 10^12 int16 elements: the type is refused first, so nothing
        // is allocated and the error is about the type, not the size.
        for descr in ["<i2", "|b1", "|i1", "<f4"] {
            let h = format!(
                "{{'descr': '{descr}', 'fortran_order': False, 'shape': (1000000000000,), }}\n"
            );
            let e = parse_u8(&npy_bytes(1, &h, &[0; 4])).unwrap_err();
            match &e.problem {
                NpyProblem::Invalid { offset: 10, detail } => {
                    assert!(detail.contains(&format!("found dtype '{descr}'")), "{e}")
                }
                other => panic!("{descr}: expected Invalid at byte 10, got {other:?}"),
            }
        }
    }

    #[test]
    fn u8_path_checks_the_size_before_allocating() {
        let h = "{'descr': '|u1', 'fortran_order': False, 'shape': (4000000000000, 32, 32, 3), }\n";
        let bytes = npy_bytes(1, h, &[0; 64]);
        match parse_u8(&bytes).unwrap_err().problem {
            NpyProblem::Truncated {
                expected, found, ..
            } => assert_eq!(
                (expected, found),
                (
                    10 + h.len() as u64 + 4_000_000_000_000 * 3072,
                    bytes.len() as u64
                )
            ),
            other => panic!("expected Truncated, got {other:?}"),
        }
    }

    #[test]
    fn refusals_keep_their_offsets() {
        let problem = |bytes: &[u8]| {
            NpyInput::new(bytes, bytes.len() as u64, Path::new("p.npy"))
                .and_then(NpyInput::read_elements)
                .unwrap_err()
                .problem
        };
        let data_start = 10 + F4_2X2.len() as u64;
        match problem(b"NUMPY\x93\x01\x00xxxx") {
            NpyProblem::BadMagic { found } => assert_eq!(found, b"NUMPY\x93"),
            other => panic!("expected BadMagic, got {other:?}"),
        }
        match problem(&npy_bytes(1, F4_2X2, &[0; 13])) {
            NpyProblem::Truncated {
                expected, found, ..
            } => assert_eq!((expected, found), (data_start + 16, data_start + 13)),
            other => panic!("expected Truncated, got {other:?}"),
        }
        match problem(&npy_bytes(1, F4_2X2, &[0; 19])) {
            NpyProblem::TrailingBytes { end, extra } => {
                assert_eq!((end, extra), (data_start + 16, 3))
            }
            other => panic!("expected TrailingBytes, got {other:?}"),
        }
        let fortran = "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }\n";
        assert!(matches!(
            problem(&npy_bytes(3, fortran, &[0; 16])),
            NpyProblem::Invalid { offset: 12, .. }
        ));
        // The header and data offsets of an accepted input.
        let bytes = npy_bytes(2, F4_2X2, &[0; 16]);
        let input = NpyInput::new(&bytes[..], bytes.len() as u64, Path::new("p.npy")).unwrap();
        assert_eq!(input.data_offset(), 12 + F4_2X2.len() as u64);
        assert_eq!(input.header().shape, vec![2, 2]);
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
        let back = read(&path).unwrap().into_scores(&path).unwrap();
        assert_eq!(back, Scores::F32(m.clone()));
        // A transposed (non-contiguous) view is written in its logical order.
        write_f32(&path, &m.t()).unwrap();
        assert_eq!(
            read(&path).unwrap().into_scores(&path).unwrap(),
            Scores::F32(m.t().to_owned())
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
            let _ = parse_u8(&bytes);
            let mut with_magic = npy_bytes(1, F4_2X2, &[]);
            with_magic.truncate(10);
            with_magic.extend_from_slice(&bytes);
            let _ = parse(&with_magic);
            let _ = parse_u8(&with_magic);
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
            let back = read(&path).unwrap().into_scores(&path).unwrap();
            proptest::prop_assert_eq!(back, Scores::F32(m));
        }
    }
}
