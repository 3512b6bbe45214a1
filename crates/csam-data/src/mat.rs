//! A strict reader of the subset of MATLAB level-5 MAT-files that numeric
//! datasets use (SVHN's `train_32x32.mat`, `test_32x32.mat`).
//!
//! Format (MathWorks, "MAT-File Format", the level 5 chapter):
//! - A 128-byte header: 116 bytes of text starting `MATLAB 5.0 MAT-file`,
//!   8 bytes of subsystem offset (ignored), the version `0x0100` and the
//!   endian indicator `IM` (little-endian; `MI` is a big-endian file).
//! - Then data elements, each an 8-byte tag (`u32` type, `u32` byte count)
//!   followed by its bytes, or, in the *small element* format, a 4-byte tag
//!   (`u16` byte count in the high half, `u16` type in the low half) with up
//!   to 4 bytes of data after it in the same 8 bytes. Inside a matrix the
//!   elements are padded to a multiple of 8 bytes; top-level elements are
//!   not (what MATLAB and `scipy.io.savemat` write, and what
//!   `scipy.io.loadmat` reads).
//! - A top-level element is `miMATRIX` (type 14) or `miCOMPRESSED` (15): a
//!   zlib stream holding exactly one `miMATRIX` element.
//! - A numeric `miMATRIX` holds, in order: the array flags (`miUINT32`,
//!   8 bytes: class in the low byte of the first word, the complex flag
//!   `0x0800`), the dimensions (`miINT32`, at least 2, column-major order),
//!   the name (`miINT8`) and the real part.
//!
//! Read here: classes `uint8` (stored as `miUINT8`) and `double` (stored as
//! `miDOUBLE` or, as MATLAB does for integer values, `miUINT8`), real
//! arrays only. Matrices of other classes (cells, structs, chars, sparse,
//! other numbers) are skipped whole; complex ones are refused.
//! Little-endian only: a big-endian file is refused, and so is a v7.3 file
//! (HDF5 inside, header version `0x0200`), which needs an HDF5 reader;
//! `scipy.io.savemat` and MATLAB's `save -v7` write level 5.
//!
//! Sizes from the file are checked against the bytes the file (or the
//! compressed element, at most 1032 times its size) can hold before anything
//! is allocated; every error names the file and the byte offset, offsets
//! inside a compressed element counting its decompressed bytes (the element
//! is named by its own offset in the file).

use std::path::PathBuf;

use super::error::{DataError, Result};
use super::stream::ByteStream;

/// Bytes of the header.
const HEADER_BYTES: usize = 128;
/// The level 5 version word, as stored little-endian.
const VERSION_5: u16 = 0x0100;
/// The version word of a v7.3 (HDF5) file.
const VERSION_73: u16 = 0x0200;

// Data types of the element tags.
const MI_INT8: u32 = 1;
const MI_UINT8: u32 = 2;
const MI_INT32: u32 = 5;
const MI_UINT32: u32 = 6;
const MI_DOUBLE: u32 = 9;
const MI_MATRIX: u32 = 14;
const MI_COMPRESSED: u32 = 15;

// Array classes of the array flags.
const MX_DOUBLE: u8 = 6;
const MX_UINT8: u8 = 9;
/// The complex bit of the first array flags word.
const COMPLEX_FLAG: u32 = 0x0800;

/// The numeric classes read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Uint8,
    Double,
}

/// The values of an array as stored.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Values {
    U8(Vec<u8>),
    F64(Vec<f64>),
}

/// One numeric array of the file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MatArray {
    pub name: String,
    /// MATLAB's dimensions; the values are in column-major order (the first
    /// dimension varies fastest).
    pub dims: Vec<usize>,
    pub values: Values,
    /// The file (or compressed element) holding the values, and the byte
    /// offset of the first value there.
    pub path: PathBuf,
    pub first_value: u64,
}

impl MatArray {
    /// Bytes of one stored value (1 or 8).
    pub(crate) fn value_bytes(&self) -> u64 {
        match self.values {
            Values::U8(_) => 1,
            Values::F64(_) => 8,
        }
    }
}

