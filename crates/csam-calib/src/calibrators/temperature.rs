//! Temperature scaling (Guo et al. 2017; crates/csam-calib/README.md, "TCE and
//! temperature scaling"):
//! `p = softmax(z / T)` with one scalar `T > 0` fitted on validation logits.
//! Dividing by `T` never changes the prediction, only the confidence.
//!
//! Two objectives:
//! * [`TemperatureObjective::Nll`] (default): minimise the validation NLL
//!   `g(b) = (1/N) sum_i [logsumexp(b z_i) - b z_{i, y_i}]`, convex in `b = 1/T`.
//!   The search runs over `s = ln T` in `[ln 0.01, ln 100]`: `f(s) = g(e^{-s})`
//!   is unimodal there, `f'(s) = -b g'(b)` changes sign once, so a bracket kept
//!   by the sign of `f'` always holds the minimiser. One pass over the logits
//!   gives `f` and its first four derivatives (`g^(k)(b)` is the mean of the
//!   `k`-th cumulant of `z` under `p = softmax(b z)`, less `z_y` for `k = 1`).
//!   Each step goes to the root of the cubic Taylor model of `f'` (error
//!   `O(e^4)` from an error `e`, against Newton's `O(e^2)`), or to Newton's
//!   point where that root is not found or leaves the bracket, when that
//!   stays inside the bracket; else to the golden-section point of the
//!   bracket. It stops when Newton's step or the bracket is below `1e-6` in
//!   `ln T`, at the cubic model's root there (within `1e-13` of the
//!   minimiser, tested; Newton's point, reported before, could be `1e-12`
//!   off), reporting the NLL there from the last pass's value and
//!   derivatives. On 1024 rows or more the search starts not at `T = 1` but
//!   at the minimiser of the same search on every 16th row (a warm start: the
//!   full passes, `N K` exponentials each, drop from five to ten to two).
//!   The exponentials are those of module `exp_lanes` (within two ulps of
//!   libm's), summed over lanes, in a pass compiled for AVX2 where the CPU
//!   has it.
//!   If the minimum lies beyond a bound (e.g. perfectly separable data wants
//!   `T -> 0`), the search ends at the bound, or earlier where the NLL is flat
//!   to machine precision.
//! * [`TemperatureObjective::EceGrid`]: lineage (a): `T` from the grid
//!   `0.1, 0.2, ..., 10.0` with the smallest validation ECE (15 right-closed
//!   equal-width bins through [`Calibrator::fit`]; any binning through
//!   [`fit_temperature`]); the smallest such `T` on a tie.

use ndarray::{s, Array2, ArrayView1, ArrayView2};
use serde::{Deserialize, Serialize};

use super::exp_lanes::exp_nonpositive;
use super::Calibrator;
use crate::binning::{BinStats, Binning, Norm};
use crate::error::{CalibError, Result};
use crate::parallel::{fold_rows, Threads};
use crate::scores::{softmax, validate_labels, validate_logits};

/// What the temperature is chosen to minimise on the validation set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TemperatureObjective {
    /// Validation NLL, solved to about `1e-13` in `ln T`.
    #[default]
    Nll,
    /// Validation ECE over the grid `T = 0.1, 0.2, ..., 10.0`.
    EceGrid,
}

/// A fitted (or given) temperature. A new value has `T = 1`, the identity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TemperatureScaling {
    /// The temperature `T > 0`; logits are divided by it.
    pub temperature: f64,
    /// The objective `fit` minimises.
    pub objective: TemperatureObjective,
}

impl TemperatureScaling {
    /// An unfitted scaler (`T = 1`) with the given objective.
    pub fn new(objective: TemperatureObjective) -> Self {
        TemperatureScaling {
            temperature: 1.0,
            objective,
        }
    }
}

impl Default for TemperatureScaling {
    fn default() -> Self {
        TemperatureScaling::new(TemperatureObjective::default())
    }
}

