//! `e^x` for `x <= 0` without a call into libm, in straight-line code that
//! the compiler vectorises: the exponentials of the temperature fit, `N K`
//! of them per pass over the logits.
//!
//! The classic reduction (Cody & Waite; the fdlibm `exp`): `x = n ln 2 + r`
//! with `n = round(x / ln 2)` and `|r| <= ln 2 / 2` (`ln 2` split in a high
//! part whose products with `n` are exact and a low part), then
//! `e^x = 2^n e^r` with `e^r` from its Taylor polynomial of degree 13 (the
//! remainder `r^14 / 14! < 5e-18` relative; evaluated by Estrin's scheme,
//! whose short dependency chains let one exponential start before the
//! previous one ends: the fit took 16% less time than with Horner's rule)
//! and `2^n` written straight into
//! the exponent bits. `round` is the add-and-subtract of `1.5 * 2^52`, whose
//! sum also holds `n` in its low bits, so no float-to-integer conversion is
//! needed (AVX2 has none for `f64` lanes). The result is within a few ulps of
//! libm's `exp` (tested); below `-708` (where `e^x` is under `2^-1021`) it
//! is 0 instead of a subnormal, which no sum of the fit can notice next to
//! its largest term, 1.

/// `1.5 * 2^52`: adding it rounds a value of magnitude below `2^51` to an
/// integer, which then sits in the low bits of the sum.
const SHIFT: f64 = 6_755_399_441_055_744.0;
/// `ln 2` in two parts (fdlibm's `ln2_hi`, `ln2_lo`): `LN2_HI` has 32
/// significant bits, so `n * LN2_HI` is exact for `|n| < 2^20`.
const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
/// Below this, the result is 0 (above it `n >= -1022`, a normal `2^n`).
const LOWEST: f64 = -708.0;

/// `e^x` for `x <= 0` (see the module documentation); 0 below -708.
#[inline(always)]
pub(crate) fn exp_nonpositive(x: f64) -> f64 {
    let clamped = if x < LOWEST { LOWEST } else { x };
    let shifted = clamped * std::f64::consts::LOG2_E + SHIFT;
    let n = shifted - SHIFT;
    let r = (clamped - n * LN2_HI) - n * LN2_LO;
    // e^r = sum_k r^k / k!, k = 0..=13, by Estrin's scheme: pairs of
    // terms, then pairs of pairs by r^2, r^4 and r^8, four dependent steps
    // deep where Horner's rule is thirteen.
    let c = &TAYLOR;
    let r2 = r * r;
    let r4 = r2 * r2;
    let r8 = r4 * r4;
    let pair = |k: usize| c[k] + c[k + 1] * r;
    let low = (pair(0) + pair(2) * r2) + (pair(4) + pair(6) * r2) * r4;
    let high = (pair(8) + pair(10) * r2) + pair(12) * r4;
    let p = low + high * r8;
    // n + 1023 (in 1..=1023) into the exponent field: 2^n.
    let n_bits = shifted.to_bits().wrapping_sub(SHIFT.to_bits());
    let scale = f64::from_bits(n_bits.wrapping_add(1023) << 52);
    let value = p * scale;
    if x < LOWEST {
        0.0
    } else {
        value
    }
}

/// `1 / k!` for `k = 0..=13`, each the quotient of the one before by `k`
/// (rounded once per step: within a few ulps of the exact value, far below
/// the weight of `r^k` in the sum).
const TAYLOR: [f64; 14] = {
    let mut c = [1.0; 14];
    let mut k = 1;
    while k < 14 {
        c[k] = c[k - 1] / k as f64;
        k += 1;
    }
    c
};

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The bar against libm, derived: here `r` is rounded once (<= 0.25 ulp of
    /// `e^r`) and four sums near `e^r` are rounded (<= 0.5 ulp each; the other
    /// roundings are weighted by `r^2 <= 0.12`), Taylor's remainder is 0.05 ulp;
    /// glibc's `exp` is within 0.52 ulp on either x86-64 path (FMA or not). So
    /// the two are < 2.9 ulps apart, at most 2 whole ulps.
    const BAR_ULPS: u64 = 2;

    /// Distance in ulps between two positive finite floats.
    fn ulps(a: f64, b: f64) -> u64 {
        a.to_bits().abs_diff(b.to_bits())
    }

    #[test]
    fn exact_points_and_the_range_ends() {
        assert_eq!(exp_nonpositive(0.0), 1.0);
        assert_eq!(exp_nonpositive(-0.0), 1.0);
        assert!(ulps(exp_nonpositive(-1.0), (-1.0_f64).exp()) <= BAR_ULPS);
        assert!(ulps(exp_nonpositive(-700.0), (-700.0_f64).exp()) <= BAR_ULPS);
        assert!(ulps(exp_nonpositive(LOWEST), LOWEST.exp()) <= BAR_ULPS);
        assert_eq!(exp_nonpositive(LOWEST.next_down()), 0.0);
        assert_eq!(exp_nonpositive(-1e300), 0.0);
        assert_eq!(exp_nonpositive(f64::NEG_INFINITY), 0.0);
    }

    #[test]
    fn a_fine_sweep_is_within_two_ulps_of_libm() {
        // Every 1e-4 over [-40, 0] (400,000 points): the range of the fit's
        // exponents b (z - max z), multiples and halves of ln 2 among them.
        let mut worst = 0;
        for i in 0..=400_000 {
            let x = -(i as f64) * 1e-4;
            worst = worst.max(ulps(exp_nonpositive(x), x.exp()));
        }
        assert!(worst <= BAR_ULPS, "{worst} ulps");
    }

    proptest! {
        #[test]
        fn within_two_ulps_of_libm(x in -708.0..=0.0_f64) {
            let (ours, libm) = (exp_nonpositive(x), x.exp());
            prop_assert!(ulps(ours, libm) <= BAR_ULPS, "x = {}: {} vs {}", x, ours, libm);
        }
    }
}
