//! `(score, hit)` pairs with scores in `[0, 1]` as sortable integer keys: the
//! pairs of AdaECE's equal-mass bins, sorted by score once and then binned
//! by position.
//!
//! A pair is one `u64` ([`pair_key`]): the score's order key counted from
//! that of `-0.0` (the least score in `[0, 1]`), then the hit in bit 0, so
//! the keys' order is by score ([`f64::total_cmp`], the numeric order there),
//! misses before hits. A pair whose score is an `f32` (every confidence of
//! an `f32` matrix) is kept as a `u32` of the same order instead
//! ([`narrow_pair_key`]): half the bytes for the sort to move.

use crate::radix;

/// The [`pair_key`] of `(score, hit)`.
#[inline]
pub(crate) fn pair_key(score: f64, hit: bool) -> u64 {
    ((radix::order_key(score) - radix::order_key(-0.0)) << 1) | u64::from(hit)
}

/// The pair of a [`pair_key`].
#[inline]
pub(crate) fn pair_of(key: u64) -> (f64, bool) {
    (
        radix::score_of((key >> 1) + radix::order_key(-0.0)),
        key & 1 == 1,
    )
}

/// The [`pair_key`] of a pair whose score is an `f32`, in 32 bits with the
/// same order (the score's [`radix::order_key_f32`] counted from that of
/// `-0.0`, at most `0x3F80_0001`, then the hit); `None` for a score that is
/// not an `f32`.
#[inline]
fn narrow_pair_key(score: f64, hit: bool) -> Option<u32> {
    let narrow = score as f32;
    (f64::from(narrow).to_bits() == score.to_bits()).then(|| {
        ((radix::order_key_f32(narrow) - radix::order_key_f32(-0.0)) << 1) | u32::from(hit)
    })
}

/// The [`pair_key`] of a [`narrow_pair_key`].
#[inline]
fn widen_pair_key(key: u32) -> u64 {
    let score = radix::score_of_f32((key >> 1) + radix::order_key_f32(-0.0));
    pair_key(f64::from(score), key & 1 == 1)
}

/// Pairs collected in either width, sorted on request.
#[derive(Debug, Clone, Default)]
pub(crate) struct PairKeys {
    wide: Vec<u64>,
    narrow: Vec<u32>,
    /// Both lists are in ascending order.
    sorted: bool,
}

impl PairKeys {
    /// Adds a pair with `score` in `[0, 1]`.
    #[inline]
    pub(crate) fn push(&mut self, score: f64, hit: bool) {
        match narrow_pair_key(score, hit) {
            Some(key) => self.narrow.push(key),
            None => self.wide.push(pair_key(score, hit)),
        }
        self.sorted = false;
    }

    /// Room for `additional` more pairs in either width (address space only
    /// until written).
    pub(crate) fn reserve(&mut self, additional: usize) {
        self.wide.reserve(additional);
        self.narrow.reserve(additional);
    }

    /// Sorts the pairs so far: a collector fed on its own thread sorts there,
    /// and [`PairKeys::append`] then merges sorted lists in one linear pass.
    pub(crate) fn sort(&mut self) {
        if !self.sorted {
            radix::sort(&mut self.wide);
            radix::sort(&mut self.narrow);
            self.sorted = true;
        }
    }

    /// Takes in the pairs of `other`.
    pub(crate) fn append(&mut self, other: PairKeys) {
        if self.sorted && other.sorted {
            self.wide = merge_sorted(std::mem::take(&mut self.wide), other.wide);
            self.narrow = merge_sorted(std::mem::take(&mut self.narrow), other.narrow);
        } else {
            self.wide.extend(other.wide);
            self.narrow.extend(other.narrow);
            self.sorted = false;
        }
    }

    /// Every pair as a [`pair_key`], in ascending order: the narrow keys
    /// widened (which keeps their order) and merged with the wide ones.
    pub(crate) fn into_sorted(mut self) -> Vec<u64> {
        self.sort();
        let widened: Vec<u64> = self.narrow.into_iter().map(widen_pair_key).collect();
        merge_sorted(self.wide, widened)
    }
}

/// The ascending merge of two ascending lists.
fn merge_sorted<K: Copy + Ord>(a: Vec<K>, b: Vec<K>) -> Vec<K> {
    if b.is_empty() {
        return a;
    }
    if a.is_empty() {
        return b;
    }
    let mut merged = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if b[j] < a[i] {
            merged.push(b[j]);
            j += 1;
        } else {
            merged.push(a[i]);
            i += 1;
        }
    }
    merged.extend_from_slice(&a[i..]);
    merged.extend_from_slice(&b[j..]);
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pairs() -> impl Strategy<Value = Vec<(f64, bool)>> {
        prop::collection::vec(
            (
                prop_oneof![
                    (0u8..=16).prop_map(|v| f64::from(v) / 16.0),
                    Just(-0.0),
                    Just(0.0),
                    Just(1.0),
                    (0.0..=1.0_f64).prop_map(|v| f64::from(v as f32)),
                    0.0..=1.0_f64,
                ],
                any::<bool>(),
            ),
            0..600,
        )
    }

    proptest! {
        #[test]
        fn sorted_keys_are_the_wide_keys_sorted(
            pairs in pairs(),
            cut in any::<prop::sample::Index>(),
            sort_parts in any::<bool>(),
        ) {
            // f32 scores go narrow, the others wide; the result is every
            // pair's wide key, sorted (the keys before narrow ones existed),
            // also when the pairs come in two parts, sorted or not.
            for &(score, hit) in &pairs {
                if let Some(key) = narrow_pair_key(score, hit) {
                    prop_assert_eq!(f64::from(score as f32).to_bits(), score.to_bits());
                    prop_assert_eq!(widen_pair_key(key), pair_key(score, hit));
                }
                prop_assert_eq!(pair_of(pair_key(score, hit)), (score, hit));
            }
            let mut expected: Vec<u64> = pairs.iter().map(|&(s, h)| pair_key(s, h)).collect();
            expected.sort_unstable();
            let split = if pairs.is_empty() { 0 } else { cut.index(pairs.len()) };
            let (mut first, mut second) = (PairKeys::default(), PairKeys::default());
            pairs[..split].iter().for_each(|&(s, h)| first.push(s, h));
            pairs[split..].iter().for_each(|&(s, h)| second.push(s, h));
            if sort_parts {
                first.sort();
                second.sort();
            }
            first.append(second);
            prop_assert_eq!(first.into_sorted(), expected);
        }

        #[test]
        fn merging_sorted_lists_sorts_them(
            mut a in prop::collection::vec(0u32..50, 0..100),
            mut b in prop::collection::vec(0u32..50, 0..100),
        ) {
            a.sort_unstable();
            b.sort_unstable();
            let mut expected = [a.clone(), b.clone()].concat();
            expected.sort_unstable();
            prop_assert_eq!(merge_sorted(a, b), expected);
        }
    }
}