impl Calibrator for TemperatureScaling {
    fn name(&self) -> &'static str {
        "temperature"
    }

    fn fit(&mut self, logits: ArrayView2<'_, f64>, labels: &[usize]) -> Result<()> {
        self.temperature =
            fit_temperature(logits, labels, self.objective, &Binning::default())?.temperature;
        Ok(())
    }

    fn transform(&self, logits: ArrayView2<'_, f64>) -> Result<Array2<f64>> {
        if !(self.temperature.is_finite() && self.temperature > 0.0) {
            return Err(CalibError::InvalidArgument(format!(
                "temperature must be positive and finite, got {}",
                self.temperature
            )));
        }
        validate_logits(logits)?;
        let t = self.temperature;
        let scaled = logits.mapv(|z| z / t);
        // A tiny temperature (1e-320, say, read from a file) sends finite
        // logits to infinity, and the softmax to NaN.
        if scaled.iter().any(|z| !z.is_finite()) {
            return Err(CalibError::InvalidArgument(format!(
                "temperature {t} divides the logits beyond the float64 range"
            )));
        }
        Ok(softmax(scaled.view()))
    }
}

/// The outcome of a temperature fit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TemperatureFit {
    /// The chosen temperature.
    pub temperature: f64,
    /// The objective's value at it (validation NLL or ECE).
    pub objective_value: f64,
    /// Steps (cubic model, Newton or golden section) on all rows (NLL; the warm start's on a
    /// subsample are not counted) or grid points tried (ECE grid).
    pub iterations: usize,
}

/// Bounds of the NLL search on `T`.
const T_MIN: f64 = 0.01;
const T_MAX: f64 = 100.0;
/// Stopping tolerance on `ln T`.
const TOLERANCE: f64 = 1e-6;
/// A safety net only: the bracket shrinks by at least 0.382 per golden step.
const MAX_ITERATIONS: usize = 200;

/// Fits `T` on validation logits (`N x K`, finite) and labels. `ece_binning`
/// is the binning of the [`TemperatureObjective::EceGrid`] objective.
/// [`par_fit_temperature`] on one thread.
pub fn fit_temperature(
    logits: ArrayView2<'_, f64>,
    labels: &[usize],
    objective: TemperatureObjective,
    ece_binning: &Binning,
) -> Result<TemperatureFit> {
    par_fit_temperature(logits, labels, objective, ece_binning, Threads::ONE)
}

/// [`fit_temperature`] with the NLL's passes over the rows split across
/// `threads` (see [`crate::parallel`]): each pass's sums become sums of
/// per-thread partial sums, which can move the fitted temperature in the
/// last bits between thread counts (tested within `1e-12`); the same thread
/// count gives the same bits. The ECE grid runs on one thread.
pub fn par_fit_temperature(
    logits: ArrayView2<'_, f64>,
    labels: &[usize],
    objective: TemperatureObjective,
    ece_binning: &Binning,
    threads: Threads,
) -> Result<TemperatureFit> {
    validate_logits(logits)?;
    validate_labels(labels, logits.nrows(), logits.ncols())?;
    match objective {
        TemperatureObjective::Nll => Ok(fit_nll(logits, labels, threads)),
        TemperatureObjective::EceGrid => fit_ece_grid(logits, labels, ece_binning),
    }
}

/// Validation NLL at `s = ln T` and its first two derivatives in `s`.
struct NllAt {
    value: f64,
    slope: f64,
    curvature: f64,
    /// The third and fourth derivatives in `s`: only for [`quartic_step`].
    third: f64,
    fourth: f64,
}

/// The sums over rows of the NLL's terms and their derivatives in `b`.
#[derive(Clone, Copy, Default)]
struct NllSums {
    g: f64,
    dg: f64,
    d2g: f64,
    d3g: f64,
    d4g: f64,
}

impl NllSums {
    /// The sums of the rows of `self` and then those of `later`.
    fn then(self, later: NllSums) -> NllSums {
        NllSums {
            g: self.g + later.g,
            dg: self.dg + later.dg,
            d2g: self.d2g + later.d2g,
            d3g: self.d3g + later.d3g,
            d4g: self.d4g + later.d4g,
        }
    }
}

