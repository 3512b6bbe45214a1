//! One line of `theory.jsonl`: the quantities of the paper's Section 4 for
//! one SAM / CSAM step, derived from what the step measured anyway
//! ([`StepStats`]: its two train-mode forward passes and the ascent
//! gradient), so tracking them costs no extra forward or backward pass.

use serde::{Deserialize, Serialize};

use csam_nn::optim::StepStats;

/// The paper's per-step diagnostics on the step's mini-batch Omega of m
/// examples (Section 4, Lemma 2 / Theorem 2, Figure 2c).
///
/// - `p_y = (prod_i p_{y_i}(theta))^(1/m) = exp(-L_Omega(theta))`: geometric
///   mean of the true-class softmax probabilities at theta (pass 1);
/// - `p_y_tilde = (prod_i p_{y_i}(theta~))^(1/m) = exp(-CE_Omega(theta~))` at
///   `theta~ = theta + rho g / ||g||` (pass 2; for CSAM the cross entropy at
///   theta~, not the CSAM loss that was differentiated);
/// - `grad_norm = ||g||_2`, `g = grad L_Omega(theta)` over all trainable
///   weights. With m-sharpness (`m` sub-batches, each perturbed with its own
///   gradient g_j) it is the size-weighted mean `sum_j s_j ||g_j||`; Lemma 2
///   applied to each sub-batch and multiplied over the batch gives exactly
///   the bound below with this `||g||`;
/// - `bound = exp(-rho ||g|| / 2) p_y` (Lemma 2's right-hand side);
/// - `lemma2_holds`: `p_y_tilde <= bound`, decided in log space
///   (`log p~_y <= log p_y - rho ||g|| / 2`), so that it stays exact when
///   the probabilities underflow;
/// - `lambda = (1 - p~_y) / (1 - p_y)` (Theorem 2); null when `p_y = 1`;
/// - `lambda_0 = (1 - p~_y) / (1 - exp(rho ||g|| / 2) p~_y)` (Eq. "ratio
///   lower bound"); null when the denominator is not positive (possible
///   only where Lemma 2 fails);
/// - `entropy = H(p_y) = -p_y log p_y - (1 - p_y) log(1 - p_y)`, the binary
///   entropy of the geometric mean (`0 log 0 = 0`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TheoryRecord {
    /// 1-based epoch of the step.
    pub epoch: usize,
    /// 0-based index of the step in the run (the learning-rate schedule's step).
    pub global_step: usize,
    pub p_y: f64,
    pub p_y_tilde: f64,
    pub grad_norm: f64,
    pub bound: f64,
    pub lemma2_holds: bool,
    pub lambda: Option<f64>,
    pub lambda_0: Option<f64>,
    pub entropy: f64,
}

impl TheoryRecord {
    /// The record of a step taken with perturbation radius `rho`; None for a
    /// step without perturbation (plain SGD, a step `sam_every` skipped, or one skipped for a float16
    /// overflow).
    pub fn from_step(
        epoch: usize,
        global_step: usize,
        rho: f64,
        stats: &StepStats,
    ) -> Option<TheoryRecord> {
        // A step skipped for a float16 overflow has no finite gradient norm.
        if stats.skipped {
            return None;
        }
        let perturbed = stats.perturbed?;
        // log p = -CE: the geometric means in log space.
        let (log_p, log_p_tilde) = (-stats.loss, -perturbed.cross_entropy);
        let half_step = rho * stats.grad_norm / 2.0;
        let (p_y, p_y_tilde) = (stats.p_true, perturbed.p_true);
        Some(TheoryRecord {
            epoch,
            global_step,
            p_y,
            p_y_tilde,
            grad_norm: stats.grad_norm,
            bound: (log_p - half_step).exp(),
            lemma2_holds: log_p_tilde <= log_p - half_step,
            lambda: positive_ratio(1.0 - p_y_tilde, 1.0 - p_y),
            lambda_0: positive_ratio(1.0 - p_y_tilde, 1.0 - (half_step + log_p_tilde).exp()),
            entropy: binary_entropy(p_y),
        })
    }
}

/// `numerator / denominator`, None unless the denominator is positive (the
/// ratios above are undefined there).
fn positive_ratio(numerator: f64, denominator: f64) -> Option<f64> {
    (denominator > 0.0).then(|| numerator / denominator)
}

