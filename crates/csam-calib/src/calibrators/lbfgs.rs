//! A small deterministic L-BFGS minimiser (Nocedal & Wright 2006, Algorithm 7.4
//! and 7.5) for the smooth convex objectives of the affine calibrators and
//! Platt scaling.
//!
//! Search direction: the two-loop recursion over the last `memory` curvature
//! pairs `(s, y)`, scaled by `gamma = s.y / y.y` of the newest pair; a pair is kept
//! only if `s.y > 1e-10 |s| |y|` (positive curvature), so the implicit inverse
//! Hessian stays positive definite. Step length: backtracking from 1 (halving)
//! until the Armijo condition `f(x + t d) <= f(x) + 1e-4 t g.d` holds with a
//! finite value. Stopping rule, checked after every step:
//!
//! * `max_k |g_k| <= gradient_tolerance`, or
//! * `f_old - f_new <= value_tolerance * max(|f_old|, |f_new|, 1)` (the "factr"
//!   rule of L-BFGS-B), or
//! * no step length passes the Armijo test (the objective cannot be decreased
//!   any further in floating point), or `max_iterations` steps were taken.
//!
//! No randomness: the same input always gives the same iterates.

use std::collections::VecDeque;

/// Convergence settings of [`minimize`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct LbfgsOptions {
    /// Maximum number of accepted steps.
    pub max_iterations: usize,
    /// Stop once the largest absolute gradient component is at most this.
    pub gradient_tolerance: f64,
    /// Stop once one step decreases the objective by at most this, relative.
    pub value_tolerance: f64,
    /// Number of curvature pairs remembered.
    pub memory: usize,
}

impl Default for LbfgsOptions {
    /// `max_iterations = 1000`, `gradient_tolerance = 1e-9`,
    /// `value_tolerance = 1e-13`, `memory = 10`.
    fn default() -> Self {
        Self {
            max_iterations: 1000,
            gradient_tolerance: 1e-9,
            value_tolerance: 1e-13,
            memory: 10,
        }
    }
}

/// Minimises `objective`, which returns `f(x)` and writes `grad f(x)` into its
/// second argument, starting from `x0`, and returns the last iterate `x`, where
/// `f(x) <= f(x0)` (steps are only accepted when they decrease `f`). `f(x0)` must be finite.
pub(crate) fn minimize<F>(mut objective: F, x0: Vec<f64>, options: &LbfgsOptions) -> Vec<f64>
where
    F: FnMut(&[f64], &mut [f64]) -> f64,
{
    const ARMIJO: f64 = 1e-4;
    const MAX_HALVINGS: usize = 60;
    let n = x0.len();
    let mut x = x0;
    let mut gradient = vec![0.0; n];
    let mut value = objective(&x, &mut gradient);
    let mut pairs: VecDeque<CurvaturePair> = VecDeque::with_capacity(options.memory);
    let mut trial_x = vec![0.0; n];
    let mut trial_gradient = vec![0.0; n];

    for _ in 0..options.max_iterations {
        if max_abs(&gradient) <= options.gradient_tolerance {
            break;
        }
        let mut direction = search_direction(&gradient, &pairs);
        let mut slope = dot(&direction, &gradient);
        if slope >= 0.0 {
            // Not a descent direction (only after round-off): restart from steepest descent.
            pairs.clear();
            direction = search_direction(&gradient, &pairs);
            slope = dot(&direction, &gradient);
        }
        let mut step = 1.0;
        let mut accepted = None;
        for _ in 0..MAX_HALVINGS {
            for ((t, &xi), &di) in trial_x.iter_mut().zip(&x).zip(&direction) {
                *t = xi + step * di;
            }
            let trial_value = objective(&trial_x, &mut trial_gradient);
            if trial_value.is_finite() && trial_value <= value + ARMIJO * step * slope {
                accepted = Some(trial_value);
                break;
            }
            step *= 0.5;
        }
        let Some(new_value) = accepted else { break };
        let s: Vec<f64> = trial_x.iter().zip(&x).map(|(a, b)| a - b).collect();
        let y: Vec<f64> = trial_gradient
            .iter()
            .zip(&gradient)
            .map(|(a, b)| a - b)
            .collect();
        let sy = dot(&s, &y);
        if sy > 1e-10 * norm(&s) * norm(&y) {
            if pairs.len() == options.memory {
                pairs.pop_front();
            }
            pairs.push_back(CurvaturePair {
                rho: 1.0 / sy,
                s,
                y,
            });
        }
        std::mem::swap(&mut x, &mut trial_x);
        std::mem::swap(&mut gradient, &mut trial_gradient);
        let decrease = value - new_value;
        let scale = value.abs().max(new_value.abs()).max(1.0);
        value = new_value;
        if decrease <= options.value_tolerance * scale {
            break;
        }
    }
    x
}

