//! Affine calibration maps `q = softmax(W x + b)` on per-sample features `x`,
//! fitted by minimising the regularised mean validation negative log-likelihood.
//! One implementation serves three calibrators, which differ only in what they
//! feed the map and how `W` is shaped:
//!
//! | calibrator | features `x` | `W` | reference |
//! |---|---|---|---|
//! | [`VectorScaling`](super::vector::VectorScaling) | logits `z` | diagonal | Guo et al. 2017 |
//! | [`MatrixScaling`](super::matrix::MatrixScaling) | logits `z` | full `K x K` | Guo et al. 2017 |
//! | [`DirichletCalibration`](super::dirichlet::DirichletCalibration) | `ln softmax(z)` | full `K x K` | Kull et al. 2019 |
//!
//! Objective, with `N` validation rows and labels `y_n`:
//!
//! `L(W, b) = (1/N) sum_n [ln sum_k exp(u_nk) - u_{n,y_n}] + R(W, b)`, `u_n = W x_n + b`,
//!
//! with gradient `dL/du_n = (softmax(u_n) - e_{y_n}) / N`, chained analytically to
//! `W` and `b`, and the regulariser `R` one of [`Regularisation`].
//! The fit starts at the identity (`W = I`, `b = 0`), which for every variant
//! reproduces the uncalibrated probabilities `softmax(z)`, and runs a deterministic
//! L-BFGS (see the private `lbfgs` module: stop when `max |grad L| <= 1e-9`, when a
//! step decreases `L` by at most `1e-13 max(|L|, 1)`, or after 1000 steps). Since each
//! step decreases `L`, the fitted map never has a higher objective than the
//! uncalibrated model. `L` is convex in `(W, b)`, so the fit is its global minimum
//! when one exists (on linearly separable validation data it does not, and the
//! parameters grow until the stopping rule fires).

use std::marker::PhantomData;

use ndarray::{Array2, ArrayView2, Axis};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::input::{check_fit_inputs, check_transform_inputs};
use super::lbfgs::{minimize, LbfgsOptions};
use super::Calibrator;
use crate::error::{CalibError, Result};
use crate::scores::{log_sum_exp, softmax};

/// Penalty added to the mean NLL of an affine calibration map (Kull et al. 2019, §4).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Regularisation {
    /// No penalty (Guo et al.'s vector and matrix scaling).
    None,
    /// `lambda / P * sum_i (theta_i - theta_identity_i)^2` over all `P` parameters
    /// (weights and intercepts): an L2 penalty centred on the identity map (the
    /// `reg_format = "identity"` option of Kull et al.'s reference code), so a huge
    /// `lambda` keeps the uncalibrated model.
    L2 {
        /// Strength `lambda >= 0`.
        lambda: f64,
    },
    /// Off-diagonal and intercept regularisation (ODIR, Kull et al. 2019, eq. 6):
    /// `lambda / (K (K - 1)) * sum_{i != j} w_ij^2 + mu / K * sum_j b_j^2`.
    /// The diagonal of `W` is free, so a huge penalty leaves a per-class power of
    /// the probabilities (Dirichlet) or a per-class scaling of the logits (matrix).
    Odir {
        /// Strength `lambda >= 0` on the off-diagonal weights.
        lambda: f64,
        /// Strength `mu >= 0` on the intercepts.
        mu: f64,
    },
}

impl Regularisation {
    fn validate(&self) -> Result<()> {
        let strengths: &[f64] = match self {
            Self::None => &[],
            Self::L2 { lambda } => &[*lambda],
            Self::Odir { lambda, mu } => &[*lambda, *mu],
        };
        match strengths.iter().find(|s| !(s.is_finite() && **s >= 0.0)) {
            Some(bad) => Err(CalibError::InvalidArgument(format!(
                "regularisation strength {bad} must be finite and >= 0"
            ))),
            None => Ok(()),
        }
    }

