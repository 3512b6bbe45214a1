//! Isotonic regression (Zadrozny & Elkan 2002, "Transforming classifier scores into
//! accurate multiclass probability estimates", KDD), one-vs-rest and renormalised.
//!
//! [`IsotonicRegression`] is the 1-D non-decreasing least-squares fit
//! `min_f sum_i w_i (y_i - f(x_i))^2` subject to `f` non-decreasing, solved exactly by
//! pool-adjacent-violators, and reproduces scikit-learn's
//! `IsotonicRegression(increasing=True, out_of_bounds="clip")`:
//!
//! 1. samples of zero weight are dropped; the rest are sorted by `(x, y)`;
//! 2. runs of equal `x` are merged into one point at the run's first `x` with the
//!    weighted mean of `y` and the summed weight (as scikit-learn's `_make_unique`,
//!    `x` values closer than `1e-15` to the run's first value count as equal);
//! 3. PAVA on the merged points (O(n) after the sort): a stack of blocks, each new point
//!    pooled with the blocks before it while their means are not increasing;
//! 4. interior points whose fitted value equals both neighbours' are dropped (they do
//!    not change the interpolant);
//! 5. prediction clips `x` to `[x_min, x_max]` and interpolates linearly between the
//!    remaining thresholds (scipy's `interp1d`), or returns the single value if one remains.
//!
//! [`IsotonicCalibration`] fits one such curve per class `k` on
//! `(p_k = softmax(z)_k, 1[y = k])`, maps each `p_k` through its curve and divides
//! each row by its sum (a row of zeros falls back to the uncalibrated `p`).

use ndarray::{Array2, ArrayView2};
use serde::{Deserialize, Serialize};

use super::input::{check_fit_inputs, check_transform_inputs};
use super::one_vs_rest::renormalise_rows;
use super::Calibrator;
use crate::error::{CalibError, Result};
use crate::scores::softmax;

/// Tolerance under which two sorted `x` values are merged (numpy's `finfo(float64).resolution`).
const TIE_TOLERANCE: f64 = 1e-15;

/// A fitted non-decreasing piecewise-linear curve; see the module documentation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "IsotonicParts")]
pub struct IsotonicRegression {
    /// Strictly increasing thresholds.
    x: Vec<f64>,
    /// Non-decreasing fitted values at the thresholds.
    y: Vec<f64>,
}

impl IsotonicRegression {
    /// Fits the curve to points `(x_i, y_i)` with optional non-negative weights
    /// (all 1 when `None`). Needs at least one point of positive weight; all values finite.
    pub fn fit(x: &[f64], y: &[f64], weights: Option<&[f64]>) -> Result<Self> {
        if x.len() != y.len() || weights.is_some_and(|w| w.len() != x.len()) {
            return Err(CalibError::ShapeMismatch(format!(
                "isotonic regression: {} x values, {} y values, {} weights",
                x.len(),
                y.len(),
                weights.map_or(x.len(), <[f64]>::len)
            )));
        }
        let weight = |i: usize| weights.map_or(1.0, |w| w[i]);
        for i in 0..x.len() {
            for (col, value) in [x[i], y[i], weight(i)].into_iter().enumerate() {
                if !value.is_finite() {
                    return Err(CalibError::NonFinite { row: i, col, value });
                }
            }
            if weight(i) < 0.0 {
                return Err(CalibError::InvalidArgument(format!(
                    "isotonic regression: negative weight {} at row {i}",
                    weight(i)
                )));
            }
        }
        let mut order: Vec<usize> = (0..x.len()).filter(|&i| weight(i) > 0.0).collect();
        if order.is_empty() {
            return Err(CalibError::Empty(
                "isotonic regression: no point with positive weight".into(),
            ));
        }
        order.sort_by(|&a, &b| x[a].total_cmp(&x[b]).then(y[a].total_cmp(&y[b])));

        // Step 2: merge runs of equal x.
        let mut points: Vec<Block> = Vec::new();
        let mut run_start = f64::NAN;
        for &i in &order {
            match points.last_mut() {
                Some(last) if x[i] - run_start < TIE_TOLERANCE => last.absorb(y[i], weight(i)),
                _ => {
                    run_start = x[i];
                    points.push(Block::new(x[i], y[i], weight(i)));
                }
            }
        }
        let xs: Vec<f64> = points.iter().map(|p| p.x).collect();
        let fitted = pool_adjacent_violators(points);
        Ok(trim_flat_interior(xs, fitted))
    }