/// Reads every numeric array of a level 5 MAT-file, in file order (see the
/// module doc for what is read, skipped and refused).
pub(crate) fn read(mut stream: ByteStream<'_>) -> Result<Vec<MatArray>> {
    check_header(&mut stream)?;
    let mut arrays = Vec::new();
    while let Some(tag) = stream.read_array_or_end::<8>()? {
        let start = stream.offset() - 8;
        let (data_type, len) = (word(&tag[..4]), word(&tag[4..]));
        if data_type >> 16 != 0 {
            return Err(stream.bad_header(
                start,
                "a top-level element in the small format (it holds at most 4 bytes, never a matrix)",
            ));
        }
        let len = u64::from(len);
        match data_type {
            MI_MATRIX => {
                let end = stream.offset() + len;
                arrays.extend(read_matrix(&mut stream, end)?);
            }
            MI_COMPRESSED => {
                let compressed = stream.read_vec(len, "a compressed element")?;
                let name = PathBuf::from(format!(
                    "{} (compressed element at byte {start})",
                    stream.path().display()
                ));
                arrays.extend(read_compressed(ByteStream::zlib(&name, &compressed))?);
            }
            other => {
                return Err(stream.bad_header(
                    start,
                    format!(
                        "top-level element of type {other}: expected a matrix ({MI_MATRIX}) \
                         or a compressed element ({MI_COMPRESSED})"
                    ),
                ))
            }
        }
    }
    Ok(arrays)
}

/// The header: the text, the version and the endian indicator.
fn check_header(stream: &mut ByteStream<'_>) -> Result<()> {
    let header = stream.read_array::<HEADER_BYTES>()?;
    let text = &header[..116];
    if text.starts_with(b"MATLAB 7.3") {
        return Err(v73(stream));
    }
    if !text.starts_with(b"MATLAB 5.0 MAT-file") {
        return Err(DataError::BadMagic {
            path: stream.path().to_path_buf(),
            offset: 0,
            expected: "the text 'MATLAB 5.0 MAT-file' of a level 5 MAT-file".into(),
            found: format!("{:?}", String::from_utf8_lossy(&text[..19])),
        });
    }
    match &header[126..] {
        b"IM" => {}
        b"MI" => {
            return Err(stream.bad_header(
                126,
                "a big-endian MAT-file (endian indicator 'MI'); only little-endian files \
                 are read: load and save it again with scipy.io.savemat",
            ))
        }
        found => {
            return Err(DataError::BadMagic {
                path: stream.path().to_path_buf(),
                offset: 126,
                expected: "the endian indicator 'IM'".into(),
                found: format!("{found:02x?}"),
            })
        }
    }
    match u16::from_le_bytes([header[124], header[125]]) {
        VERSION_5 => Ok(()),
        VERSION_73 => Err(v73(stream)),
        other => Err(stream.bad_header(
            124,
            format!("version {other:#06x}: expected {VERSION_5:#06x} (level 5)"),
        )),
    }
}

fn v73(stream: &ByteStream<'_>) -> DataError {
    stream.bad_header(
        0,
        "a MAT-file v7.3, which is HDF5 inside: only level 5 files (MATLAB's save -v7, \
         scipy.io.savemat) are read; save it again with save -v7",
    )
}

/// The one matrix of a compressed element, which must end with it.
fn read_compressed(mut stream: ByteStream<'_>) -> Result<Option<MatArray>> {
    let tag = stream.read_array::<8>()?;
    let (data_type, len) = (word(&tag[..4]), u64::from(word(&tag[4..])));
    if data_type != MI_MATRIX {
        return Err(stream.bad_header(
            0,
            format!("a compressed element holds type {data_type}: expected a matrix ({MI_MATRIX})"),
        ));
    }
    let array = read_matrix(&mut stream, 8 + len)?;
    stream.finish()?;
    Ok(array)
}