    /// Adds the penalty's gradient to `gradient` and returns its value.
    /// `theta` holds the flat weights (`L::count(K)` values) then the `K` intercepts.
    fn add_penalty<L: WeightLayout>(&self, k: usize, theta: &[f64], gradient: &mut [f64]) -> f64 {
        let n_weights = L::count(k);
        match *self {
            Self::None => 0.0,
            Self::L2 { lambda } => {
                let scale = lambda / theta.len() as f64;
                let identity = L::identity(k);
                let mut value = 0.0;
                for (i, &t) in theta.iter().enumerate() {
                    let centre = identity.get(i).copied().unwrap_or(0.0);
                    value += scale * (t - centre).powi(2);
                    gradient[i] += 2.0 * scale * (t - centre);
                }
                value
            }
            Self::Odir { lambda, mu } => {
                let mut value = 0.0;
                if k > 1 {
                    let scale = lambda / (k * (k - 1)) as f64;
                    for i in (0..n_weights).filter(|&i| L::is_off_diagonal(k, i)) {
                        value += scale * theta[i].powi(2);
                        gradient[i] += 2.0 * scale * theta[i];
                    }
                }
                let scale = mu / k as f64;
                for i in n_weights..theta.len() {
                    value += scale * theta[i].powi(2);
                    gradient[i] += 2.0 * scale * theta[i];
                }
                value
            }
        }
    }
}

/// Shape of the weight matrix `W` of an affine map, stored flat (row-major) in
/// memory and as [`WeightLayout::Stored`] in JSON.
pub trait WeightLayout {
    /// The JSON form of the weights.
    type Stored: Clone + std::fmt::Debug + PartialEq + Serialize + DeserializeOwned;
    /// Number of free weights for `K` classes.
    fn count(k: usize) -> usize;
    /// Flat weights of `W = I`.
    fn identity(k: usize) -> Vec<f64>;
    /// Whether flat weight `index` lies off the diagonal of `W`.
    fn is_off_diagonal(k: usize, index: usize) -> bool;
    /// `X W^T` (row `n` is `W x_n`) for features `X` of shape `N x K`.
    fn linear(k: usize, weights: &[f64], features: ArrayView2<'_, f64>) -> Array2<f64>;
    /// `d/dW sum_n r_n . (W x_n)`, flat, for residuals `R` and features `X` (`N x K`).
    fn gradient(
        k: usize,
        residuals: ArrayView2<'_, f64>,
        features: ArrayView2<'_, f64>,
    ) -> Vec<f64>;
    /// Stored form of flat weights.
    fn to_stored(k: usize, weights: &[f64]) -> Self::Stored;
    /// Flat weights of a stored matrix meant for `K` classes, or why its shape is wrong.
    fn from_stored(k: usize, stored: &Self::Stored) -> std::result::Result<Vec<f64>, String>;
}

/// Diagonal `W = diag(w)`: `u_k = w_k x_k + b_k` (vector scaling). Stored as `[w_1, .., w_K]`.
#[derive(Clone, Copy, Debug)]
pub enum Diagonal {}

impl WeightLayout for Diagonal {
    type Stored = Vec<f64>;
    fn count(k: usize) -> usize {
        k
    }
    fn identity(k: usize) -> Vec<f64> {
        vec![1.0; k]
    }
    fn is_off_diagonal(_k: usize, _index: usize) -> bool {
        false
    }
    fn linear(_k: usize, weights: &[f64], features: ArrayView2<'_, f64>) -> Array2<f64> {
        let mut out = features.to_owned();
        for mut row in out.rows_mut() {
            row.iter_mut().zip(weights).for_each(|(x, w)| *x *= w);
        }
        out
    }
    fn gradient(
        _k: usize,
        residuals: ArrayView2<'_, f64>,
        features: ArrayView2<'_, f64>,
    ) -> Vec<f64> {
        (&residuals * &features).sum_axis(Axis(0)).to_vec()
    }
    fn to_stored(_k: usize, weights: &[f64]) -> Vec<f64> {
        weights.to_vec()
    }
    fn from_stored(k: usize, stored: &Vec<f64>) -> std::result::Result<Vec<f64>, String> {
        if stored.len() == k {
            Ok(stored.clone())
        } else {
            Err(format!("{} diagonal weights for {k} classes", stored.len()))
        }
    }
}

/// Full `K x K` matrix `W`: `u = W x + b` (matrix scaling, Dirichlet calibration).
/// Stored as `K` rows of `K` values.
#[derive(Clone, Copy, Debug)]
pub enum Full {}

impl WeightLayout for Full {
    type Stored = Vec<Vec<f64>>;
    fn count(k: usize) -> usize {
        k * k
    }
    fn identity(k: usize) -> Vec<f64> {
        Array2::<f64>::eye(k).into_iter().collect()
    }
    fn is_off_diagonal(k: usize, index: usize) -> bool {
        index / k != index % k
    }
    fn linear(k: usize, weights: &[f64], features: ArrayView2<'_, f64>) -> Array2<f64> {
        features.dot(&square(k, weights).t())
    }
    fn gradient(
        _k: usize,
        residuals: ArrayView2<'_, f64>,
        features: ArrayView2<'_, f64>,
    ) -> Vec<f64> {
        residuals.t().dot(&features).into_iter().collect()
    }
    fn to_stored(k: usize, weights: &[f64]) -> Vec<Vec<f64>> {
        weights.chunks(k).map(<[f64]>::to_vec).collect()
    }
    fn from_stored(k: usize, stored: &Vec<Vec<f64>>) -> std::result::Result<Vec<f64>, String> {
        if stored.len() != k {
            return Err(format!("{} weight rows for {k} classes", stored.len()));
        }
        match stored.iter().position(|row| row.len() != k) {
            Some(i) => Err(format!(
                "weight row {i} has {} values; a {k} x {k} matrix is needed",
                stored[i].len()
            )),
            None => Ok(stored.concat()),
        }
    }
}

fn square(k: usize, weights: &[f64]) -> ArrayView2<'_, f64> {
    // Invariant: callers pass exactly K * K weights (checked when the map is built).
    ArrayView2::from_shape((k, k), weights).expect("K x K weights")
}

