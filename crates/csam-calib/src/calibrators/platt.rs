//! Platt scaling (Platt 1999, "Probabilistic outputs for support vector machines and
//! comparisons to regularized likelihood methods"), for binary classifiers (`K = 2`).
//!
//! The score is the logit margin `s = z_1 - z_0` (so `softmax(z)_1 = sigma(s)`), and the
//! calibrated probability of class 1 is `q_1 = sigma(a s + b)`, `q_0 = sigma(-(a s + b))`.
//! `(a, b)` minimise the cross-entropy against Platt's smoothed targets
//!
//! `t_n = (N+ + 1) / (N+ + 2)` if `y_n = 1`, `t_n = 1 / (N- + 2)` if `y_n = 0`,
//!
//! `L(a, b) = (1/N) sum_n [t_n softplus(-u_n) + (1 - t_n) softplus(u_n)]`, `u_n = a s_n + b`,
//!
//! with gradient `dL/du_n = (sigma(u_n) - t_n) / N`. The smoothed targets keep the
//! optimum finite even on separable data. Fitted by the same deterministic L-BFGS as
//! the affine calibrators (tolerances in [`affine`](super::affine)), starting from the
//! identity `a = 1, b = 0` (the uncalibrated `softmax(z)`), which is also `Default`.
//! Scikit-learn's `CalibratedClassifierCV(method="sigmoid")` fits the same model.

use ndarray::{Array2, ArrayView2};
use serde::{Deserialize, Serialize};

use super::input::{check_fit_inputs, check_transform_inputs};
use super::lbfgs::{minimize, LbfgsOptions};
use super::Calibrator;
use crate::error::{CalibError, Result};

/// Platt scaling, `q_1 = sigma(slope * (z_1 - z_0) + intercept)`; see the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "PlattParts")]
pub struct PlattScaling {
    slope: f64,
    intercept: f64,
}

impl Default for PlattScaling {
    /// The identity map `a = 1, b = 0`.
    fn default() -> Self {
        Self {
            slope: 1.0,
            intercept: 0.0,
        }
    }
}

impl PlattScaling {
    /// A map with the given finite `slope` `a` and `intercept` `b`.
    pub fn new(slope: f64, intercept: f64) -> Result<Self> {
        if !(slope.is_finite() && intercept.is_finite()) {
            return Err(CalibError::InvalidArgument(format!(
                "platt: slope {slope} and intercept {intercept} must be finite"
            )));
        }
        Ok(Self { slope, intercept })
    }

    /// The slope `a`.
    pub fn slope(&self) -> f64 {
        self.slope
    }

    /// The intercept `b`.
    pub fn intercept(&self) -> f64 {
        self.intercept
    }
}

/// `ln(1 + e^u)` without overflow.
fn softplus(u: f64) -> f64 {
    u.max(0.0) + (-u.abs()).exp().ln_1p()
}

/// `1 / (1 + e^-u)` without overflow.
fn sigmoid(u: f64) -> f64 {
    if u >= 0.0 {
        1.0 / (1.0 + (-u).exp())
    } else {
        let e = u.exp();
        e / (1.0 + e)
    }
}

fn require_binary(logits: ArrayView2<'_, f64>) -> Result<()> {
    match logits.ncols() {
        2 => Ok(()),
        k => Err(CalibError::Fit {
            method: "platt",
            reason: format!(
                "Platt scaling is for binary classifiers (K = 2), got K = {k}; \
                 use temperature, vector, matrix, dirichlet, histogram or isotonic"
            ),
        }),
    }
}

