//! Sorting scores by their bits: the sorts behind AdaECE's equal-mass bins and
//! the AUROC.
//!
//! An `f64` maps to a `u64` key whose unsigned order is the float's order
//! ([`f64::total_cmp`]), so a million scores sort by an LSD radix sort over the
//! key bytes (a counting pass and one scatter per byte that varies) instead of
//! a comparison sort. Bytes that are the same in every key are skipped: the
//! low 29 bits of a widened `f32` are zero, and scores in `[0, 1]` share their
//! top bits, so a sort of `f32` confidences takes three or four scatters.

/// The key of `score` under [`f64::total_cmp`]: non-negative floats get the
/// sign bit set, negative ones have every bit flipped.
#[inline]
pub(crate) fn order_key(score: f64) -> u64 {
    let bits = score.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

/// The score of an [`order_key`].
#[inline]
pub(crate) fn score_of(key: u64) -> f64 {
    f64::from_bits(if key >> 63 == 1 {
        key & !(1 << 63)
    } else {
        !key
    })
}

/// Sorts `keys` ascending. Stable, `O(N)` per varying byte; short inputs use
/// the standard library's sort.
pub(crate) fn sort(keys: &mut Vec<u64>) {
    const SHORT: usize = 256;
    if keys.len() < SHORT {
        keys.sort_unstable();
        return;
    }
    // One counting pass for all eight bytes.
    let mut counts = vec![[0usize; 256]; 8];
    for &key in keys.iter() {
        for (byte, count) in counts.iter_mut().enumerate() {
            count[(key >> (8 * byte)) as usize & 0xff] += 1;
        }
    }
    let mut buffer = vec![0u64; keys.len()];
    for (byte, count) in counts.iter().enumerate() {
        if count.contains(&keys.len()) {
            continue; // Every key has the same byte here.
        }
        let mut offsets = [0usize; 256];
        let mut next = 0;
        for (offset, &n) in offsets.iter_mut().zip(count) {
            *offset = next;
            next += n;
        }
        for &key in keys.iter() {
            let digit = (key >> (8 * byte)) as usize & 0xff;
            buffer[offsets[digit]] = key;
            offsets[digit] += 1;
        }
        std::mem::swap(keys, &mut buffer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn keys_follow_total_order() {
        let values = [
            f64::NEG_INFINITY,
            -1.5,
            -f64::MIN_POSITIVE,
            -0.0,
            0.0,
            f64::MIN_POSITIVE,
            0.5,
            1.0,
            f64::INFINITY,
        ];
        for pair in values.windows(2) {
            assert!(order_key(pair[0]) < order_key(pair[1]), "{pair:?}");
        }
        for v in values {
            assert_eq!(score_of(order_key(v)).to_bits(), v.to_bits());
        }
    }

    proptest! {
        #[test]
        fn radix_sort_matches_the_standard_sort(
            mut keys in prop::collection::vec(prop_oneof![
                any::<u64>(),
                0u64..600,
                (0u64..300).prop_map(|k| k << 40),
                any::<f32>().prop_map(|v| order_key(f64::from(v))),
            ], 0..2000)
        ) {
            let mut expected = keys.clone();
            expected.sort_unstable();
            sort(&mut keys);
            prop_assert_eq!(keys, expected);
        }
    }
}
