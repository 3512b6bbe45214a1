//! Tolerances derived from a floating type's epsilon and the sizes of a
//! computation, so that a bar holds for any summation order a CPU's kernels
//! choose (MKL, oneDNN and libtorch's own loops pick AVX-512 or AVX2 paths
//! per CPU, and split reductions across threads), never read off one
//! machine's result.

/// float32's machine epsilon (2^-23), as f64.
pub const F32_EPSILON: f64 = f32::EPSILON as f64;

/// Higham's `gamma_n = n u / (1 - n u)`, `u = epsilon / 2` the unit
/// round-off: the relative error, against the sum of the terms' magnitudes,
/// of a sum or dot product of `terms` terms accumulated in any order
/// ("Accuracy and Stability of Numerical Algorithms", 2nd ed., Section 3.1).
///
/// # Panics
/// When `n u >= 1`, where the bound says nothing.
pub fn sum_bound(terms: usize, epsilon: f64) -> f64 {
    let nu = terms as f64 * epsilon / 2.0;
    assert!(nu < 1.0, "{terms} terms: n u = {nu} >= 1, no bound");
    nu / (1.0 - nu)
}

/// How far apart two float32 trainings that are equal in exact arithmetic
/// (one process or two, one memory layout or another) may end, relative to
/// how far the weights moved from their common start, after `steps` steps of
/// `passes` forward-backward passes each (SAM: 2), when the longest float32
/// reduction behind a gradient has `reduction` terms.
///
/// Each pass's gradient is off by at most [`sum_bound`] of its magnitude,
/// and so is each step's move; over a few steps the errors add (the
/// training dynamics have not yet amplified them), so the bound is their
/// sum. Keep `steps` small: over epochs, round-off grows at a rate set by
/// the model and the CPU's kernels, which no constant bounds.
pub fn training_bar(steps: usize, passes: usize, reduction: usize) -> f64 {
    (steps * passes) as f64 * sum_bound(reduction, F32_EPSILON)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_covers_a_float32_sum_in_two_orders() {
        // 4096 terms of mixed signs and magnitudes, summed forwards and
        // backwards in float32, against their float64 sum.
        let terms: Vec<f32> = (0..4096)
            .map(|i| ((i * 7919 % 1000) as f32 - 500.0) * 1e-3 * (1.0 + (i % 13) as f32))
            .collect();
        let exact: f64 = terms.iter().map(|&t| f64::from(t)).sum();
        let magnitude: f64 = terms.iter().map(|&t| f64::from(t).abs()).sum();
        let forward: f32 = terms.iter().sum();
        let backward: f32 = terms.iter().rev().sum();
        let bar = sum_bound(terms.len(), F32_EPSILON) * magnitude;
        for sum in [forward, backward] {
            assert!((f64::from(sum) - exact).abs() <= bar);
        }
        assert!(training_bar(2, 2, 4096) == 4.0 * sum_bound(4096, F32_EPSILON));
    }
}