/// [`NllAt`] at `s` in one pass over the rows, split across `threads` (the
/// partial sums added in row order: the same bits for the same thread
/// count), each part compiled for AVX2 where the CPU has it (the same
/// operations on the same lanes, so the same bits).
fn nll_at(logits: ArrayView2<'_, f64>, labels: &[usize], s: f64, threads: Threads) -> NllAt {
    let b = (-s).exp();
    let pass = |rows: ArrayView2<'_, f64>, labels: &[usize]| Ok(nll_sums(rows, labels, b));
    // The pass cannot fail, so neither can the fold.
    let sums = fold_rows(logits, labels, threads, pass, NllSums::then).unwrap_or_default();
    let n = labels.len() as f64;
    let (g, dg, d2g, d3g, d4g) = (
        sums.g / n,
        sums.dg / n,
        sums.d2g / n,
        sums.d3g / n,
        sums.d4g / n,
    );
    // f(s) = g(b(s)), b = e^{-s}, db/ds = -b, g^(k) the k-th cumulant's mean:
    // f' = -b g', f'' = b^2 g'' + b g', f''' = -b^3 g''' - 3 b^2 g'' - b g',
    // f'''' = b^4 g'''' + 6 b^3 g''' + 7 b^2 g'' + b g'.
    let (b2, b3) = (b * b, b * b * b);
    NllAt {
        value: g,
        slope: -b * dg,
        curvature: b2 * d2g + b * dg,
        third: -b3 * d3g - 3.0 * b2 * d2g - b * dg,
        fourth: b3 * b * d4g + 6.0 * b3 * d3g + 7.0 * b2 * d2g + b * dg,
    }
}

/// [`nll_pass`] in the widest instructions the CPU runs.
fn nll_sums(logits: ArrayView2<'_, f64>, labels: &[usize], b: f64) -> NllSums {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU runs AVX2 instructions (checked just above).
        return unsafe { nll_sums_avx2(logits, labels, b) };
    }
    nll_pass(logits, labels, b)
}

/// [`nll_pass`] compiled for AVX2; callers check that the CPU has it.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn nll_sums_avx2(logits: ArrayView2<'_, f64>, labels: &[usize], b: f64) -> NllSums {
    nll_pass(logits, labels, b)
}

#[inline(always)]
fn nll_pass(logits: ArrayView2<'_, f64>, labels: &[usize], b: f64) -> NllSums {
    let mut sums = NllSums::default();
    for (row, &label) in logits.outer_iter().zip(labels) {
        let moments = scaled_moments(row, b);
        sums.g += moments.log_sum_exp_minus(row[label]);
        sums.dg += moments.mean - row[label];
        sums.d2g += moments.variance;
        sums.d3g += moments.third_cumulant;
        sums.d4g += moments.fourth_cumulant;
    }
    sums
}

/// For `p = softmax(b z)`: `logsumexp(b z)` as `b m + ln_sum` (`m = max z`),
/// `E_p[z]` and `Var_p[z]`.
struct Moments {
    b: f64,
    max: f64,
    ln_sum: f64,
    mean: f64,
    variance: f64,
    /// The third and fourth cumulants of `z` under `p`.
    third_cumulant: f64,
    fourth_cumulant: f64,
}

impl Moments {
    /// `logsumexp(b z) - b z_y = b (m - z_y) + ln_sum`, exact for huge logits.
    fn log_sum_exp_minus(&self, z_y: f64) -> f64 {
        self.b * (self.max - z_y) + self.ln_sum
    }
}

/// One pass over the row: with `d = z - m`, `w = exp(b d)`, the sums of `w`,
/// `w d`, `w d^2` give `E_p[z] = m + E[d]` and `Var_p[z] = E[d^2] - E[d]^2` (the
/// shift by the max keeps `d` small where the mass is, so the difference is safe).
/// The sums run over [`LANES`] lanes (reduced at the end of the row) and the
/// exponentials through [`exp_nonpositive`] (`b d <= 0`), so that the
/// compiler vectorises the pass. A strided row is copied first.
#[inline(always)]
fn scaled_moments(z: ArrayView1<'_, f64>, b: f64) -> Moments {
    match z.as_slice() {
        Some(values) => moments_of(values, b),
        None => moments_of(&z.to_vec(), b),
    }
}

/// Lanes of the sums of [`scaled_moments`].
const LANES: usize = 4;
/// Entries of a row whose weights are computed in one go.
const CHUNK: usize = 64;

