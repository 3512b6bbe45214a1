//! Sorting scores by their bits: the sorts behind AdaECE's equal-mass bins and
//! the AUROC.
//!
//! An `f64` maps to a `u64` key whose unsigned order is the float's order
//! ([`f64::total_cmp`]), and an `f32` to a `u32` key the same way, so a
//! million scores sort by an LSD radix sort over the key bits (a counting
//! pass and one scatter per 11-bit digit) instead of a comparison sort. Bits
//! that are the same in every key are skipped: scores in `[0, 1]` share their
//! top bits, so a sort of `f32` confidences takes three scatters of 4-byte
//! keys (half the memory traffic of their widened `f64` keys, whose low 29
//! bits are zero: the same order, about twice the time).

/// The keys [`sort`] sorts: unsigned integers, read through `u64`.
pub trait RadixKey: Copy + Ord + Default + Into<u64> + Send {}

impl RadixKey for u32 {}
impl RadixKey for u64 {}

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

/// [`order_key`] for an `f32`, in 32 bits: the same order as the key of the
/// widened score.
#[inline]
pub(crate) fn order_key_f32(score: f32) -> u32 {
    let bits = score.to_bits();
    if bits >> 31 == 1 {
        !bits
    } else {
        bits | 1 << 31
    }
}

/// The score of an [`order_key_f32`].
#[inline]
pub(crate) fn score_of_f32(key: u32) -> f32 {
    f32::from_bits(if key >> 31 == 1 {
        key & !(1 << 31)
    } else {
        !key
    })
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

/// Sorts `keys` ascending. Stable, `O(N)` per digit; short inputs use the
/// standard library's sort.
///
/// The digits are windows of [`DIGIT_BITS`] bits placed over the bits that
/// vary between keys (bits every key shares do not affect the order): the
/// first window starts at the lowest varying bit, each next one at the lowest
/// varying bit above the windows so far. `f32` confidences widened to `f64`
/// vary in bits 29 to 55 or so: three scatters. One pass finds the varying
/// bits, one counts every digit, then one scatter per digit.
pub(crate) fn sort<K: RadixKey>(keys: &mut Vec<K>) {
    const SHORT: usize = 256;
    const RADIX: usize = 1 << DIGIT_BITS;
    const MASK: u64 = RADIX as u64 - 1;
    if keys.len() < SHORT {
        keys.sort_unstable();
        return;
    }
    let (all, any) = keys.iter().fold((u64::MAX, 0), |(all, any), &key| {
        let key: u64 = key.into();
        (all & key, any | key)
    });
    let mut varying = all ^ any;
    let mut shifts = Vec::new();
    while varying != 0 {
        let shift = varying.trailing_zeros();
        shifts.push(shift);
        varying &= !(MASK << shift);
    }
    let mut counts = vec![[0usize; RADIX]; shifts.len()];
    for &key in keys.iter() {
        let key: u64 = key.into();
        for (count, &shift) in counts.iter_mut().zip(&shifts) {
            count[((key >> shift) & MASK) as usize] += 1;
        }
    }
    let mut buffer = vec![K::default(); keys.len()];
    for (count, &shift) in counts.iter().zip(&shifts) {
        let mut offsets = [0usize; RADIX];
        let mut next = 0;
        for (offset, &n) in offsets.iter_mut().zip(count) {
            *offset = next;
            next += n;
        }
        for &key in keys.iter() {
            let digit = ((key.into() >> shift) & MASK) as usize;
            buffer[offsets[digit]] = key;
            offsets[digit] += 1;
        }
        std::mem::swap(keys, &mut buffer);
    }
}

/// Bits per digit of [`sort`]: 2048 counters (16 KB) per digit, in the L1 cache.
const DIGIT_BITS: u32 = 11;

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
        fn f32_keys_order_as_the_widened_keys(a in any::<f32>(), b in any::<f32>()) {
            let narrow = order_key_f32(a).cmp(&order_key_f32(b));
            let wide = order_key(f64::from(a)).cmp(&order_key(f64::from(b)));
            prop_assert_eq!(narrow, wide);
            prop_assert_eq!(score_of_f32(order_key_f32(a)).to_bits(), a.to_bits());
        }

        #[test]
        fn narrow_keys_sort_as_the_standard_sort(
            mut keys in prop::collection::vec(prop_oneof![
                any::<u32>(),
                any::<f32>().prop_map(order_key_f32),
            ], 0..2000)
        ) {
            let mut expected = keys.clone();
            expected.sort_unstable();
            sort(&mut keys);
            prop_assert_eq!(keys, expected);
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

        #[test]
        fn keys_that_vary_in_a_few_scattered_bits_sort_too(
            base in any::<u64>(),
            mask in prop_oneof![any::<u64>(), Just(1u64 | 0x7ff << 30), Just(1u64 << 63 | 1), Just(0u64)],
            noise in prop::collection::vec(any::<u64>(), 256..3000),
        ) {
            // Only the bits of `mask` vary: digit windows start at its lowest
            // set bit and skip the gaps (also at the top bit, or none at all).
            let mut keys: Vec<u64> = noise.iter().map(|n| (base & !mask) | (n & mask)).collect();
            let mut expected = keys.clone();
            expected.sort_unstable();
            sort(&mut keys);
            prop_assert_eq!(keys, expected);
        }
    }
}
