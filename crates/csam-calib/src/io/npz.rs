//! `.npz` files: a zip archive of `.npy` members, as written by `numpy.savez`
//! (stored) and `numpy.savez_compressed` (deflate).
//!
//! Each member `NAME.npy` holds the array `NAME`. Members are read through the
//! strict [`super::npy`] reader with the member's declared uncompressed size as
//! the length bound, so a member cannot make the reader allocate more than the
//! archive declares and actually delivers.

use std::io::{BufReader, Read, Seek};
use std::path::Path;

use zip::ZipArchive;

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
    let mut archive = ZipArchive::new(reader)
        .map_err(|e| format_error(source, format!("not a valid .npz (zip) archive: {e}")))?;
    let names = array_names(&archive);
    let chosen = choose(&names, name, preferred, "the archive holds no .npy arrays")
        .map_err(|detail| format_error(source, detail))?;
    let entry = archive
        .by_name(&format!("{chosen}.npy"))
        .map_err(|e| format_error(source, format!("array '{chosen}': {e}")))?;
    let declared = entry.size();
    npy::read_from(entry, declared, source).map_err(|e| in_member(e, &chosen))
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