/// What distinguishes one affine calibrator from another: its features, the
/// shape of `W`, its name and its default regulariser.
pub trait AffineVariant {
    /// Shape of `W`.
    type Layout: WeightLayout;
    /// Name used on the command line and in reports.
    const NAME: &'static str;
    /// Regulariser used by `Default`.
    const DEFAULT_REGULARISATION: Regularisation;
    /// Features `x_n` (`N x K`) computed from finite logits `z_n`.
    fn features(logits: ArrayView2<'_, f64>) -> Array2<f64>;
}

/// An affine calibration map `softmax(W x + b)` on the features of variant `V`
/// (see the module documentation for the objective and the optimiser).
/// `Default` is unfitted (no classes yet) with `V`'s default regulariser.
#[derive(Debug, PartialEq)]
pub struct AffineCalibrator<V: AffineVariant> {
    /// Flat weights, `V::Layout::count(K)` values.
    weights: Vec<f64>,
    /// Intercepts, `K` values (empty before `fit`).
    bias: Vec<f64>,
    regularisation: Regularisation,
    variant: PhantomData<V>,
}

impl<V: AffineVariant> Clone for AffineCalibrator<V> {
    fn clone(&self) -> Self {
        Self {
            weights: self.weights.clone(),
            bias: self.bias.clone(),
            regularisation: self.regularisation,
            variant: PhantomData,
        }
    }
}

impl<V: AffineVariant> Default for AffineCalibrator<V> {
    fn default() -> Self {
        Self {
            weights: Vec::new(),
            bias: Vec::new(),
            regularisation: V::DEFAULT_REGULARISATION,
            variant: PhantomData,
        }
    }
}

impl<V: AffineVariant> AffineCalibrator<V> {
    /// An unfitted calibrator that will be fitted with `regularisation`
    /// (strengths must be finite and non-negative).
    pub fn with_regularisation(regularisation: Regularisation) -> Result<Self> {
        regularisation.validate()?;
        Ok(Self {
            regularisation,
            ..Self::default()
        })
    }

    /// A fitted calibrator from explicit parameters: `weights` in `V::Layout`'s
    /// stored form for `K = bias.len() >= 2` classes, all values finite.
    pub fn from_parameters(
        weights: &<V::Layout as WeightLayout>::Stored,
        bias: Vec<f64>,
        regularisation: Regularisation,
    ) -> Result<Self> {
        regularisation.validate()?;
        let k = bias.len();
        if k < 2 {
            return Err(CalibError::InvalidArgument(format!(
                "{}: {k} intercepts; a fitted map needs K >= 2",
                V::NAME
            )));
        }
        let weights = V::Layout::from_stored(k, weights)
            .map_err(|why| CalibError::ShapeMismatch(format!("{}: {why}", V::NAME)))?;
        if let Some(bad) = weights.iter().chain(&bias).find(|v| !v.is_finite()) {
            return Err(CalibError::InvalidArgument(format!(
                "{}: parameter {bad} is not finite",
                V::NAME
            )));
        }
        Ok(Self {
            weights,
            bias,
            regularisation,
            variant: PhantomData,
        })
    }

    /// Number of classes `K` of the fitted map (0 before `fit`).
    pub fn n_classes(&self) -> usize {
        self.bias.len()
    }

    /// Fitted weights `W` in the layout's stored form.
    pub fn weights(&self) -> <V::Layout as WeightLayout>::Stored {
        V::Layout::to_stored(self.n_classes(), &self.weights)
    }