    /// The fitted value at `x`: clipped to the fitted range, then linearly interpolated.
    pub fn predict(&self, x: f64) -> f64 {
        let n = self.x.len();
        if n == 1 {
            return self.y[0];
        }
        let x = x.clamp(self.x[0], self.x[n - 1]);
        // First threshold >= x, kept within 1..n so that [hi - 1, hi] is a segment.
        let hi = self.x.partition_point(|&t| t < x).clamp(1, n - 1);
        let (x_lo, x_hi, y_lo, y_hi) = (self.x[hi - 1], self.x[hi], self.y[hi - 1], self.y[hi]);
        let slope = (y_hi - y_lo) / (x_hi - x_lo);
        slope * (x - x_lo) + y_lo
    }

    /// Thresholds `x` (strictly increasing) and fitted values `y` (non-decreasing).
    pub fn thresholds(&self) -> (&[f64], &[f64]) {
        (&self.x, &self.y)
    }
}

/// A pooled run of points: weighted sum of `y` and total weight.
#[derive(Clone, Copy, Debug)]
struct Block {
    x: f64,
    weighted_sum: f64,
    weight: f64,
    len: usize,
}

impl Block {
    fn new(x: f64, y: f64, weight: f64) -> Self {
        Self {
            x,
            weighted_sum: y * weight,
            weight,
            len: 1,
        }
    }
    fn absorb(&mut self, y: f64, weight: f64) {
        self.weighted_sum += y * weight;
        self.weight += weight;
    }
    fn mean(&self) -> f64 {
        self.weighted_sum / self.weight
    }
}

/// Pool-adjacent-violators: the fitted value of every input point, in order.
fn pool_adjacent_violators(points: Vec<Block>) -> Vec<f64> {
    let mut stack: Vec<Block> = Vec::with_capacity(points.len());
    for point in points {
        let mut block = point;
        while let Some(previous) = stack.last() {
            if previous.mean() < block.mean() {
                break;
            }
            block.weighted_sum += previous.weighted_sum;
            block.weight += previous.weight;
            block.len += previous.len;
            stack.pop();
        }
        stack.push(block);
    }
    stack
        .iter()
        .flat_map(|b| std::iter::repeat_n(b.mean(), b.len))
        .collect()
}

/// Drops interior points whose value equals both neighbours' (scikit-learn's
/// `trim_duplicates`); the interpolant is unchanged.
fn trim_flat_interior(x: Vec<f64>, y: Vec<f64>) -> IsotonicRegression {
    let n = y.len();
    let keep = |i: usize| i == 0 || i + 1 == n || y[i] != y[i - 1] || y[i] != y[i + 1];
    let kept: Vec<usize> = (0..n).filter(|&i| keep(i)).collect();
    IsotonicRegression {
        x: kept.iter().map(|&i| x[i]).collect(),
        y: kept.iter().map(|&i| y[i]).collect(),
    }
}

#[derive(Deserialize)]
struct IsotonicParts {
    x: Vec<f64>,
    y: Vec<f64>,
}

impl TryFrom<IsotonicParts> for IsotonicRegression {
    type Error = CalibError;

    /// Refuses empty or unequal-length arrays, non-finite values, thresholds that
    /// do not strictly increase and values that decrease.
    fn try_from(parts: IsotonicParts) -> Result<Self> {
        if parts.x.is_empty() || parts.x.len() != parts.y.len() {
            return Err(CalibError::ShapeMismatch(format!(
                "isotonic curve: {} thresholds and {} values (need equal, at least 1)",
                parts.x.len(),
                parts.y.len()
            )));
        }
        if parts.x.iter().chain(&parts.y).any(|v| !v.is_finite()) {
            return Err(CalibError::InvalidArgument(
                "isotonic curve: non-finite threshold or value".into(),
            ));
        }
        if parts.x.windows(2).any(|w| w[0] >= w[1]) || parts.y.windows(2).any(|w| w[0] > w[1]) {
            return Err(CalibError::InvalidArgument(
                "isotonic curve: thresholds must strictly increase and values must not decrease"
                    .into(),
            ));
        }
        Ok(Self {
            x: parts.x,
            y: parts.y,
        })
    }
}

/// One-vs-rest isotonic calibration; see the module documentation.
/// `Default` is unfitted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "IsotonicCalibrationParts")]
pub struct IsotonicCalibration {
    /// One curve per class, mapping `p_k` to a calibrated score.
    curves: Vec<IsotonicRegression>,
}

impl IsotonicCalibration {
    /// The fitted curve of each class.
    pub fn curves(&self) -> &[IsotonicRegression] {
        &self.curves
    }
}