/// `H(p) = -p log p - (1 - p) log(1 - p)` in nats, with `0 log 0 = 0`.
pub fn binary_entropy(p: f64) -> f64 {
    let term = |q: f64| if q > 0.0 { -q * q.ln() } else { 0.0 };
    term(p) + term(1.0 - p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use csam_nn::optim::PerturbedStats;

    fn stats(ce: f64, ce_tilde: f64, grad_norm: f64) -> StepStats {
        StepStats {
            loss: ce,
            accuracy: 1.0,
            grad_norm,
            p_true: (-ce).exp(),
            perturbed: Some(PerturbedStats {
                loss: ce_tilde,
                cross_entropy: ce_tilde,
                p_true: (-ce_tilde).exp(),
            }),
            skipped: false,
            hits: vec![true],
            heads: None,
        }
    }

    #[test]
    fn entropy_of_hand_values() {
        assert_eq!(binary_entropy(0.0), 0.0);
        assert_eq!(binary_entropy(1.0), 0.0);
        // Pure-Rust f64: two terms of a libm ln (< 1 ulp) on values < 1, a few
        // ulps (<= 3e-16) apart.
        assert!((binary_entropy(0.5) - std::f64::consts::LN_2).abs() < 1e-15);
        // -0.9 ln 0.9 - 0.1 ln 0.1
        assert!((binary_entropy(0.9) - 0.325_082_973_391_448_2).abs() < 1e-15);
    }

    #[test]
    fn hand_computed_step() {
        // p = 0.8, p~ = 0.5, rho ||g|| / 2 = 0.05 * 4 / 2 = 0.1.
        let record =
            TheoryRecord::from_step(2, 17, 0.05, &stats(-(0.8f64.ln()), -(0.5f64.ln()), 4.0))
                .unwrap();
        assert_eq!((record.epoch, record.global_step), (2, 17));
        // Pure-Rust f64 from p = exp(ln 0.8), off by <= 1 ulp: bound and entropy
        // (values < 1) within a few ulps (~3e-16); the ratios divide by 1 - p =
        // 0.2 (relative error ~6e-16 on 2.5, ~1.4e-15), so their bar is 1e-12.
        assert!((record.bound - 0.8 * (-0.1f64).exp()).abs() < 1e-15);
        assert!(record.lemma2_holds, "0.5 <= 0.724");
        assert!((record.lambda.unwrap() - 0.5 / 0.2).abs() < 1e-12);
        let lambda_0 = 0.5 / (1.0 - 0.1f64.exp() * 0.5);
        assert!((record.lambda_0.unwrap() - lambda_0).abs() < 1e-12);
        assert!((record.entropy - binary_entropy(0.8)).abs() < 1e-15);
    }

    #[test]
    fn a_violation_is_reported_and_undefined_ratios_are_null() {
        // p~ = p: the bound exp(-0.1) p is smaller than p~.
        let same = TheoryRecord::from_step(1, 0, 0.05, &stats(0.2, 0.2, 4.0)).unwrap();
        assert!(!same.lemma2_holds);
        // p~ e^{rho||g||/2} >= 1: lambda_0's denominator is not positive.
        let big = TheoryRecord::from_step(1, 0, 1.0, &stats(0.5, 0.01, 4.0)).unwrap();
        assert_eq!(big.lambda_0, None);
        // p = 1 exactly: lambda undefined.
        let sure = TheoryRecord::from_step(1, 0, 0.05, &stats(0.0, 0.3, 1.0)).unwrap();
        assert_eq!(sure.lambda, None);
        let json = serde_json::to_string(&sure).unwrap();
        assert!(json.contains("\"lambda\":null"), "{json}");
    }

    #[test]
    fn plain_and_overflow_skipped_steps_have_no_record() {
        let plain = StepStats {
            perturbed: None,
            ..stats(0.5, 0.5, 1.0)
        };
        assert!(TheoryRecord::from_step(1, 0, 0.05, &plain).is_none());
        let overflowed = StepStats {
            skipped: true,
            grad_norm: f64::INFINITY,
            ..stats(0.5, 0.5, 1.0)
        };
        assert!(TheoryRecord::from_step(1, 0, 0.05, &overflowed).is_none());
    }
}
