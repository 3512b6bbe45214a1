//! Sequential reading of a (possibly gzipped) file with byte-offset
//! bookkeeping, shared by the binary-format loaders so that every error can
//! name the file and the offset.
//!
//! Gzip is recognised by its magic bytes `1f 8b`, not by the file name.
//! Offsets then count bytes of the decompressed stream. A zlib stream
//! embedded in a file (a MAT-file's `miCOMPRESSED` element) is read through
//! [`ByteStream::zlib`] the same way.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use flate2::read::{GzDecoder, ZlibDecoder};

use super::error::{DataError, Result};

/// DEFLATE cannot expand data by more than about 1032:1, so a gzipped file of
/// `len` bytes decompresses to at most `len * MAX_DEFLATE_RATIO` bytes. Used to
/// refuse a header that claims more data than the file can possibly hold
/// before any allocation.
const MAX_DEFLATE_RATIO: u64 = 1032;

/// Allocation granted up front to a read whose length comes from a header;
/// beyond this the buffer grows only as real bytes arrive.
const MAX_PREALLOCATION: u64 = 64 << 20;

/// A byte stream over one file (or embedded file) that knows where it is.
pub(crate) struct ByteStream<'a> {
    path: PathBuf,
    inner: Box<dyn Read + 'a>,
    offset: u64,
    decompressed: bool,
    /// The compression format, named in errors of a broken stream.
    format: &'static str,
    /// Upper bound on the bytes the whole stream can hold.
    max_len: u64,
}

