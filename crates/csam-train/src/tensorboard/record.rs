//! TFRecord framing, the container of TensorBoard's event files: each record
//! is
//!
//! ```text
//! u64 length (little endian) | u32 masked_crc32c(length bytes) | data | u32 masked_crc32c(data)
//! ```
//!
//! with `masked_crc32c(x) = ((c >> 15) | (c << 17)) + 0xa282ead8` (wrapping,
//! `c` the CRC-32C of `x`), as TensorFlow's `core/lib/io/record_writer.cc`
//! and `crc32c.h` define it. A reader of a file that is still being written
//! (TensorBoard's) treats a last record cut short as not yet there; a whole
//! record whose checksum does not match is corruption.

use crc::{Crc, CRC_32_ISCSI};

/// CRC-32C (Castagnoli, reflected polynomial 0x82f63b78), the checksum of
/// TFRecord framing.
const CASTAGNOLI: Crc<u32> = Crc::<u32>::new(&CRC_32_ISCSI);

/// TFRecord's mask constant (`kMaskDelta`).
const MASK_DELTA: u32 = 0xa282_ead8;

/// Bytes before a record's data: its length and the length's checksum.
const HEADER: usize = 12;
/// Bytes after a record's data: its checksum.
const FOOTER: usize = 4;

/// The CRC-32C of `bytes`.
pub fn crc32c(bytes: &[u8]) -> u32 {
    CASTAGNOLI.checksum(bytes)
}

/// The masked CRC-32C of `bytes`, as TFRecord stores it (masked so that a
/// CRC of data that itself holds CRCs stays a good checksum).
pub fn masked_crc32c(bytes: &[u8]) -> u32 {
    let crc = crc32c(bytes);
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// `data` framed as one record.
pub fn frame(data: &[u8]) -> Vec<u8> {
    let length = (data.len() as u64).to_le_bytes();
    let mut record = Vec::with_capacity(HEADER + data.len() + FOOTER);
    record.extend_from_slice(&length);
    record.extend_from_slice(&masked_crc32c(&length).to_le_bytes());
    record.extend_from_slice(data);
    record.extend_from_slice(&masked_crc32c(data).to_le_bytes());
    record
}

/// A record that is whole but not what was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The checksum of the length field does not match.
    #[error("the length of the record at byte {offset} fails its checksum")]
    Length {
        /// The record's first byte in the file.
        offset: usize,
    },
    /// The checksum of the data does not match.
    #[error("the data of the record at byte {offset} fails its checksum")]
    Data {
        /// The record's first byte in the file.
        offset: usize,
    },
}

/// The records of a file's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Records<'a> {
    /// Each whole record: its first byte in the file and its data.
    pub records: Vec<(usize, &'a [u8])>,
    /// Where a last record cut short begins (a writer killed mid-record);
    /// None when the bytes end with a whole record.
    pub torn_at: Option<usize>,
}

/// Splits `bytes` into records, checking both checksums of each whole one.
pub fn read_records(bytes: &[u8]) -> Result<Records<'_>, RecordError> {
    let mut records = Vec::new();
    let mut offset = 0;
    while offset < bytes.len() {
        let rest = &bytes[offset..];
        let Some(header) = rest.get(..HEADER) else {
            return Ok(Records {
                records,
                torn_at: Some(offset),
            });
        };
        let (length, length_crc) = header.split_at(8);
        if masked_crc32c(length) != u32_le(length_crc) {
            return Err(RecordError::Length { offset });
        }
        let end = usize::try_from(u64_le(length))
            .ok()
            .and_then(|n| n.checked_add(HEADER + FOOTER))
            .filter(|&end| end <= rest.len());
        let Some(end) = end else {
            return Ok(Records {
                records,
                torn_at: Some(offset),
            });
        };
        let (data, data_crc) = rest[HEADER..end].split_at(end - HEADER - FOOTER);
        if masked_crc32c(data) != u32_le(data_crc) {
            return Err(RecordError::Data { offset });
        }
        records.push((offset, data));
        offset += end;
    }
    Ok(Records {
        records,
        torn_at: None,
    })
}