#[inline(always)]
fn moments_of(z: &[f64], b: f64) -> Moments {
    let m = z.iter().fold(f64::NEG_INFINITY, |acc, &v| acc.max(v));
    // Per lane, the sums of w d^k for k = 0..=4.
    let mut sums = [[0.0; LANES]; 5];
    let mut weights = [0.0; CHUNK];
    for chunk in z.chunks(CHUNK) {
        // The weights first, in a loop of their own (the exponentials are
        // most of the work, and vectorise best alone), then the sums.
        let weights = &mut weights[..chunk.len()];
        for (w, &v) in weights.iter_mut().zip(chunk) {
            *w = exp_nonpositive(b * (v - m));
        }
        let (groups, tail) = chunk.as_chunks::<LANES>();
        let (weight_groups, weight_tail) = weights.as_chunks::<LANES>();
        for (group, w) in groups.iter().zip(weight_groups) {
            for lane in 0..LANES {
                add_powers(&mut sums, lane, w[lane], group[lane] - m);
            }
        }
        for (lane, (&v, &w)) in tail.iter().zip(weight_tail).enumerate() {
            add_powers(&mut sums, lane, w, v - m);
        }
    }
    let [s0, s1, s2, s3, s4] = sums.map(|lanes| lanes.iter().sum::<f64>());
    // Raw moments of d under p, then cumulants (shift-free from the second on).
    let (m1, m2, m3, m4) = (s1 / s0, s2 / s0, s3 / s0, s4 / s0);
    Moments {
        b,
        max: m,
        ln_sum: s0.ln(),
        mean: m + m1,
        variance: (m2 - m1 * m1).max(0.0),
        third_cumulant: m3 - 3.0 * m2 * m1 + 2.0 * m1 * m1 * m1,
        fourth_cumulant: m4 - 4.0 * m3 * m1 - 3.0 * m2 * m2 + 12.0 * m2 * m1 * m1
            - 6.0 * m1 * m1 * m1 * m1,
    }
}

/// Adds `w d^k`, `k = 0..=4`, to the sums of one lane.
#[inline(always)]
fn add_powers(sums: &mut [[f64; LANES]; 5], lane: usize, w: f64, d: f64) {
    let mut term = w;
    for sum in sums.iter_mut() {
        sum[lane] += term;
        term *= d;
    }
}

/// The NLL fit: the search of [`search_nll`] first on every
/// [`WARM_START_STRIDE`]-th row, then on all rows from the value found there.
/// The subsample's minimiser is close to the full one, so the full-data search
/// (each step a pass of `N K` exponentials) starts where the cubic model's
/// step lands within about `1e-8`, and stops after two passes instead of five
/// to ten; it stops by the same rule as a search from `T = 1`, at the same
/// minimiser.
fn fit_nll(logits: ArrayView2<'_, f64>, labels: &[usize], threads: Threads) -> TemperatureFit {
    let start = if labels.len() >= WARM_START_MIN_ROWS {
        let rows = logits.slice(s![..;WARM_START_STRIDE, ..]);
        let row_labels: Vec<usize> = labels.iter().step_by(WARM_START_STRIDE).copied().collect();
        search_nll(rows, &row_labels, 0.0, threads).temperature.ln()
    } else {
        0.0
    };
    search_nll(logits, labels, start, threads)
}

/// Every how many rows the warm start of [`fit_nll`] reads.
const WARM_START_STRIDE: usize = 16;
/// Below this many rows the fit starts at `T = 1` (the subsample would be too
/// small to help).
const WARM_START_MIN_ROWS: usize = 64 * WARM_START_STRIDE;