impl<'a> ByteStream<'a> {
    /// Opens `path`, transparently decompressing gzip.
    pub(crate) fn open(path: &Path) -> Result<ByteStream<'static>> {
        let file = File::open(path).map_err(|e| DataError::io(path, e))?;
        let len = file.metadata().map_err(|e| DataError::io(path, e))?.len();
        let mut reader = BufReader::new(file);
        // Peeks without consuming; a file read fills the buffer unless at EOF.
        let is_gzip = reader
            .fill_buf()
            .map_err(|e| DataError::io(path, e))?
            .starts_with(&[0x1f, 0x8b]);
        Ok(if is_gzip {
            ByteStream::new(path, Box::new(GzDecoder::new(reader)), Some("gzip"), len)
        } else {
            ByteStream::new(path, Box::new(reader), None, len)
        })
    }

    /// A stream over bytes already in memory (embedded bundled files);
    /// `path` is the name used in error messages.
    pub(crate) fn from_bytes(path: &Path, bytes: &'a [u8]) -> ByteStream<'a> {
        let len = bytes.len() as u64;
        if bytes.starts_with(&[0x1f, 0x8b]) {
            ByteStream::new(path, Box::new(GzDecoder::new(bytes)), Some("gzip"), len)
        } else {
            ByteStream::new(path, Box::new(bytes), None, len)
        }
    }

    /// A stream over the zlib-decompressed contents of `compressed`; `path`
    /// names the compressed data in error messages, offsets count
    /// decompressed bytes.
    pub(crate) fn zlib(path: &Path, compressed: &'a [u8]) -> ByteStream<'a> {
        let len = compressed.len() as u64;
        ByteStream::new(
            path,
            Box::new(ZlibDecoder::new(compressed)),
            Some("zlib"),
            len,
        )
    }

    fn new(
        path: &Path,
        inner: Box<dyn Read + 'a>,
        format: Option<&'static str>,
        stored_len: u64,
    ) -> Self {
        let decompressed = format.is_some();
        let max_len = if decompressed {
            stored_len.saturating_mul(MAX_DEFLATE_RATIO)
        } else {
            stored_len
        };
        ByteStream {
            path: path.to_path_buf(),
            inner,
            offset: 0,
            decompressed,
            format: format.unwrap_or("plain"),
            max_len,
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes consumed so far (decompressed bytes for gzip).
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// Reads exactly `N` bytes, or fails with `Truncated`.
    pub(crate) fn read_array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let bytes = self.read_vec(N as u64, "header")?;
        // Invariant: read_vec returns exactly the requested length or an error.
        Ok(bytes.try_into().expect("read_vec returned N bytes"))
    }

    /// Reads `N` bytes, or None at the end of the stream (for formats made
    /// of records up to the end, like a MAT-file's data elements); a stream
    /// that ends within the `N` bytes is `Truncated`.
    pub(crate) fn read_array_or_end<const N: usize>(&mut self) -> Result<Option<[u8; N]>> {
        let mut buffer = Vec::with_capacity(N);
        let start = self.offset;
        let result = (&mut self.inner).take(N as u64).read_to_end(&mut buffer);
        self.offset += buffer.len() as u64;
        result.map_err(|e| self.read_error(e))?;
        match buffer.len() {
            0 => Ok(None),
            // Invariant: the length is N here.
            n if n == N => Ok(Some(buffer.try_into().expect("N bytes"))),
            _ => Err(DataError::Truncated {
                path: self.path.clone(),
                offset: self.offset,
                expected: start + N as u64,
                found: self.offset,
                decompressed: self.decompressed,
            }),
        }
    }

    /// Reads exactly `len` bytes whose count a header claimed. A claim larger
    /// than the file can hold is refused before allocating: `Truncated` for
    /// a plain file (its length is known), `BadHeader` for gzip (beyond the
    /// largest possible expansion). A gzip stream that ends early also gives
    /// `Truncated`.
    pub(crate) fn read_vec(&mut self, len: u64, what: &str) -> Result<Vec<u8>> {
        let available = self.max_len.saturating_sub(self.offset);
        if len > available && !self.decompressed {
            // A plain file's length is known: it ends before the claimed data.
            return Err(DataError::Truncated {
                path: self.path.clone(),
                offset: self.max_len,
                expected: self.offset.saturating_add(len),
                found: self.max_len,
                decompressed: false,
            });
        }
        if len > available {
            return Err(DataError::BadHeader {
                path: self.path.clone(),
                offset: self.offset,
                reason: format!(
                    "{what} needs {len} bytes from here but the file can hold at most \
                     {available} ({} expands at most 1032:1)",
                    self.format
                ),
            });
        }
        let capacity = usize::try_from(len.min(MAX_PREALLOCATION)).unwrap_or(0);
        let mut buffer = Vec::with_capacity(capacity);
        let start = self.offset;
        let result = (&mut self.inner).take(len).read_to_end(&mut buffer);
        self.offset += buffer.len() as u64;
        result.map_err(|e| self.read_error(e))?;
        if (buffer.len() as u64) < len {
            return Err(DataError::Truncated {
                path: self.path.clone(),
                offset: self.offset,
                expected: start + len,
                found: self.offset,
                decompressed: self.decompressed,
            });
        }
        Ok(buffer)
    }

    /// Reads everything left (for formats without a length header).
    pub(crate) fn read_to_end(&mut self) -> Result<Vec<u8>> {
        let mut buffer = Vec::new();
        let result = self.inner.read_to_end(&mut buffer);
        self.offset += buffer.len() as u64;
        result.map_err(|e| self.read_error(e))?;
        Ok(buffer)
    }

    /// A failed read at the current offset: a broken gzip or zlib stream
    /// (truncated or corrupt) when decompressing, else an I/O error.
    fn read_error(&self, source: std::io::Error) -> DataError {
        if self.decompressed {
            DataError::Compressed {
                path: self.path.clone(),
                offset: self.offset,
                format: self.format,
                source,
            }
        } else {
            DataError::io(&self.path, source)
        }
    }

    /// Fails with `TrailingBytes` unless the stream is exhausted.
    pub(crate) fn finish(mut self) -> Result<()> {
        let extra =
            std::io::copy(&mut self.inner, &mut std::io::sink()).map_err(|e| self.read_error(e))?;
        if extra > 0 {
            return Err(DataError::TrailingBytes {
                path: self.path.clone(),
                offset: self.offset,
                extra,
                decompressed: self.decompressed,
            });
        }
        Ok(())
    }

    /// A `Truncated` error for a record layout: `found` bytes where the
    /// layout needs `expected`.
    pub(crate) fn truncated(&self, expected: u64, found: u64) -> DataError {
        DataError::Truncated {
            path: self.path.clone(),
            offset: found,
            expected,
            found,
            decompressed: self.decompressed,
        }
    }

    /// A `BadHeader` error at `offset`.
    pub(crate) fn bad_header(&self, offset: u64, reason: impl Into<String>) -> DataError {
        DataError::BadHeader {
            path: self.path.clone(),
            offset,
            reason: reason.into(),
        }
    }
}

/// `dir/name.gz` if it exists, else `dir/name` if it exists, else `None`.
pub(crate) fn find_optionally_gzipped(dir: &Path, name: &str) -> Option<PathBuf> {
    [format!("{name}.gz"), name.to_string()]
        .into_iter()
        .map(|candidate| dir.join(candidate))
        .find(|path| path.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn reads_plain_and_gzip_alike_with_offsets() {
        let payload: Vec<u8> = (0..=255).collect();
        for stored in [payload.clone(), gzip(&payload)] {
            let mut stream = ByteStream::from_bytes(Path::new("x"), &stored);
            assert_eq!(stream.read_array::<2>().unwrap(), [0, 1]);
            assert_eq!(stream.offset(), 2);
            assert_eq!(stream.read_vec(254, "rest").unwrap()[253], 255);
            stream.finish().unwrap();
        }
    }

    #[test]
    fn short_read_is_truncated_at_the_end_offset() {
        let mut stream = ByteStream::from_bytes(Path::new("x"), &[1, 2, 3]);
        assert_eq!(stream.read_vec(3, "data").unwrap(), vec![1, 2, 3]);
        let gz = gzip(&[7; 10]);
        let mut stream = ByteStream::from_bytes(Path::new("x.gz"), &gz);
        match stream.read_vec(11, "data") {
            Err(DataError::Truncated {
                offset,
                expected,
                decompressed,
                ..
            }) => {
                assert_eq!((offset, expected, decompressed), (10, 11, true));
            }
            other => panic!("expected Truncated, got {other:?}"),
        }
    }

    #[test]
    fn absurd_claim_is_refused_before_reading() {
        let mut stream = ByteStream::from_bytes(Path::new("x"), &[0; 16]);
        stream.read_array::<4>().unwrap();
        match stream.read_vec(u64::MAX / 2, "images") {
            Err(DataError::Truncated {
                offset, expected, ..
            }) => assert_eq!((offset, expected), (16, 4 + u64::MAX / 2)),
            other => panic!("expected Truncated, got {other:?}"),
        }
        let gz = gzip(&[0; 16]);
        let mut stream = ByteStream::from_bytes(Path::new("x.gz"), &gz);
        stream.read_array::<4>().unwrap();
        match stream.read_vec(u64::MAX / 2, "images") {
            Err(DataError::BadHeader { offset, .. }) => assert_eq!(offset, 4),
            other => panic!("expected BadHeader, got {other:?}"),
        }
    }

    #[test]
    fn cut_gzip_stream_is_a_gzip_error_with_the_offset_reached() {
        let payload: Vec<u8> = (0..100_000u32).map(|i| (i * 7919 % 251) as u8).collect();
        let gz = gzip(&payload);
        let cut = &gz[..gz.len() / 2];
        let mut stream = ByteStream::from_bytes(Path::new("x.gz"), cut);
        match stream.read_vec(payload.len() as u64, "data") {
            Err(DataError::Compressed { offset, .. }) => {
                assert!(offset > 0 && offset < payload.len() as u64, "{offset}")
            }
            other => panic!("expected Compressed, got {other:?}"),
        }
    }

    #[test]
    fn trailing_bytes_are_reported() {
        let mut stream = ByteStream::from_bytes(Path::new("x"), &[0; 5]);
        stream.read_vec(3, "data").unwrap();
        match stream.finish() {
            Err(DataError::TrailingBytes { offset, extra, .. }) => {
                assert_eq!((offset, extra), (3, 2))
            }
            other => panic!("expected TrailingBytes, got {other:?}"),
        }
    }
}