/// The contents of a matrix element that ends at byte `end`: its array, or
/// None for a class that is skipped.
fn read_matrix(stream: &mut ByteStream<'_>, end: u64) -> Result<Option<MatArray>> {
    if stream.offset() == end {
        // An empty matrix element (MATLAB writes `[]` so in some places).
        return Ok(None);
    }
    let flags_at = stream.offset();
    let flags = read_element(stream, end, MI_UINT32, "array flags")?;
    if flags.len() != 8 {
        return Err(stream.bad_header(
            flags_at,
            format!("array flags of {} bytes: expected 8", flags.len()),
        ));
    }
    let flags_word = word(&flags[..4]);
    let class = match (flags_word & 0xff) as u8 {
        MX_UINT8 => Class::Uint8,
        MX_DOUBLE => Class::Double,
        _ => return skip_to(stream, end).map(|()| None),
    };
    if flags_word & COMPLEX_FLAG != 0 {
        return Err(stream.bad_header(stream.offset(), "a complex array: only real ones are read"));
    }
    let dims_at = stream.offset();
    let dims_bytes = read_element(stream, end, MI_INT32, "dimensions")?;
    let dims = dimensions(stream, dims_at, &dims_bytes)?;
    let name_at = stream.offset();
    let name = read_element(stream, end, MI_INT8, "array name")?;
    let name = String::from_utf8(name)
        .map_err(|_| stream.bad_header(name_at, "an array name that is not UTF-8 text"))?;
    let count = dims
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(|| stream.bad_header(dims_at, format!("dimensions {dims:?} overflow")))?;
    let values_at = stream.offset();
    let tag = read_tag(stream, end)?;
    let (data_type, len) = (tag.data_type, tag.len);
    let first_value = stream.offset();
    let value_bytes = match (class, data_type) {
        (_, MI_UINT8) => 1,
        (Class::Double, MI_DOUBLE) => 8,
        _ => {
            return Err(stream.bad_header(
                values_at,
                format!(
                    "values of type {data_type} in a {class:?} array: expected {MI_UINT8} \
                     (uint8){}",
                    if class == Class::Double {
                        " or 9 (double)"
                    } else {
                        ""
                    }
                ),
            ))
        }
    };
    if Some(len) != (count as u64).checked_mul(value_bytes) {
        return Err(stream.bad_header(
            values_at,
            format!(
                "{len} bytes of values for dimensions {dims:?}: expected {count} values of \
                 {value_bytes} bytes"
            ),
        ));
    }
    let bytes = read_data(stream, tag, end, "array values")?;
    let values = match value_bytes {
        1 => Values::U8(bytes),
        _ => Values::F64(
            bytes
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().expect("chunks of 8 bytes")))
                .collect(),
        ),
    };
    if stream.offset() != end {
        return Err(stream.bad_header(
            stream.offset(),
            format!(
                "{} bytes after the values of array '{name}', which should end the matrix",
                end.saturating_sub(stream.offset())
            ),
        ));
    }
    Ok(Some(MatArray {
        name,
        dims,
        values,
        path: stream.path().to_path_buf(),
        first_value,
    }))
}

/// Dimensions: at least two, none negative.
fn dimensions(stream: &ByteStream<'_>, at: u64, bytes: &[u8]) -> Result<Vec<usize>> {
    if bytes.len() < 8 || !bytes.len().is_multiple_of(4) {
        return Err(stream.bad_header(
            at,
            format!(
                "dimensions of {} bytes: expected at least two 4-byte integers",
                bytes.len()
            ),
        ));
    }
    bytes
        .chunks_exact(4)
        .map(|c| {
            let d = i32::from_le_bytes(c.try_into().expect("chunks of 4 bytes"));
            usize::try_from(d)
                .map_err(|_| stream.bad_header(at, format!("a negative dimension, {d}")))
        })
        .collect()
}

/// A sub-element tag.
#[derive(Debug, Clone, Copy)]
struct Tag {
    data_type: u32,
    len: u64,
    /// The small format: the data follows in the same 8 bytes.
    small: bool,
}

/// A sub-element of type `expected` that must end by byte `end`.
fn read_element(
    stream: &mut ByteStream<'_>,
    end: u64,
    expected: u32,
    what: &str,
) -> Result<Vec<u8>> {
    let at = stream.offset();
    let tag = read_tag(stream, end)?;
    if tag.data_type != expected {
        return Err(stream.bad_header(
            at,
            format!("{what} of type {}: expected type {expected}", tag.data_type),
        ));
    }
    read_data(stream, tag, end, what)
}