struct CurvaturePair {
    s: Vec<f64>,
    y: Vec<f64>,
    rho: f64,
}

/// `-H g` by the two-loop recursion; with no pairs, steepest descent scaled so
/// that its largest component is at most 1 (a safe first trial step).
fn search_direction(gradient: &[f64], pairs: &VecDeque<CurvaturePair>) -> Vec<f64> {
    let mut q = gradient.to_vec();
    let mut alphas = Vec::with_capacity(pairs.len());
    for pair in pairs.iter().rev() {
        let alpha = pair.rho * dot(&pair.s, &q);
        axpy(-alpha, &pair.y, &mut q);
        alphas.push(alpha);
    }
    let gamma = match pairs.back() {
        Some(last) => 1.0 / (last.rho * dot(&last.y, &last.y)),
        None => 1.0 / max_abs(gradient).max(1.0),
    };
    q.iter_mut().for_each(|v| *v *= gamma);
    for (pair, alpha) in pairs.iter().zip(alphas.into_iter().rev()) {
        let beta = pair.rho * dot(&pair.y, &q);
        axpy(alpha - beta, &pair.s, &mut q);
    }
    q.iter_mut().for_each(|v| *v = -*v);
    q
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn norm(a: &[f64]) -> f64 {
    dot(a, a).sqrt()
}

fn max_abs(a: &[f64]) -> f64 {
    a.iter().fold(0.0, |m, v| m.max(v.abs()))
}

fn axpy(alpha: f64, x: &[f64], y: &mut [f64]) {
    y.iter_mut().zip(x).for_each(|(yi, xi)| *yi += alpha * xi);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_minimum_of_the_rosenbrock_function() {
        let rosenbrock = |x: &[f64], g: &mut [f64]| {
            let (a, b) = (x[0], x[1]);
            g[0] = -2.0 * (1.0 - a) - 400.0 * a * (b - a * a);
            g[1] = 200.0 * (b - a * a);
            (1.0 - a).powi(2) + 100.0 * (b - a * a).powi(2)
        };
        let found = minimize(rosenbrock, vec![-1.2, 1.0], &LbfgsOptions::default());
        // The Hessian at (1, 1) has smallest eigenvalue 0.4: the gradient rule
        // (max |g| <= 1e-9) leaves |x - x*| <= 1.5e-9 / 0.4 ~ 4e-9; the value rule (a
        // step gaining <= 1e-13) f - f* ~ 1e-13, |x - x*| <= sqrt(2e-13 / 0.4) ~ 7e-7.
        assert!((found[0] - 1.0).abs() < 1e-6, "{found:?}");
        assert!((found[1] - 1.0).abs() < 1e-6, "{found:?}");
    }

    #[test]
    fn solves_an_ill_conditioned_quadratic_exactly() {
        // f(x) = 1/2 sum_i c_i (x_i - i)^2 with condition number 1e4.
        let scales = [1.0, 10.0, 100.0, 1e4];
        let quadratic = |x: &[f64], g: &mut [f64]| {
            let mut f = 0.0;
            for i in 0..4 {
                let r = x[i] - i as f64;
                g[i] = scales[i] * r;
                f += 0.5 * scales[i] * r * r;
            }
            f
        };
        let found = minimize(quadratic, vec![5.0; 4], &LbfgsOptions::default());
        // The gradient rule, max |c_i (x_i - i)| <= 1e-9 with c_i >= 1, bounds each
        // |x_i - i| by 1e-9; f64 round-off of x_i <= 3 is 4.4e-16. A search that
        // stopped on the value rule (a step gaining <= 1e-13) before that fails here.
        for (i, xi) in found.iter().enumerate() {
            assert!((xi - i as f64).abs() < 1e-9, "{found:?}");
        }
    }
}