fn u32_le(bytes: &[u8]) -> u32 {
    let mut word = [0; 4];
    word.copy_from_slice(bytes);
    u32::from_le_bytes(word)
}

fn u64_le(bytes: &[u8]) -> u64 {
    let mut word = [0; 8];
    word.copy_from_slice(bytes);
    u64::from_le_bytes(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 3720 (iSCSI), appendix B.4: CRC-32C test vectors, the CRC
    /// written there as the bytes it is sent as (little endian).
    #[test]
    fn crc32c_matches_the_rfc_3720_vectors() {
        let ascending: Vec<u8> = (0..32).collect();
        let descending: Vec<u8> = (0..32).rev().collect();
        let cases: [(&[u8], [u8; 4]); 4] = [
            (&[0; 32], [0xaa, 0x36, 0x91, 0x8a]),
            (&[0xff; 32], [0x43, 0xab, 0xa8, 0x62]),
            (&ascending, [0x4e, 0x79, 0xdd, 0x46]),
            (&descending, [0x5c, 0xdb, 0x3f, 0x11]),
        ];
        for (bytes, sent) in cases {
            assert_eq!(crc32c(bytes).to_le_bytes(), sent);
        }
        // The check value of the CRC catalogue.
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
    }

    #[test]
    fn the_mask_rotates_then_adds_the_delta() {
        // crc32c("") = 0: the mask of it is the delta itself.
        assert_eq!(masked_crc32c(b""), MASK_DELTA);
        // 0xe3069283 rotated right by 15 bits is 0x2507c60d; plus the delta.
        assert_eq!(
            masked_crc32c(b"123456789"),
            0x2507_c60du32.wrapping_add(MASK_DELTA)
        );
    }

    #[test]
    fn one_record_has_the_exact_bytes_of_the_format() {
        let record = frame(b"abc");
        assert_eq!(record.len(), 12 + 3 + 4);
        assert_eq!(&record[..8], &3u64.to_le_bytes());
        assert_eq!(&record[12..15], b"abc");
        assert_eq!(record, EXPECTED_ABC);
    }

    /// `frame(b"abc")`, from Python's `tensorboard` package
    /// (`tensorboard.summary.writer.record_writer.RecordWriter` writing
    /// b"abc" to a BytesIO).
    #[rustfmt::skip]
    const EXPECTED_ABC: [u8; 19] = [
        0x03, 0, 0, 0, 0, 0, 0, 0, 0xb0, 0x99, 0x49, 0x0e, b'a', b'b', b'c', 0x6e, 0x57, 0xf1,
        0x21,
    ];

    #[test]
    fn records_read_back_and_a_cut_tail_is_reported_not_refused() {
        let mut bytes = frame(b"first");
        bytes.extend(frame(b""));
        let whole = bytes.len();
        bytes.extend(frame(b"third"));
        let read = read_records(&bytes).unwrap();
        assert_eq!(read.records.len(), 3);
        assert_eq!(read.records[1], (12 + 5 + 4, &b""[..]));
        assert_eq!(read.torn_at, None);
        for cut in whole + 1..bytes.len() {
            let read = read_records(&bytes[..cut]).unwrap();
            assert_eq!(read.records.len(), 2, "cut at {cut}");
            assert_eq!(read.torn_at, Some(whole), "cut at {cut}");
        }
    }

    #[test]
    fn a_flipped_bit_is_corruption() {
        let bytes = frame(b"payload");
        for (byte, expected) in [
            (0, RecordError::Length { offset: 0 }),
            (9, RecordError::Length { offset: 0 }),
            (13, RecordError::Data { offset: 0 }),
            (bytes.len() - 1, RecordError::Data { offset: 0 }),
        ] {
            let mut bad = bytes.clone();
            bad[byte] ^= 0x10;
            assert_eq!(read_records(&bad), Err(expected), "byte {byte}");
        }
    }
}