impl Calibrator for IsotonicCalibration {
    fn name(&self) -> &'static str {
        "isotonic"
    }

    fn fit(&mut self, logits: ArrayView2<'_, f64>, labels: &[usize]) -> Result<()> {
        check_fit_inputs("isotonic", logits, labels)?;
        let probabilities = softmax(logits);
        self.curves = probabilities
            .columns()
            .into_iter()
            .enumerate()
            .map(|(class, p)| {
                let is_class: Vec<f64> = labels
                    .iter()
                    .map(|&y| f64::from(u8::from(y == class)))
                    .collect();
                IsotonicRegression::fit(&p.to_vec(), &is_class, None)
            })
            .collect::<Result<_>>()?;
        Ok(())
    }

    fn transform(&self, logits: ArrayView2<'_, f64>) -> Result<Array2<f64>> {
        check_transform_inputs("isotonic", logits, self.curves.len())?;
        let probabilities = softmax(logits);
        let mut scores = probabilities.clone();
        for mut row in scores.rows_mut() {
            for (p, curve) in row.iter_mut().zip(&self.curves) {
                *p = curve.predict(*p);
            }
        }
        Ok(renormalise_rows(scores, probabilities.view()))
    }
}

#[derive(Deserialize)]
struct IsotonicCalibrationParts {
    curves: Vec<IsotonicRegression>,
}

impl TryFrom<IsotonicCalibrationParts> for IsotonicCalibration {
    type Error = CalibError;

    /// Refuses fewer than 2 classes and curves whose values leave `[0, 1]`.
    fn try_from(parts: IsotonicCalibrationParts) -> Result<Self> {
        if parts.curves.len() < 2 {
            return Err(CalibError::InvalidArgument(format!(
                "isotonic: {} class curves; a fitted calibrator needs K >= 2",
                parts.curves.len()
            )));
        }
        if let Some(class) = parts
            .curves
            .iter()
            .position(|c| c.y.iter().any(|v| !(0.0..=1.0).contains(v)))
        {
            return Err(CalibError::InvalidArgument(format!(
                "isotonic: the curve of class {class} leaves [0, 1]"
            )));
        }
        Ok(Self {
            curves: parts.curves,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn six_points_with_violators_by_hand() {
        // y = 1, 3, 2, 4, 3.5, 5 at x = 1..6: pools {3, 2} -> 2.5 and {4, 3.5} -> 3.75.
        let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let y = [1.0, 3.0, 2.0, 4.0, 3.5, 5.0];
        let fit = IsotonicRegression::fit(&x, &y, None).unwrap();
        let fitted: Vec<f64> = x.iter().map(|&v| fit.predict(v)).collect();
        assert_eq!(fitted, vec![1.0, 2.5, 2.5, 3.75, 3.75, 5.0]);
        // Between thresholds: linear interpolation; outside: clipped. Every operand
        // and result (2.5, 3.75, 0.5, 3.125) is a short dyadic fraction: exact in f64.
        assert!((fit.predict(3.5) - 3.125).abs() < 1e-15);
        assert_eq!(fit.predict(-10.0), 1.0);
        assert_eq!(fit.predict(10.0), 5.0);
    }

    #[test]
    fn ties_in_x_are_averaged_with_weights_before_pooling() {
        // x = 0 twice (y 0 with weight 1, y 1 with weight 3) -> one point 0.75 of weight 4;
        // then x = 1, y = 0.5 (weight 4) violates -> pooled (0.75*4 + 0.5*4)/8 = 0.625.
        let fit =
            IsotonicRegression::fit(&[1.0, 0.0, 0.0], &[0.5, 1.0, 0.0], Some(&[4.0, 3.0, 1.0]))
                .unwrap();
        assert_eq!(fit.thresholds(), (&[0.0, 1.0][..], &[0.625, 0.625][..]));
        assert_eq!(fit.predict(0.3), 0.625);
    }

    #[test]
    fn zero_weights_are_ignored_and_bad_weights_refused() {
        let fit = IsotonicRegression::fit(&[0.0, 1.0], &[5.0, 1.0], Some(&[0.0, 1.0])).unwrap();
        assert_eq!(fit.predict(0.0), 1.0);
        assert!(IsotonicRegression::fit(&[0.0], &[1.0], Some(&[-1.0])).is_err());
        assert!(IsotonicRegression::fit(&[0.0], &[1.0], Some(&[0.0])).is_err());
        assert!(IsotonicRegression::fit(&[f64::NAN], &[1.0], None).is_err());
    }

    #[test]
    fn refuses_decreasing_curves_in_json() {
        let bad = r#"{"x": [0.0, 1.0], "y": [0.8, 0.2]}"#;
        assert!(serde_json::from_str::<IsotonicRegression>(bad).is_err());
        let unsorted = r#"{"x": [1.0, 0.0], "y": [0.2, 0.8]}"#;
        assert!(serde_json::from_str::<IsotonicRegression>(unsorted).is_err());
    }
}
