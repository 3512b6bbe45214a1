//! The row scan in AVX2 instructions, written out rather than left to the
//! compiler's vectoriser, which turned the same loop into vector or scalar
//! code (a factor of three in time) depending on code elsewhere in the
//! crate. The operations are those of the portable scan (`super::scan`):
//! lane-wise signed maxima of the entries' patterns with the position where
//! each was first seen, a lane-wise minimum for the check, the last
//! `LANES` entries as one overlapping group, then the maximum over the
//! lanes and the least position holding it. So the results are the same.
//!
//! `f32` rows take one 8-lane register per group, `f64` rows two 4-lane
//! registers (AVX2 has no 64-bit integer maximum or minimum: a comparison
//! and a blend stand in for each).

use std::arch::x86_64::*;

use super::{scan_entries, EntryCheck, Top, LANES};

/// The [`Top`] of a row of `f32` and the check of its entries.
///
/// # Safety
/// The CPU must run AVX2 instructions.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn scan_f32(row: &[f32], check: &mut EntryCheck<f32>) -> Top<f32> {
    let n = row.len();
    if n < LANES || n > i32::MAX as usize {
        return scan_entries(row, check);
    }
    let load = |at: usize| {
        let group = &row[at..at + LANES];
        // SAFETY: `group` holds 8 `f32`, 32 bytes; unaligned loads are allowed.
        unsafe { _mm256_loadu_si256(group.as_ptr().cast()) }
    };
    // SAFETY (the intrinsics below): AVX2 is present, the caller's contract;
    // the check's lanes are 8 `i32`, 32 bytes.
    let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let mut max = _mm256_set1_epi32(row[0].to_bits() as i32);
    let mut at = _mm256_setzero_si256();
    let mut min = unsafe { _mm256_loadu_si256(check.min.as_ptr().cast()) };
    let mut step = |v: __m256i, positions: __m256i| {
        let greater = _mm256_cmpgt_epi32(v, max);
        max = _mm256_max_epi32(max, v);
        at = _mm256_blendv_epi8(at, positions, greater);
        min = _mm256_min_epi32(min, v);
    };
    let mut positions = lanes;
    for start in (0..n - n % LANES).step_by(LANES) {
        step(load(start), positions);
        positions = _mm256_add_epi32(positions, _mm256_set1_epi32(LANES as i32));
    }
    if !n.is_multiple_of(LANES) {
        let start = n - LANES;
        step(
            load(start),
            _mm256_add_epi32(lanes, _mm256_set1_epi32(start as i32)),
        );
    }
    unsafe { _mm256_storeu_si256(check.min.as_mut_ptr().cast(), min) };
    let top = fold_i32(max, |a, b| _mm_max_epi32(a, b));
    let holds_top = _mm256_cmpeq_epi32(max, _mm256_set1_epi32(top));
    let candidates = _mm256_blendv_epi8(_mm256_set1_epi32(i32::MAX), at, holds_top);
    Top {
        value: f32::from_bits(top as u32),
        index: fold_i32(candidates, |a, b| _mm_min_epi32(a, b)) as usize,
    }
}

/// The eight lanes of `v` combined pairwise by `combine` (maximum or minimum).
#[target_feature(enable = "avx2")]
fn fold_i32(v: __m256i, combine: impl Fn(__m128i, __m128i) -> __m128i) -> i32 {
    let halves = combine(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let quarters = combine(halves, _mm_shuffle_epi32::<0b01_00_11_10>(halves));
    let single = combine(quarters, _mm_shuffle_epi32::<0b10_11_00_01>(quarters));
    _mm_cvtsi128_si32(single)
}

/// The [`Top`] of a row of `f64` and the check of its entries.
///
/// # Safety
/// The CPU must run AVX2 instructions.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn scan_f64(row: &[f64], check: &mut EntryCheck<f64>) -> Top<f64> {
    const HALF: usize = LANES / 2;
    let n = row.len();
    if n < LANES {
        return scan_entries(row, check);
    }
    let load = |at: usize| {
        let quarter = &row[at..at + HALF];
        // SAFETY: `quarter` holds 4 `f64`, 32 bytes; unaligned loads are allowed.
        unsafe { _mm256_loadu_si256(quarter.as_ptr().cast()) }
    };
    // SAFETY (the intrinsics below): AVX2 is present, the caller's contract;
    // the check's lanes are 8 `i64`, two times 32 bytes.
    let lanes = [
        _mm256_setr_epi64x(0, 1, 2, 3),
        _mm256_setr_epi64x(4, 5, 6, 7),
    ];
    let first = _mm256_set1_epi64x(row[0].to_bits() as i64);
    let mut max = [first; 2];
    let mut at = [_mm256_setzero_si256(); 2];
    let check_lanes = check.min.as_mut_ptr();
    let mut min = unsafe {
        [
            _mm256_loadu_si256(check_lanes.cast()),
            _mm256_loadu_si256(check_lanes.add(HALF).cast()),
        ]
    };
    let mut step = |half: usize, v: __m256i, positions: __m256i| {
        let greater = _mm256_cmpgt_epi64(v, max[half]);
        max[half] = _mm256_blendv_epi8(max[half], v, greater);
        at[half] = _mm256_blendv_epi8(at[half], positions, greater);
        let lower = _mm256_cmpgt_epi64(min[half], v);
        min[half] = _mm256_blendv_epi8(min[half], v, lower);
    };
    let mut positions = lanes;
    for start in (0..n - n % LANES).step_by(LANES) {
        for (half, positions) in positions.iter_mut().enumerate() {
            step(half, load(start + half * HALF), *positions);
            *positions = _mm256_add_epi64(*positions, _mm256_set1_epi64x(LANES as i64));
        }
    }
    if !n.is_multiple_of(LANES) {
        let start = n - LANES;
        for (half, lanes) in lanes.iter().enumerate() {
            let positions = _mm256_add_epi64(*lanes, _mm256_set1_epi64x(start as i64));
            step(half, load(start + half * HALF), positions);
        }
    }
    unsafe {
        _mm256_storeu_si256(check_lanes.cast(), min[0]);
        _mm256_storeu_si256(check_lanes.add(HALF).cast(), min[1]);
    }
    let larger = |a: __m256i, b: __m256i| _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(b, a));
    let smaller = |a: __m256i, b: __m256i| _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(a, b));
    let top = fold_i64(larger(max[0], max[1]), larger);
    let top_lanes = _mm256_set1_epi64x(top);
    let candidates = [0, 1].map(|half| {
        let holds_top = _mm256_cmpeq_epi64(max[half], top_lanes);
        _mm256_blendv_epi8(_mm256_set1_epi64x(i64::MAX), at[half], holds_top)
    });
    Top {
        value: f64::from_bits(top as u64),
        index: fold_i64(smaller(candidates[0], candidates[1]), smaller) as usize,
    }
}

/// The four lanes of `v` combined pairwise by `combine` (maximum or minimum).
#[target_feature(enable = "avx2")]
fn fold_i64(v: __m256i, combine: impl Fn(__m256i, __m256i) -> __m256i) -> i64 {
    let halves = combine(v, _mm256_permute4x64_epi64::<0b01_00_11_10>(v));
    let single = combine(halves, _mm256_permute4x64_epi64::<0b10_11_00_01>(halves));
    _mm256_extract_epi64::<0>(single)
}