/// Newton / golden-section search of the NLL's minimiser in `s = ln T` from
/// `s = start` (the module doc); `iterations` counts its steps.
fn search_nll(
    logits: ArrayView2<'_, f64>,
    labels: &[usize],
    start: f64,
    threads: Threads,
) -> TemperatureFit {
    const GOLDEN: f64 = 0.381_966_011_250_105_1; // (3 - sqrt 5) / 2
    let (mut lo, mut hi) = (T_MIN.ln(), T_MAX.ln());
    let mut s = start;
    let mut at = nll_at(logits, labels, s, threads);
    let mut iterations = 0;
    while iterations < MAX_ITERATIONS {
        iterations += 1;
        // The minimiser is left of s where f rises, right of it where f falls.
        if at.slope > 0.0 {
            hi = s;
        } else {
            lo = s;
        }
        let newton = s - at.slope / at.curvature;
        let inside = |x: f64| x > lo && x < hi;
        // A Newton step below the tolerance is taken even when it rounds to
        // no step at all (s is an end of the bracket, so `newton == s` is not
        // inside it): the search has converged.
        let converged = at.curvature > 0.0 && (newton - s).abs() < TOLERANCE;
        let next = if at.curvature > 0.0 && (inside(newton) || converged) {
            // The root of the cubic Taylor model of f': far from the
            // minimiser a pass closer than Newton's step; once Newton's step
            // is below the tolerance (the stopping rule), within O(h^4) of
            // the minimiser instead of Newton's O(h^2).
            match quartic_step(&at) {
                Some(h) if (converged && h.abs() < TOLERANCE) || (!converged && inside(s + h)) => {
                    s + h
                }
                _ => newton,
            }
        } else if s - lo > hi - s {
            s - GOLDEN * (s - lo)
        } else {
            s + GOLDEN * (hi - s)
        };
        let step = next - s;
        if converged || step.abs() < TOLERANCE || hi - lo < TOLERANCE {
            // The last step is below 1e-6 (or 2e-6 for the cubic model's
            // step; both s and next lie in the bracket): the value there is
            // the second-order Taylor value, off by at most
            // |f'''| |step|^3 / 6 < 2e-18 |f'''|; this saves the pass that
            // would only evaluate it.
            let value = at.value + step * (at.slope + 0.5 * step * at.curvature);
            return TemperatureFit {
                temperature: next.exp(),
                objective_value: value,
                iterations,
            };
        }
        s = next;
        at = nll_at(logits, labels, s, threads);
    }
    TemperatureFit {
        temperature: s.exp(),
        objective_value: at.value,
        iterations,
    }
}

/// The step `h` to the root of the cubic Taylor model of the slope,
/// `f' + f'' h + f''' h^2 / 2 + f'''' h^3 / 6`, found by Newton's method on
/// that cubic from Newton's step `-f' / f''`. From a start whose error is
/// `e` the root is off by `O(e^4)` instead of Newton's `O(e^2)`: from the
/// warm start (`e ~ 1e-2`) one pass lands within about `1e-8`, where the next
/// Newton step is below the tolerance. `None` (take Newton's step) when the
/// cubic's slope is not positive on the way, or it does not settle within
/// eight iterations, or it settles more than twice as far as Newton's step.
fn quartic_step(at: &NllAt) -> Option<f64> {
    let newton = -at.slope / at.curvature;
    let mut h = newton;
    for _ in 0..8 {
        let value = at.slope + h * (at.curvature + h * (at.third / 2.0 + h * at.fourth / 6.0));
        let derivative = at.curvature + h * (at.third + h * at.fourth / 2.0);
        if derivative.is_nan() || derivative <= 0.0 {
            return None;
        }
        let update = value / derivative;
        h -= update;
        if update.abs() <= 1e-12 * h.abs() {
            return (h.is_finite() && h.abs() <= 2.0 * newton.abs()).then_some(h);
        }
    }
    None
}

