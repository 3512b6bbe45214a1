//! `.npz` files: a zip archive of `.npy` members, as written by `numpy.savez`
//! (stored) and `numpy.savez_compressed` (deflate).
//!
//! Each member `NAME.npy` holds the array `NAME`. A member is bounded before
//! anything of it is decompressed, so a small archive cannot make the reader
//! inflate or allocate gigabytes it then refuses (a zip bomb):
//!
//! 1. its declared uncompressed size must be one its compressed bytes can
//!    hold: itself when stored, at most 1032 times when deflated (deflate's
//!    largest expansion: a 258-byte match coded in 2 bits);
//! 2. the strict [`super::npy`] reader takes that size as the member's length
//!    and checks it against the npy header (shape times element size plus the
//!    header) before it reads the data, reading no more than that
//!    (`Read::take`);
//! 3. the member must end there: one more byte is asked for, which a member
//!    that inflates past its declared size yields (refused), and whose end of
//!    stream makes the zip reader check the CRC.
//!
//! What stays possible is an archive that honestly holds a large array
//! (deflate compresses a zero-filled float32 matrix about 1000 to 1): it is
//! read as a large `.npy` would be. [`shape`] reads a member's header alone,
//! so that a caller checks the shape against what it needs (one label per
//! prediction row) before the member is inflated.

use std::io::{BufReader, Read, Seek};
use std::path::Path;

use zip::read::ZipFile;
use zip::{CompressionMethod, ZipArchive};

use super::array::{format_error, open_regular_file, LoadedArray};
use super::npy;
use crate::error::{CalibError, Result};

/// Reads one array from the `.npz` file at `path`.
///
/// `name` picks the array (with or without the `.npy` suffix). Without a name,
/// the archive's only array is taken; if there are several, the one whose name
/// is in `preferred` (e.g. `["logits", "probs"]`) is taken when exactly one
/// such name is present. Otherwise the error lists the available names.
pub fn read(path: &Path, name: Option<&str>, preferred: &[&str]) -> Result<LoadedArray> {
    let (file, _) = open_regular_file(path)?;
    read_from(BufReader::new(file), name, preferred, path)
}

/// Reads one array from an `.npz` archive held by `reader` (see [`read`]);
/// `source` names the input in errors.
pub fn read_from<R: Read + Seek>(
    reader: R,
    name: Option<&str>,
    preferred: &[&str],
    source: &Path,
) -> Result<LoadedArray> {
    with_member(
        reader,
        name,
        preferred,
        source,
        |entry, declared, chosen| {
            let array =
                npy::read_from(&mut *entry, declared, source).map_err(|e| in_member(e, chosen))?;
            check_ends(entry, declared).map_err(|detail| member_error(source, chosen, detail))?;
            Ok(array)
        },
    )
}

/// The shape of the array [`read`] would take from the `.npz` file at
/// `path`, from its npy header alone: no more of the member is inflated
/// than the header, so a caller can check the shape against what it needs
/// before an array of any size is read.
pub fn shape(path: &Path, name: Option<&str>, preferred: &[&str]) -> Result<Vec<usize>> {
    let (file, _) = open_regular_file(path)?;
    shape_from(BufReader::new(file), name, preferred, path)
}

/// [`shape`] of an `.npz` archive held by `reader`; `source` names the input
/// in errors.
pub fn shape_from<R: Read + Seek>(
    reader: R,
    name: Option<&str>,
    preferred: &[&str],
    source: &Path,
) -> Result<Vec<usize>> {
    with_member(
        reader,
        name,
        preferred,
        source,
        |entry, declared, chosen| {
            let input = npy::NpyInput::new(entry, declared, source)
                .map_err(|e| in_member(e.into(), chosen))?;
            Ok(input.header().shape.clone())
        },
    )
}

