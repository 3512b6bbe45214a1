//! Invariants of the losses on random logits (proptest).

use csam_nn::loss::{cross_entropy, CsamLoss};
use proptest::prelude::*;
use tch::Tensor;

/// Logits `[B, K]` with `B` in 1..6, `K` in 2..6, values in [-8, 8], and targets.
fn batch() -> impl Strategy<Value = (Vec<f64>, Vec<i64>, i64)> {
    (1usize..6, 2usize..6).prop_flat_map(|(b, k)| {
        (
            prop::collection::vec(-8.0f64..8.0, b * k),
            prop::collection::vec(0..k as i64, b),
            Just(k as i64),
        )
    })
}

fn tensors(logits: &[f64], targets: &[i64], k: i64) -> (Tensor, Tensor) {
    (
        Tensor::from_slice(logits).reshape([-1, k]),
        Tensor::from_slice(targets),
    )
}

fn csam(gamma: f64, z: &Tensor, y: &Tensor) -> f64 {
    CsamLoss::new(gamma, false)
        .unwrap()
        .loss(z, y)
        .unwrap()
        .double_value(&[])
}

proptest! {
    #[test]
    fn csam_is_between_a_quarter_of_ce_and_ce_and_decreases_in_gamma(
        (logits, targets, k) in batch(),
        g1 in 0.0f64..2.0,
        g2 in 0.0f64..2.0,
    ) {
        let (z, y) = tensors(&logits, &targets, k);
        let ce = cross_entropy(&z, &y).unwrap().double_value(&[]);
        prop_assert!(ce >= 0.0);
        let (lo, hi) = if g1 <= g2 { (g1, g2) } else { (g2, g1) };
        let (l_lo, l_hi) = (csam(lo, &z, &y), csam(hi, &z, &y));
        // The factor (1 + p)^(-gamma) lies in [2^(-gamma), 1] and shrinks with gamma.
        // Float64 on <= 5 x 5 logits in [-8, 8]: losses <= ~18 (ulp 3.6e-15), a
        // few roundings each, ~1e-14; 1e-12 leaves 100x.
        prop_assert!(l_lo <= ce + 1e-12);
        prop_assert!(l_hi <= l_lo + 1e-12);
        prop_assert!(l_hi >= ce / 4.0 - 1e-12);
        // gamma 0: the weights are (1 + p)^0 = 1 exactly and the same mean runs
        // on the same values: equal bits; 1e-15 relative is only slack.
        prop_assert!((csam(0.0, &z, &y) - ce).abs() <= 1e-15 * ce.max(1.0));
    }

    #[test]
    fn losses_are_invariant_to_a_per_row_logit_shift(
        (logits, targets, k) in batch(),
        shift in -50.0f64..50.0,
        gamma in 0.0f64..2.0,
    ) {
        let (z, y) = tensors(&logits, &targets, k);
        let shifted = &z + shift;
        let ce = cross_entropy(&z, &y).unwrap().double_value(&[]);
        let ce_shifted = cross_entropy(&shifted, &y).unwrap().double_value(&[]);
        // z + shift (|.| <= 58) rounds by <= 0.5 ulp(58) = 3.6e-15 per entry; a
        // log-softmax of those is off by ~1e-13: 1e-9 leaves 10^4.
        prop_assert!((ce - ce_shifted).abs() < 1e-9);
        // Away from the p = 1/2 switch, CSAM is shift-invariant too.
        let p = z.softmax(1, None).gather(1, &y.unsqueeze(1), false);
        // p moves by ~1e-13 under the shift: 1e-6 keeps the weight's jump at
        // p = 1/2 out of reach; elsewhere the same ~1e-13 as cross entropy.
        let near_switch = (p - 0.5).abs().min().double_value(&[]) < 1e-6;
        if !near_switch {
            prop_assert!((csam(gamma, &z, &y) - csam(gamma, &shifted, &y)).abs() < 1e-9);
        }
    }
}