impl Calibrator for PlattScaling {
    fn name(&self) -> &'static str {
        "platt"
    }

    fn fit(&mut self, logits: ArrayView2<'_, f64>, labels: &[usize]) -> Result<()> {
        require_binary(logits)?;
        check_fit_inputs("platt", logits, labels)?;
        let margins: Vec<f64> = logits.rows().into_iter().map(|z| z[1] - z[0]).collect();
        let n_positive = labels.iter().filter(|&&y| y == 1).count() as f64;
        let n_negative = labels.len() as f64 - n_positive;
        let (high, low) = (
            (n_positive + 1.0) / (n_positive + 2.0),
            1.0 / (n_negative + 2.0),
        );
        let targets: Vec<f64> = labels
            .iter()
            .map(|&y| if y == 1 { high } else { low })
            .collect();
        let inv_n = 1.0 / margins.len() as f64;
        let objective = |ab: &[f64], gradient: &mut [f64]| {
            let (mut value, mut d_slope, mut d_intercept) = (0.0, 0.0, 0.0);
            for (&s, &t) in margins.iter().zip(&targets) {
                let u = ab[0] * s + ab[1];
                value += t * softplus(-u) + (1.0 - t) * softplus(u);
                let residual = sigmoid(u) - t;
                d_slope += residual * s;
                d_intercept += residual;
            }
            gradient[0] = d_slope * inv_n;
            gradient[1] = d_intercept * inv_n;
            value * inv_n
        };
        let found = minimize(objective, vec![1.0, 0.0], &LbfgsOptions::default());
        *self = Self::new(found[0], found[1])?;
        Ok(())
    }

    fn transform(&self, logits: ArrayView2<'_, f64>) -> Result<Array2<f64>> {
        check_transform_inputs("platt", logits, 2)?;
        let mut out = Array2::zeros(logits.dim());
        for (mut q, z) in out.rows_mut().into_iter().zip(logits.rows()) {
            let u = self.slope * (z[1] - z[0]) + self.intercept;
            if !u.is_finite() {
                return Err(CalibError::InvalidArgument(format!(
                    "platt: calibrated margin overflows for logits {z}; the input logits are too large"
                )));
            }
            q[0] = sigmoid(-u);
            q[1] = sigmoid(u);
        }
        Ok(out)
    }
}

#[derive(Deserialize)]
struct PlattParts {
    slope: f64,
    intercept: f64,
}

impl TryFrom<PlattParts> for PlattScaling {
    type Error = CalibError;
    fn try_from(parts: PlattParts) -> Result<Self> {
        Self::new(parts.slope, parts.intercept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn refuses_more_than_two_classes() {
        let mut platt = PlattScaling::default();
        let err = platt
            .fit(array![[0.0, 1.0, 2.0], [1.0, 0.0, 2.0]].view(), &[0, 1])
            .unwrap_err();
        assert!(err.to_string().contains("K = 2"), "{err}");
    }

    /// With a constant margin the slope and intercept are not separately identified,
    /// but the optimum of `a s + b` is the logit of the mean smoothed target:
    /// 2 positives, 2 negatives -> targets 3/4 and 1/4, mean 1/2, so `q_1 = 1/2`.
    #[test]
    fn constant_score_gives_the_mean_smoothed_target() {
        let logits = array![[0.0, 1.0], [0.0, 1.0], [0.0, 1.0], [0.0, 1.0]];
        let mut platt = PlattScaling::default();
        platt.fit(logits.view(), &[1, 1, 0, 0]).unwrap();
        let q = platt.transform(array![[0.0, 1.0]].view()).unwrap();
        // With every margin 1 the intercept's gradient is q_1 minus the mean target, so
        // L-BFGS's gradient rule (<= 1e-9) leaves |q_1 - mean| <= 1e-9, plus ~1e-16 round-off.
        assert!((q[[0, 1]] - 0.5).abs() < 1e-8, "{q}");
        // Three positives, one negative: targets 4/5 (x3) and 1/3 -> mean 41/60.
        platt.fit(logits.view(), &[1, 1, 1, 0]).unwrap();
        let q = platt.transform(array![[0.0, 1.0]].view()).unwrap();
        assert!((q[[0, 1]] - 41.0 / 60.0).abs() < 1e-8, "{q}");
    }

    #[test]
    fn separable_data_gives_a_finite_fit() {
        let logits = array![[0.0, -2.0], [0.0, -1.0], [0.0, 1.0], [0.0, 2.0]];
        let mut platt = PlattScaling::default();
        platt.fit(logits.view(), &[0, 0, 1, 1]).unwrap();
        assert!(platt.slope().is_finite() && platt.slope() > 0.0);
        let q = platt.transform(logits.view()).unwrap();
        // Targets are 3/4 and 1/4, so no prediction reaches them with certainty.
        assert!(q.iter().all(|&p| p > 0.0 && p < 1.0));
    }
}