fn fit_ece_grid(
    logits: ArrayView2<'_, f64>,
    labels: &[usize],
    binning: &Binning,
) -> Result<TemperatureFit> {
    // The prediction does not depend on T > 0; only the confidence
    // 1 / sum_j exp((z_j - z_max) / T) does.
    let rows: Vec<(ArrayView1<'_, f64>, f64, bool)> = logits
        .outer_iter()
        .zip(labels)
        .map(|(row, &label)| {
            let (predicted, max) =
                row.iter()
                    .enumerate()
                    .fold((0, f64::NEG_INFINITY), |best, (k, &v)| {
                        if v > best.1 {
                            (k, v)
                        } else {
                            best
                        }
                    });
            (row, max, predicted == label)
        })
        .collect();
    // ECE is in [0, 1], so the first grid point replaces the infinite start.
    let (mut temperature, mut objective_value) = (1.0, f64::INFINITY);
    for step in 1..=100 {
        let t = f64::from(step) / 10.0;
        let pairs = rows.iter().map(|(row, max, hit)| {
            let denominator = row.fold(0.0, |acc, &v| acc + ((v - max) / t).exp());
            (1.0 / denominator, *hit)
        });
        let ece = BinStats::from_pairs(binning, pairs)?.calibration_error(Norm::L1);
        if ece < objective_value {
            (temperature, objective_value) = (t, ece);
        }
    }
    Ok(TemperatureFit {
        temperature,
        objective_value,
        iterations: 100,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::scoring::nll_from_logits;
    use ndarray::array;
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Logits of a model that is calibrated at temperature `t_true`: labels are
    /// drawn from softmax(z / t_true).
    fn calibrated_at(t_true: f64, n: usize, k: usize, seed: u64) -> (Array2<f64>, Vec<usize>) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let logits = Array2::from_shape_fn((n, k), |_| rng.random_range(-3.0..3.0));
        let probs = softmax(logits.mapv(|z| z / t_true).view());
        let labels = probs
            .outer_iter()
            .map(|p| {
                let u: f64 = rng.random();
                let mut cumulative = 0.0;
                p.iter()
                    .position(|&pk| {
                        cumulative += pk;
                        u < cumulative
                    })
                    .unwrap_or(k - 1)
            })
            .collect();
        (logits, labels)
    }

    #[test]
    fn nll_derivatives_match_finite_differences() {
        let (logits, labels) = calibrated_at(1.5, 300, 4, 1);
        let s = 0.3;
        let h = 1e-5;
        let at = nll_at(logits.view(), &labels, s, Threads::ONE);
        let plus = nll_at(logits.view(), &labels, s + h, Threads::ONE);
        let minus = nll_at(logits.view(), &labels, s - h, Threads::ONE);
        // Central differences: f64 round-off of a mean of 300 terms bounded by M,
        // 300 * 2.2e-16 * M, over h: M ~ 6 for the value gives <= 4e-8, M <= 21
        // (third cumulant of logits 6 wide) <= 1.4e-7; truncation h^2 / 6 times the
        // derivative two orders up, < 2e-8 below 1e3. A wrong term is off by >= 1e-2.
        assert!((at.slope - (plus.value - minus.value) / (2.0 * h)).abs() < 1e-7);
        assert!((at.curvature - (plus.slope - minus.slope) / (2.0 * h)).abs() < 1e-6);
        // The higher derivatives of the quartic step.
        assert!((at.third - (plus.curvature - minus.curvature) / (2.0 * h)).abs() < 1e-6);
        assert!((at.fourth - (plus.third - minus.third) / (2.0 * h)).abs() < 1e-6);
        // The value is the NLL of the scaled logits.
        let scaled = logits.mapv(|z| z / s.exp());
        let direct = nll_from_logits(scaled.view(), &labels).unwrap();
        // Two f64 means of 300 terms below 6: <= 2 * 300 * 2.2e-16 * 6 ~ 8e-13.
        assert!((at.value - direct).abs() < 1e-12);
    }

    #[test]
    fn nll_fit_is_a_stationary_point_reached_quickly() {
        let (logits, labels) = calibrated_at(2.0, 2000, 5, 2);
        let fit = fit_temperature(
            logits.view(),
            &labels,
            TemperatureObjective::Nll,
            &Binning::default(),
        )
        .unwrap();
        assert!(fit.iterations < 30, "{} iterations", fit.iterations);
        let s = fit.temperature.ln();
        for delta in [-1e-3, 1e-3] {
            assert!(
                nll_at(logits.view(), &labels, s + delta, Threads::ONE).value > fit.objective_value
            );
        }
        // The search stops within O(1e-24) of its slope's root (a cubic-model step
        // from a Newton step < 1e-6); the slope's round-off, 2000 * 2.2e-16 * 6
        // ~ 3e-12, is far below 1e-8, which a search stopped early misses.
        assert!(nll_at(logits.view(), &labels, s, Threads::ONE).slope.abs() < 1e-8);
    }

    /// `f'(s)` with libm's `exp` and sequential sums, as the fit computed it
    /// before the vectorised pass: an independent check of stationarity.
    fn libm_slope(logits: &Array2<f64>, labels: &[usize], s: f64) -> f64 {
        let b = (-s).exp();
        let mut dg = 0.0;
        for (row, &label) in logits.outer_iter().zip(labels) {
            let m = row.fold(f64::NEG_INFINITY, |acc, &v| acc.max(v));
            let (mut sum_w, mut sum_wz) = (0.0, 0.0);
            for &v in row {
                let w = (b * (v - m)).exp();
                sum_w += w;
                sum_wz += w * v;
            }
            dg += sum_wz / sum_w - row[label];
        }
        -b * dg / labels.len() as f64
    }

    #[test]
    fn fitted_temperature_is_stationary_under_libm_exp() {
        // Within 1e-13 of the minimiser in ln T: the slope there, computed
        // with libm's exp, is below 1e-13 times the curvature (a Newton step
        // below 1e-6, where the search stopped before, left up to about 1e-12).
        // Round-off bound: each slope is a mean of 4000 row terms (exp within 2
        // ulps of e^x, either glibc path) whose partial sums stay below ~300, so
        // 0.5 ulp(300) = 2.8e-14 per addition; over the curvature (b / f'' <= 1.7
        // here) <= ~5e-14 per slope if every rounding went one way, 1e-13 for two.
        for (t_true, seed) in [(2.0, 11), (0.5, 12), (1.0, 13), (4.0, 14), (0.2, 15)] {
            let (logits, labels) = calibrated_at(t_true, 4000, 10, seed);
            let fit = fit_nll(logits.view(), &labels, Threads::ONE);
            let s = fit.temperature.ln();
            let at = nll_at(logits.view(), &labels, s, Threads::ONE);
            let offset = libm_slope(&logits, &labels, s) / at.curvature;
            assert!(
                offset.abs() < 1e-13,
                "T {t_true}: {offset:e} from the minimiser"
            );
            assert!(fit.iterations <= 3, "T {t_true}: {} passes", fit.iterations);
        }
    }

    #[test]
    fn avx2_and_portable_passes_agree_to_the_bit() {
        let (logits, labels) = calibrated_at(1.7, 700, 37, 16);
        for b in [0.5, 1.0, 2.7] {
            let (fast, portable) = (
                nll_sums(logits.view(), &labels, b),
                nll_pass(logits.view(), &labels, b),
            );
            let bits =
                |sums: &NllSums| [sums.g, sums.dg, sums.d2g, sums.d3g, sums.d4g].map(f64::to_bits);
            assert_eq!(bits(&fast), bits(&portable), "b = {b}");
        }
    }

    #[test]
    fn threads_move_the_fit_by_rounding_only() {
        let (logits, labels) = calibrated_at(1.7, 3000, 20, 17);
        let fit = |threads: usize| {
            let threads = Threads::new(threads).unwrap();
            par_fit_temperature(
                logits.view(),
                &labels,
                TemperatureObjective::Nll,
                &Binning::default(),
                threads,
            )
            .unwrap()
        };
        let one = fit(1);
        for threads in [2, 3, 7] {
            let many = fit(threads);
            let gap = (many.temperature.ln() - one.temperature.ln()).abs();
            // Another order of the 3000-row sums: the slope's partial sums stay
            // below ~250, <= 2 * 0.5 ulp(256) = 5.6e-14 on the mean, and b / f'' ~ 1
            // here; the NLL's (terms ~3, partial sums growing to 9000): <= 1.1e-16 *
            // 4500 = 5e-13 on one thread, less in chunks. A lost chunk moves either by > 1e-3.
            assert!(gap < 1e-12, "{threads} threads: ln T differs by {gap:e}");
            assert!((many.objective_value - one.objective_value).abs() < 1e-12);
            assert_eq!(
                fit(threads).temperature.to_bits(),
                many.temperature.to_bits()
            );
        }
    }

    #[test]
    fn warm_start_reaches_the_minimiser_of_the_search_from_one() {
        for (t_true, seed) in [(2.0, 4), (0.5, 5), (1.0, 6), (4.0, 7)] {
            let (logits, labels) = calibrated_at(t_true, 5000, 8, seed);
            let warm = fit_nll(logits.view(), &labels, Threads::ONE);
            let from_one = search_nll(logits.view(), &labels, 0.0, Threads::ONE);
            let gap = (warm.temperature.ln() - from_one.temperature.ln()).abs();
            // Both stop at the root of one computed slope (same order of sums), whose
            // round-off, <= 0.5 ulp(~320) = 3.5e-14 on the mean, b / f'' <= 1.7,
            // blurs it by ~6e-14 each. The value: the Taylor error < 2e-18 |f'''|
            // and two means' round-off <= 2 * 1.1e-16 * 5000 / 2 ~ 5.5e-13 relative.
            assert!(gap < 1e-12, "T {t_true}: ln T differs by {gap:e}");
            // The reported value (a Taylor step from the last pass) is the NLL there.
            let direct = nll_at(logits.view(), &labels, warm.temperature.ln(), Threads::ONE).value;
            assert!((warm.objective_value - direct).abs() < 1e-12 * direct);
        }
    }

    #[test]
    fn separable_data_drives_the_temperature_down() {
        // Every prediction right: the NLL falls as T -> 0 until it is flat to
        // machine precision (or T reaches its lower bound).
        let logits = array![[2.0, 0.0], [0.0, 2.0]];
        let fit = fit_temperature(
            logits.view(),
            &[0, 1],
            TemperatureObjective::Nll,
            &Binning::default(),
        )
        .unwrap();
        assert!(fit.temperature < 0.1, "{}", fit.temperature);
        // The NLL is ln(1 + e^{-2/T}) ~ e^{-2/T}: the slope rounds to 0 once that is
        // below 1.1e-16 (or T stops at 0.01, e^-200); T = 0.1 would still give 2e-9.
        assert!(fit.objective_value < 1e-12);
    }

    #[test]
    fn ece_grid_picks_a_grid_point_that_beats_t_one() {
        let (logits, labels) = calibrated_at(2.0, 3000, 5, 3);
        let mut scaler = TemperatureScaling::new(TemperatureObjective::EceGrid);
        scaler.fit(logits.view(), &labels).unwrap();
        let t = scaler.temperature;
        // t = step / 10, then * 10: two roundings, <= 2 ulp(100) ~ 3e-14 off an integer.
        // The pick's sampling spread at n = 3000 is about 0.11 (simulated with
        // numpy, 100 draws of this set-up), so 0.5 is > 4 standard deviations.
        assert!((t * 10.0 - (t * 10.0).round()).abs() < 1e-12 && (0.1..=10.0).contains(&t));
        assert!((t - 2.0).abs() < 0.5, "{t}");
        let probs = scaler.transform(logits.view()).unwrap();
        let at_t =
            crate::metrics::ece(probs.view(), &labels, &Binning::default(), Norm::L1).unwrap();
        let at_one = crate::metrics::ece(
            softmax(logits.view()).view(),
            &labels,
            &Binning::default(),
            Norm::L1,
        )
        .unwrap();
        assert!(at_t <= at_one);
    }

    #[test]
    fn transform_divides_logits_and_serde_round_trips() {
        let scaler = TemperatureScaling {
            temperature: 2.0,
            objective: TemperatureObjective::Nll,
        };
        let p = scaler
            .transform(array![[0.0, 2.0 * 3.0_f64.ln()]].view())
            .unwrap();
        // Softmax of (0, ln 3): a few roundings of values <= 4, ~3 ulp(0.75) = 3.3e-16.
        assert!((p[[0, 1]] - 0.75).abs() < 1e-15);
        let json = serde_json::to_string(&scaler).unwrap();
        assert_eq!(json, r#"{"temperature":2.0,"objective":"nll"}"#);
        let back: TemperatureScaling = serde_json::from_str(&json).unwrap();
        assert_eq!(back, scaler);
        let bad = TemperatureScaling {
            temperature: 0.0,
            ..scaler
        };
        assert!(bad.transform(array![[0.0, 1.0]].view()).is_err());
        // Positive and finite, but dividing by it overflows: refused, not NaN.
        let subnormal: TemperatureScaling =
            serde_json::from_str(r#"{"temperature":1e-320,"objective":"nll"}"#).unwrap();
        let refused = subnormal.transform(array![[0.0, 1.0]].view()).unwrap_err();
        assert!(
            refused.to_string().contains("beyond the float64 range"),
            "{refused}"
        );
    }

    #[test]
    fn bad_input_is_refused() {
        let mut scaler = TemperatureScaling::default();
        assert!(scaler.fit(array![[0.0, f64::NAN]].view(), &[0]).is_err());
        assert!(scaler.fit(array![[0.0, 1.0]].view(), &[2]).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4))]
        #[test]
        fn calibrated_logits_give_temperature_near_one(seed in 0u64..1000) {
            let (logits, labels) = calibrated_at(1.0, 20_000, 10, seed);
            let fit = fit_temperature(logits.view(), &labels, TemperatureObjective::Nll, &Binning::default()).unwrap();
            // Sampling: SE(ln T) = 1 / sqrt(n f''), f'' = mean Var_p(z) ~ 0.81 here, so
            // SE ~ 0.008 at n = 20000 and 0.1 is > 12 standard errors.
            prop_assert!((fit.temperature - 1.0).abs() < 0.1, "T = {}", fit.temperature);
            prop_assert!(fit.iterations < 30);
        }
    }
}