/// A sub-element tag, which must leave room for its 8 bytes before `end`.
fn read_tag(stream: &mut ByteStream<'_>, end: u64) -> Result<Tag> {
    let at = stream.offset();
    if end.saturating_sub(at) < 8 {
        return Err(stream.bad_header(at, "the matrix ends inside an element tag"));
    }
    let first = word(&stream.read_array::<4>()?);
    if first >> 16 != 0 {
        let len = first >> 16;
        if len > 4 {
            return Err(stream.bad_header(
                at,
                format!("a small element of {len} bytes: at most 4 fit in its tag"),
            ));
        }
        return Ok(Tag {
            data_type: first & 0xffff,
            len: u64::from(len),
            small: true,
        });
    }
    let len = word(&stream.read_array::<4>()?);
    Ok(Tag {
        data_type: first,
        len: u64::from(len),
        small: false,
    })
}

/// The data of the element whose tag was just read, and its padding: to the
/// end of the tag's 8 bytes for a small element, else to a multiple of 8.
fn read_data(stream: &mut ByteStream<'_>, tag: Tag, end: u64, what: &str) -> Result<Vec<u8>> {
    let at = stream.offset();
    let padded = if tag.small {
        4
    } else {
        tag.len.div_ceil(8) * 8
    };
    if padded > end.saturating_sub(at) {
        return Err(stream.bad_header(
            at,
            format!(
                "{what} of {} bytes overruns its matrix, which ends at byte {end}",
                tag.len
            ),
        ));
    }
    let data = stream.read_vec(tag.len, what)?;
    stream.read_vec(padded - tag.len, "padding")?;
    Ok(data)
}

/// Skips the rest of a matrix of a class not read.
fn skip_to(stream: &mut ByteStream<'_>, end: u64) -> Result<()> {
    let len = end.saturating_sub(stream.offset());
    stream
        .read_vec(len, "a matrix of a class not read")
        .map(drop)
}