/// Opens the member [`read`] takes, bounded before anything of it is
/// decompressed, and hands `use_member` its reader, declared size and name.
fn with_member<R: Read + Seek, T>(
    reader: R,
    name: Option<&str>,
    preferred: &[&str],
    source: &Path,
    use_member: impl FnOnce(&mut ZipFile<'_, R>, u64, &str) -> Result<T>,
) -> Result<T> {
    let mut archive = ZipArchive::new(reader)
        .map_err(|e| format_error(source, format!("not a valid .npz (zip) archive: {e}")))?;
    let names = array_names(&archive);
    let chosen = choose(&names, name, preferred, "the archive holds no .npy arrays")
        .map_err(|detail| format_error(source, detail))?;
    let mut entry = archive
        .by_name(&format!("{chosen}.npy"))
        .map_err(|e| member_error(source, &chosen, e.to_string()))?;
    let declared = entry.size();
    check_deliverable(entry.compression(), entry.compressed_size(), declared)
        .map_err(|detail| member_error(source, &chosen, detail))?;
    use_member(&mut entry, declared, &chosen)
}

/// A format error of the member `chosen` of `source`.
fn member_error(source: &Path, chosen: &str, detail: String) -> CalibError {
    format_error(source, format!("array '{chosen}': {detail}"))
}

/// Deflate's largest expansion, output bytes per compressed byte: a match
/// copies at most 258 bytes and costs at least 2 bits (a length code and a
/// distance code of one bit each; RFC 1951 gives every used code at least
/// one bit).
const DEFLATE_MAX_EXPANSION: u64 = 1032;

/// Refuses a member that declares more uncompressed bytes than `compressed`
/// bytes of `method` can hold, before anything is decompressed. Methods
/// other than stored and deflate are left to the zip reader, which refuses
/// them (only deflate is built in).
fn check_deliverable(
    method: CompressionMethod,
    compressed: u64,
    declared: u64,
) -> Result<(), String> {
    let most = match method {
        CompressionMethod::Stored => compressed,
        CompressionMethod::Deflated => compressed.saturating_mul(DEFLATE_MAX_EXPANSION),
        _ => return Ok(()),
    };
    if declared > most {
        return Err(format!(
            "the member declares {declared} uncompressed bytes, more than its {compressed} \
             compressed bytes can hold ({method}: at most {most}); the archive is corrupt"
        ));
    }
    Ok(())
}

/// Refuses a member with bytes beyond the `declared` ones the npy reader
/// took; at the end, the zip reader checks the member's CRC. Reads at most
/// one byte.
fn check_ends<R: Read>(entry: &mut ZipFile<'_, R>, declared: u64) -> Result<(), String> {
    let mut probe = [0u8; 1];
    match entry.by_ref().take(1).read(&mut probe) {
        Ok(0) => Ok(()),
        Ok(_) => Err(format!(
            "the member holds more than the {declared} bytes it declares; the archive is corrupt"
        )),
        Err(e) => Err(format!("the member is corrupt: {e}")),
    }
}

/// Names of the arrays in the archive (member names without `.npy`), sorted.
fn array_names<R: Read + Seek>(archive: &ZipArchive<R>) -> Vec<String> {
    let mut names: Vec<String> = archive
        .file_names()
        .filter_map(|n| n.strip_suffix(".npy"))
        .map(str::to_string)
        .collect();
    names.sort();
    names
}

/// The array to read of `names` (sorted): `name` when given (a `.npy` suffix
/// ignored), else the only one, else the one that is in `preferred`. The
/// error lists the names, or says `empty` when there are none.
pub(super) fn choose(
    names: &[String],
    name: Option<&str>,
    preferred: &[&str],
    empty: &str,
) -> std::result::Result<String, String> {
    let listing = || {
        if names.is_empty() {
            empty.to_string()
        } else {
            format!("available arrays: {}", names.join(", "))
        }
    };
    if let Some(wanted) = name {
        let wanted = wanted.strip_suffix(".npy").unwrap_or(wanted);
        return names
            .iter()
            .find(|n| *n == wanted)
            .cloned()
            .ok_or_else(|| format!("no array named '{wanted}'; {}", listing()));
    }
    if let [only] = names {
        return Ok(only.clone());
    }
    let matches: Vec<&String> = names
        .iter()
        .filter(|n| preferred.contains(&n.as_str()))
        .collect();
    match matches[..] {
        [one] => Ok(one.clone()),
        _ => Err(format!(
            "cannot tell which array to read; name one ({})",
            listing()
        )),
    }
}

/// Prefixes a member's format error with the member name.
fn in_member(error: CalibError, member: &str) -> CalibError {
    match error {
        CalibError::Format { path, detail } => CalibError::Format {
            path,
            detail: format!("array '{member}': {detail}"),
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use zip::write::SimpleFileOptions;

    /// Builds an .npz of `(member name, npy bytes)` written with `method`.
    fn npz(members: &[(&str, Vec<u8>)], method: zip::CompressionMethod) -> tempfile::NamedTempFile {
        let file = tempfile::Builder::new().suffix(".npz").tempfile().unwrap();
        let mut zip = zip::ZipWriter::new(file.reopen().unwrap());
        for (name, bytes) in members {
            zip.start_file(
                *name,
                SimpleFileOptions::default().compression_method(method),
            )
            .unwrap();
            zip.write_all(bytes).unwrap();
        }
        zip.finish().unwrap();
        file
    }

    fn npy_of(values: &[f32], rows: usize) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.npy");
        let m =
            ndarray::Array2::from_shape_vec((rows, values.len() / rows), values.to_vec()).unwrap();
        npy::write_f32(&p, &m.view()).unwrap();
        std::fs::read(p).unwrap()
    }

    #[test]
    fn picks_by_name_only_or_preferred() {
        let f = npz(
            &[
                ("logits.npy", npy_of(&[1.0, 2.0], 1)),
                ("other.npy", npy_of(&[3.0], 1)),
            ],
            zip::CompressionMethod::Deflated,
        );
        let by_default = read(f.path(), None, &["logits", "probs"]).unwrap();
        assert_eq!(
            by_default.elements,
            super::super::Elements::Float32(vec![1.0, 2.0])
        );
        let by_name = read(f.path(), Some("other"), &[]).unwrap();
        assert_eq!(by_name.shape, vec![1, 1]);
        let e = read(f.path(), Some("probs"), &[]).unwrap_err().to_string();
        assert!(
            e.contains("no array named 'probs'") && e.contains("logits, other"),
            "{e}"
        );
        let e = read(f.path(), None, &["labels"]).unwrap_err().to_string();
        assert!(
            e.contains("cannot tell") && e.contains("logits, other"),
            "{e}"
        );

        let single = npz(
            &[("arr_0.npy", npy_of(&[5.0], 1))],
            zip::CompressionMethod::Stored,
        );
        assert_eq!(
            read(single.path(), None, &["logits"]).unwrap().shape,
            vec![1, 1]
        );
    }

    #[test]
    fn member_errors_name_the_member_and_archive() {
        let mut bad = npy_of(&[1.0, 2.0], 1);
        bad.truncate(bad.len() - 3);
        let f = npz(&[("logits.npy", bad)], zip::CompressionMethod::Deflated);
        let e = read(f.path(), None, &[]).unwrap_err().to_string();
        assert!(e.contains(".npz: array 'logits': truncated"), "{e}");
    }

    #[test]
    fn not_a_zip_and_empty_archive() {
        let mut f = tempfile::Builder::new().suffix(".npz").tempfile().unwrap();
        f.write_all(b"definitely not a zip file").unwrap();
        assert!(read(f.path(), None, &[])
            .unwrap_err()
            .to_string()
            .contains("not a valid .npz"));
        let empty = npz(&[], zip::CompressionMethod::Stored);
        assert!(read(empty.path(), None, &[])
            .unwrap_err()
            .to_string()
            .contains("no .npy arrays"));
    }

    /// An archive in memory whose reads are counted, to show how much of the
    /// compressed data a refusal cost.
    struct Counted {
        bytes: std::io::Cursor<Vec<u8>>,
        read: std::rc::Rc<std::cell::Cell<u64>>,
    }

    impl Read for Counted {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.bytes.read(buf)?;
            self.read.set(self.read.get() + n as u64);
            Ok(n)
        }
    }

    impl Seek for Counted {
        fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
            self.bytes.seek(to)
        }
    }

    /// One deflated member `logits.npy`: an npy header for `shape` of `descr`
    /// and `data`, then `zeros` zero bytes written in 1 MiB pieces (never held
    /// whole). Returns the archive, the member's compressed size and the
    /// length of the header and data.
    fn deflated_member(descr: &str, shape: &str, data: &[u8], zeros: usize) -> (Vec<u8>, u64, u32) {
        let header =
            format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}\n");
        let mut npy = b"\x93NUMPY\x01\x00".to_vec();
        npy.extend_from_slice(&(header.len() as u16).to_le_bytes());
        npy.extend_from_slice(header.as_bytes());
        npy.extend_from_slice(data);
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let options =
            SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        zip.start_file("logits.npy", options).unwrap();
        zip.write_all(&npy).unwrap();
        let piece = vec![0u8; 1 << 20];
        for start in (0..zeros).step_by(piece.len()) {
            zip.write_all(&piece[..piece.len().min(zeros - start)])
                .unwrap();
        }
        let bytes = zip.finish().unwrap().into_inner();
        let compressed = u64::from(u32::from_le_bytes(bytes[18..22].try_into().unwrap()));
        (bytes, compressed, npy.len() as u32)
    }

    /// Rewrites the one member's uncompressed size in its local header
    /// (offset 22) and central directory entry (offset 24 after `PK\x01\x02`).
    fn declare_size(mut bytes: Vec<u8>, size: u32) -> Vec<u8> {
        bytes[22..26].copy_from_slice(&size.to_le_bytes());
        let central = bytes.windows(4).rposition(|w| w == b"PK\x01\x02").unwrap();
        bytes[central + 24..central + 28].copy_from_slice(&size.to_le_bytes());
        bytes
    }

    /// The refusal of `bytes` and how many bytes of the archive it read.
    fn refusal(bytes: Vec<u8>) -> (String, u64) {
        let read = std::rc::Rc::new(std::cell::Cell::new(0));
        let archive = Counted {
            bytes: std::io::Cursor::new(bytes),
            read: read.clone(),
        };
        let e = read_from(archive, None, &[], Path::new("bomb.npz"))
            .unwrap_err()
            .to_string();
        assert!(!e.contains('\n'), "one line: {e}");
        (e, read.get())
    }

    #[test]
    fn a_member_longer_than_its_header_says_is_refused_before_its_data() {
        // The header says 2 x 2 float32 (16 bytes); the member declares and
        // holds 64 MiB more. The length check runs on the header alone.
        let (bytes, compressed, _) = deflated_member("<f4", "(2, 2)", &[0; 16], 64 << 20);
        let (e, read) = refusal(bytes);
        assert!(
            e.contains("array 'logits'") && e.contains("67108864 unexpected bytes"),
            "{e}"
        );
        assert!(
            read < compressed / 2,
            "read {read} of {compressed} compressed bytes"
        );
    }

    #[test]
    fn the_shape_is_read_from_the_header_alone() {
        // An honest member of 64 MiB of zero float32s: its shape comes from
        // the npy header, inflating a small part of the stream.
        let (bytes, compressed, _) = deflated_member("<f4", "(4194304, 4)", &[], 64 << 20);
        let read = std::rc::Rc::new(std::cell::Cell::new(0));
        let archive = Counted {
            bytes: std::io::Cursor::new(bytes),
            read: read.clone(),
        };
        let shape = shape_from(archive, None, &[], Path::new("zeros.npz")).unwrap();
        assert_eq!(shape, [4194304, 4]);
        assert!(
            read.get() < compressed / 2,
            "read {} of {compressed} compressed bytes",
            read.get()
        );
    }

    #[test]
    fn a_member_inflating_past_its_declared_size_is_refused() {
        // Declared (and the header): 2 x 2 float32. The deflate stream holds
        // 64 MiB more, which the reader must notice without inflating it.
        let (bytes, compressed, declared) = deflated_member("<f4", "(2, 2)", &[0; 16], 64 << 20);
        let (e, read) = refusal(declare_size(bytes, declared));
        assert!(
            e.contains(&format!("holds more than the {declared} bytes it declares")),
            "{e}"
        );
        assert!(
            read < compressed / 2,
            "read {read} of {compressed} compressed bytes"
        );
    }

    #[test]
    fn a_member_declaring_more_than_deflate_can_hold_is_refused_before_reading() {
        // Header and declared size agree on ~4 GB of uint8; the deflate stream
        // (8 MiB of zeros, ~8 KB) cannot hold a thousandth of it.
        let n: u32 = 4_000_000_000;
        let (bytes, compressed, header) = deflated_member("|u1", &format!("({n},)"), &[], 8 << 20);
        let declared = header + n;
        let (e, read) = refusal(declare_size(bytes, declared));
        assert!(
            e.contains(&format!("declares {declared} uncompressed bytes"))
                && e.contains(&format!("at most {}", compressed * DEFLATE_MAX_EXPANSION)),
            "{e}"
        );
        assert!(
            read < compressed / 2,
            "read {read} of {compressed} compressed bytes"
        );
    }

    #[test]
    fn deflates_own_extremes_pass_the_expansion_bound() {
        // 64 MiB of zeros at the best compression, the largest ratio deflate
        // reaches in practice, stays under the bound and reads back.
        let zeros = 64 << 20;
        let (bytes, compressed, _) = deflated_member("|u1", &format!("({zeros},)"), &[], zeros);
        assert!(compressed * DEFLATE_MAX_EXPANSION > zeros as u64);
        let array = read_from(std::io::Cursor::new(bytes), None, &[], Path::new("z.npz")).unwrap();
        assert_eq!(array.shape, vec![zeros]);
        assert_eq!(
            check_deliverable(zip::CompressionMethod::Stored, 10, 11).map_err(|_| ()),
            Err(())
        );
        assert!(check_deliverable(zip::CompressionMethod::Stored, 10, 10).is_ok());
    }

    proptest::proptest! {
        /// Arbitrary bytes, raw or as a member of a valid archive, never panic the reader.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            let source = Path::new("fuzz.npz");
            let _ = read_from(std::io::Cursor::new(&bytes), None, &[], source);
            let member = npz(&[("logits.npy", bytes)], zip::CompressionMethod::Deflated);
            let _ = read(member.path(), None, &["logits"]);
        }
    }
}