    /// Fitted intercepts `b`.
    pub fn bias(&self) -> &[f64] {
        &self.bias
    }

    /// The regulariser used (or to be used) by `fit`.
    pub fn regularisation(&self) -> Regularisation {
        self.regularisation
    }

    /// Calibrated logits `u_n = W x_n + b`, refusing an overflow to infinity.
    fn calibrated_logits(&self, logits: ArrayView2<'_, f64>) -> Result<Array2<f64>> {
        let features = V::features(logits);
        let mut u = V::Layout::linear(self.n_classes(), &self.weights, features.view());
        for mut row in u.rows_mut() {
            row.iter_mut().zip(&self.bias).for_each(|(u, b)| *u += b);
        }
        match u.indexed_iter().find(|(_, v)| !v.is_finite()) {
            Some(((row, col), _)) => Err(CalibError::InvalidArgument(format!(
                "{}: calibrated logit at row {row}, column {col} overflows; the input logits are too large",
                V::NAME
            ))),
            None => Ok(u),
        }
    }
}

/// Regularised mean NLL of `softmax(W x + b)` and its gradient (module docs).
fn objective<L: WeightLayout>(
    features: ArrayView2<'_, f64>,
    labels: &[usize],
    regularisation: &Regularisation,
    theta: &[f64],
    gradient: &mut [f64],
) -> f64 {
    let (n, k) = features.dim();
    let (weights, bias) = theta.split_at(L::count(k));
    let mut residuals = L::linear(k, weights, features);
    let mut nll = 0.0;
    for (mut row, &label) in residuals.rows_mut().into_iter().zip(labels) {
        row.iter_mut().zip(bias).for_each(|(u, b)| *u += b);
        let lse = log_sum_exp(row.view());
        nll += lse - row[label];
        row.mapv_inplace(|u| (u - lse).exp());
        row[label] -= 1.0;
    }
    let inv_n = 1.0 / n as f64;
    residuals.mapv_inplace(|r| r * inv_n);
    let weight_gradient = L::gradient(k, residuals.view(), features);
    let bias_gradient = residuals.sum_axis(Axis(0));
    for (g, v) in gradient
        .iter_mut()
        .zip(weight_gradient.iter().chain(bias_gradient.iter()))
    {
        *g = *v;
    }
    nll * inv_n + regularisation.add_penalty::<L>(k, theta, gradient)
}

impl<V: AffineVariant> Calibrator for AffineCalibrator<V> {
    fn name(&self) -> &'static str {
        V::NAME
    }

    fn fit(&mut self, logits: ArrayView2<'_, f64>, labels: &[usize]) -> Result<()> {
        check_fit_inputs(V::NAME, logits, labels)?;
        let k = logits.ncols();
        let features = V::features(logits);
        let mut theta0 = V::Layout::identity(k);
        theta0.extend(std::iter::repeat_n(0.0, k));
        let regularisation = self.regularisation;
        let found = minimize(
            |theta, gradient| {
                objective::<V::Layout>(features.view(), labels, &regularisation, theta, gradient)
            },
            theta0,
            &LbfgsOptions::default(),
        );
        let mut theta = found;
        self.bias = theta.split_off(V::Layout::count(k));
        self.weights = theta;
        Ok(())
    }

    fn transform(&self, logits: ArrayView2<'_, f64>) -> Result<Array2<f64>> {
        check_transform_inputs(V::NAME, logits, self.n_classes())?;
        Ok(softmax(self.calibrated_logits(logits)?.view()))
    }
}

/// JSON form: `{"weights": .., "bias": [..], "regularisation": {"kind": ..}}`.
#[derive(Serialize, Deserialize)]
struct AffineParts<W> {
    weights: W,
    bias: Vec<f64>,
    regularisation: Regularisation,
}

impl<V: AffineVariant> Serialize for AffineCalibrator<V> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        AffineParts {
            weights: self.weights(),
            bias: self.bias.clone(),
            regularisation: self.regularisation,
        }
        .serialize(serializer)
    }
}

impl<'de, V: AffineVariant> Deserialize<'de> for AffineCalibrator<V> {
    /// Refuses weights whose shape does not match the intercepts, non-finite
    /// parameters and negative regularisation strengths.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let parts = AffineParts::<<V::Layout as WeightLayout>::Stored>::deserialize(deserializer)?;
        Self::from_parameters(&parts.weights, parts.bias, parts.regularisation)
            .map_err(serde::de::Error::custom)
    }
}