/// A little-endian `u32` of 4 bytes.
fn word(bytes: &[u8]) -> u32 {
    u32::from_le_bytes(bytes.try_into().expect("4 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::path::Path;

    /// A level 5 header as `scipy.io.savemat` writes it.
    fn header() -> Vec<u8> {
        let mut header = b"MATLAB 5.0 MAT-file Platform: posix".to_vec();
        header.resize(124, b' ');
        header.extend([0x00, 0x01, b'I', b'M']);
        header
    }

    /// An element: tag, data, zero padding to 8 bytes (`small` packs up to 4
    /// bytes into the tag).
    fn element(data_type: u32, data: &[u8], small: bool) -> Vec<u8> {
        let len = data.len() as u32;
        let mut out = Vec::new();
        if small {
            out.extend(((len << 16) | data_type).to_le_bytes());
            out.extend(data);
            out.resize(8, 0);
        } else {
            out.extend(data_type.to_le_bytes());
            out.extend(len.to_le_bytes());
            out.extend(data);
            out.resize(8 + data.len().div_ceil(8) * 8, 0);
        }
        out
    }

    /// A real matrix of `class` (with `flags` above the class byte).
    fn matrix(class: u8, flags: u32, dims: &[i32], name: &str, values: (u32, &[u8])) -> Vec<u8> {
        let mut flag_words = (u32::from(class) | flags).to_le_bytes().to_vec();
        flag_words.extend([0; 4]);
        let dims: Vec<u8> = dims.iter().flat_map(|d| d.to_le_bytes()).collect();
        let mut content = element(MI_UINT32, &flag_words, false);
        content.extend(element(MI_INT32, &dims, false));
        content.extend(element(MI_INT8, name.as_bytes(), name.len() <= 4));
        content.extend(element(values.0, values.1, false));
        element(MI_MATRIX, &content, false)
    }

    fn compressed(contents: &[u8]) -> Vec<u8> {
        let mut encoder =
            flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(contents).unwrap();
        let zlib = encoder.finish().unwrap();
        let mut out = MI_COMPRESSED.to_le_bytes().to_vec();
        out.extend((zlib.len() as u32).to_le_bytes());
        out.extend(zlib);
        out
    }

    fn parse(bytes: &[u8]) -> Result<Vec<MatArray>> {
        read(ByteStream::from_bytes(Path::new("x.mat"), bytes))
    }

    #[test]
    fn reads_uint8_and_double_and_skips_other_classes() {
        let doubles: Vec<u8> = [1.5f64, -2.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let mut file = header();
        file.extend(matrix(4, 0, &[1, 2], "s", (MI_UINT8, b"hi"))); // char: skipped
        file.extend(matrix(MX_UINT8, 0, &[2, 1], "X", (MI_UINT8, &[7, 9])));
        file.extend(compressed(&matrix(
            MX_DOUBLE,
            0,
            &[1, 2],
            "labels",
            (MI_DOUBLE, &doubles),
        )));
        let arrays = parse(&file).unwrap();
        assert_eq!(arrays.len(), 2);
        assert_eq!(
            (arrays[0].name.as_str(), &arrays[0].dims, &arrays[0].values),
            ("X", &vec![2, 1], &Values::U8(vec![7, 9]))
        );
        // The matrix of "s" takes 8 + 56 bytes; X's values follow its 48-byte
        // head: 128 + 64 + 8 (tag) + 40 (flags, dims, name) + 8 (values tag).
        assert_eq!(arrays[0].first_value, 128 + 64 + 56);
        assert_eq!(arrays[1].name, "labels", "a name of more than 4 bytes");
        assert_eq!(arrays[1].values, Values::F64(vec![1.5, -2.0]));
        assert!(arrays[1]
            .path
            .to_string_lossy()
            .contains("compressed element at byte"));
    }

    #[test]
    fn complex_arrays_and_wrong_value_types_are_refused() {
        let mut file = header();
        file.extend(matrix(
            MX_DOUBLE,
            COMPLEX_FLAG,
            &[1, 1],
            "z",
            (MI_DOUBLE, &[0; 8]),
        ));
        let error = parse(&file).unwrap_err().to_string();
        assert!(error.contains("complex"), "{error}");
        let mut file = header();
        file.extend(matrix(MX_UINT8, 0, &[1, 1], "X", (MI_DOUBLE, &[0; 8])));
        let error = parse(&file).unwrap_err().to_string();
        assert!(error.contains("values of type 9"), "{error}");
    }

    #[test]
    fn a_compressed_element_holds_exactly_one_matrix() {
        let one = matrix(MX_UINT8, 0, &[1, 1], "X", (MI_UINT8, &[1]));
        let mut file = header();
        file.extend(compressed(&[one.clone(), vec![0; 8]].concat()));
        assert!(matches!(
            parse(&file),
            Err(DataError::TrailingBytes {
                extra: 8,
                decompressed: true,
                ..
            })
        ));
        let mut file = header();
        file.extend(compressed(&element(MI_UINT8, &[1, 2, 3], false)));
        let error = parse(&file).unwrap_err().to_string();
        assert!(error.contains("holds type 2"), "{error}");
    }

    #[test]
    fn sizes_beyond_what_the_data_can_hold_are_refused_before_allocating() {
        // Values claiming 2^31 bytes inside a compressed element of a few
        // dozen bytes: beyond 1032 times its size.
        let mut content = element(MI_UINT32, &[MX_UINT8, 0, 0, 0, 0, 0, 0, 0], false);
        content.extend(element(MI_INT32, &[0, 0, 0, 0x40, 2, 0, 0, 0], false));
        content.extend(element(MI_INT8, b"X", true));
        content.extend(MI_UINT8.to_le_bytes());
        content.extend(0x8000_0000u32.to_le_bytes());
        let mut tag = MI_MATRIX.to_le_bytes().to_vec();
        tag.extend(u32::MAX.to_le_bytes());
        let mut file = header();
        file.extend(compressed(&[tag, content].concat()));
        match parse(&file) {
            Err(DataError::BadHeader { reason, .. }) => {
                assert!(reason.contains("1032"), "{reason}")
            }
            other => panic!("expected BadHeader, got {other:?}"),
        }
        // A top-level compressed element longer than the file.
        let mut file = header();
        file.extend(MI_COMPRESSED.to_le_bytes());
        file.extend(u32::MAX.to_le_bytes());
        assert!(matches!(parse(&file), Err(DataError::Truncated { .. })));
    }
}
