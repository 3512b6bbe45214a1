//! Two files in one fuzz input.

/// Splits one fuzz input into the two files of a pair (images, labels): the
/// first two bytes (little-endian) give the first file's length, clamped to
/// what follows. Keeps both files under the fuzzer's control with one input.
pub fn split_pair(data: &[u8]) -> (&[u8], &[u8]) {
    let Some((len, rest)) = data.split_first_chunk::<2>() else {
        return (&[], &[]);
    };
    let first = usize::from(u16::from_le_bytes(*len)).min(rest.len());
    rest.split_at(first)
}
