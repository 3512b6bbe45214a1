//! Extreme eigenvalues of a symmetric operator known only through
//! matrix-vector products (here Hessian-vector products), by power
//! iteration and Lanczos (docs/theory.md: at most 100 products, relative
//! tolerance 1e-3 by default).

use tch::Tensor;

use super::{CurvatureError, Result};

/// When power iteration stops.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PowerSettings {
    /// At most this many products (>= 1).
    pub max_iterations: usize,
    /// Converged when `|mu_k - mu_{k-1}| <= tolerance * |mu_k|` (> 0).
    pub tolerance: f64,
}

impl Default for PowerSettings {
    /// 100 iterations, relative tolerance 1e-3 (`csam sharpness`'s defaults,
    /// docs/theory.md).
    fn default() -> Self {
        PowerSettings {
            max_iterations: 100,
            tolerance: 1e-3,
        }
    }
}

impl PowerSettings {
    /// Refuses zero iterations and a tolerance that is not a positive number.
    pub fn validate(&self) -> Result<()> {
        if self.max_iterations == 0 {
            return Err(CurvatureError::Setting {
                key: "max_iterations",
                value: "0".into(),
                reason: "must be at least 1",
            });
        }
        if !(self.tolerance.is_finite() && self.tolerance > 0.0) {
            return Err(CurvatureError::Setting {
                key: "tolerance",
                value: self.tolerance.to_string(),
                reason: "must be a finite number > 0",
            });
        }
        Ok(())
    }
}

/// An eigenvalue estimate with how it was reached.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Eigen {
    /// The estimate (Rayleigh quotient of the last unit iterate).
    pub value: f64,
    /// Products used.
    pub iterations: usize,
    /// `|mu_k - mu_{k-1}| / |mu_k|` at the last iteration (infinite after one).
    #[serde(with = "finite_or_null")]
    pub relative_change: f64,
    /// Whether `relative_change <= tolerance` was reached.
    pub converged: bool,
}

impl Eigen {
    /// The estimate before the first product.
    const NOT_STARTED: Eigen = Eigen {
        value: 0.0,
        iterations: 0,
        relative_change: f64::INFINITY,
        converged: false,
    };
}

/// The dominant (largest-magnitude) eigenvalue of `A - shift I`, by power
/// iteration from `start`: `v <- w / ||w||`, `w = A v - shift v`, estimate
/// `mu = <v, w>`. `apply(v)` returns `A v` (flat tensors).
pub fn power_iteration(
    apply: &mut dyn FnMut(&Tensor) -> Result<Tensor>,
    start: &Tensor,
    shift: f64,
    settings: PowerSettings,
) -> Result<Eigen> {
    settings.validate()?;
    // No no_grad guard here: `apply` may differentiate (Hessian-vector products).
    let mut v = start / start.norm();
    let mut previous: Option<f64> = None;
    let mut estimate = Eigen::NOT_STARTED;
    for iteration in 1..=settings.max_iterations {
        let w = apply(&v)? - &v * shift;
        let mu = v.dot(&w).double_value(&[]);
        let norm = w.norm().double_value(&[]);
        if !(mu.is_finite() && norm.is_finite()) {
            return Err(CurvatureError::NonFinite {
                method: "power iteration",
                iteration,
            });
        }
        let change = match previous {
            Some(p) if mu != 0.0 => (mu - p).abs() / mu.abs(),
            Some(0.0) => 0.0,
            _ => f64::INFINITY,
        };
        estimate = Eigen {
            value: mu,
            iterations: iteration,
            relative_change: change,
            converged: change <= settings.tolerance || norm == 0.0,
        };
        if estimate.converged {
            break;
        }
        v = w / norm;
        previous = Some(mu);
    }
    Ok(estimate)
}

/// `kappa_max`, the largest eigenvalue of the symmetric `A`: power iteration
/// finds the dominant (largest-magnitude) eigenvalue; if it is negative, the
/// largest one is found by power iteration on `A - mu I` (all of whose
/// eigenvalues are then >= 0). `iterations` counts the products of both runs.
pub fn top_eigenvalue(
    apply: &mut dyn FnMut(&Tensor) -> Result<Tensor>,
    start: &Tensor,
    settings: PowerSettings,
) -> Result<Eigen> {
    let dominant = power_iteration(apply, start, 0.0, settings)?;
    if dominant.value >= 0.0 {
        return Ok(dominant);
    }
    let shifted = power_iteration(apply, start, dominant.value, settings)?;
    Ok(Eigen {
        value: shifted.value + dominant.value,
        iterations: dominant.iterations + shifted.iterations,
        ..shifted
    })
}

/// The smallest eigenvalue of the symmetric `A` by the Lanczos method with
/// full reorthogonalisation: `k` products build an orthonormal Krylov basis
/// `Q_k` and the tridiagonal `T_k = Q_k^T A Q_k`, whose smallest eigenvalue
/// (Ritz value) approaches `kappa_min` from above. Power iteration on a
/// shifted operator would need the gap below `kappa_min` to be large relative
/// to `kappa_max`; a network's Hessian has a dense cluster of eigenvalues near
/// 0, where that takes thousands of products, and Lanczos a few dozen.
///
/// Converged when the Ritz pair's residual `||A x - theta x|| = beta_k |y_k|`
/// (y the eigenvector of `T_k`, `y_k` its last entry) is at most
/// `tolerance * max |Ritz value|`, i.e. small relative to the spectral radius
/// estimate (kappa_min itself may be ~0, where a bound relative to it never
/// holds); `relative_change` reports that ratio. The Ritz value's change
/// between iterations is not used: it stagnates in the first iterations
/// long before it converges.
pub fn lanczos_min(
    apply: &mut dyn FnMut(&Tensor) -> Result<Tensor>,
    start: &Tensor,
    settings: PowerSettings,
) -> Result<Eigen> {
    settings.validate()?;
    let mut q = start / start.norm();
    let mut basis: Vec<Tensor> = Vec::new();
    let (mut alphas, mut betas) = (Vec::<f64>::new(), Vec::<f64>::new());
    let mut estimate = Eigen::NOT_STARTED;
    for iteration in 1..=settings.max_iterations {
        let mut w = apply(&q)?;
        basis.push(q.shallow_clone());
        let _guard = tch::no_grad_guard();
        let alpha = q.dot(&w).double_value(&[]);
        // Full reorthogonalisation, twice ("twice is enough", Parlett).
        let stacked = Tensor::stack(&basis, 0);
        for _ in 0..2 {
            w = &w - stacked.tr().mv(&stacked.mv(&w));
        }
        let beta = w.norm().double_value(&[]);
        alphas.push(alpha);
        let ritz = lowest_ritz_pair(&alphas, &betas)?;
        if !(ritz.value.is_finite() && beta.is_finite()) {
            return Err(CurvatureError::NonFinite {
                method: "Lanczos",
                iteration,
            });
        }
        let radius = ritz.radius.max(f64::MIN_POSITIVE);
        let residual = beta * ritz.last_component.abs() / radius;
        estimate = Eigen {
            value: ritz.value,
            iterations: iteration,
            relative_change: residual,
            converged: residual <= settings.tolerance,
        };
        if estimate.converged || beta <= 1e-12 * radius {
            // An invariant Krylov space: the Ritz values are exact.
            estimate.converged = true;
            break;
        }
        betas.push(beta);
        q = w / beta;
    }
    Ok(estimate)
}

/// The smallest eigenvalue of a tridiagonal `T`, the last entry of its unit
/// eigenvector, and the largest eigenvalue magnitude.
struct LowestRitz {
    value: f64,
    last_component: f64,
    radius: f64,
}

/// [`LowestRitz`] of the symmetric tridiagonal matrix with diagonal `alphas`
/// and off-diagonal `betas` (`betas.len() + 1 == alphas.len()`), by LAPACK
/// (`eigh` returns the eigenvalues in ascending order).
fn lowest_ritz_pair(alphas: &[f64], betas: &[f64]) -> Result<LowestRitz> {
    let mut t = Tensor::from_slice(alphas).diag(0);
    if !betas.is_empty() {
        let off = Tensor::from_slice(betas);
        t = t + off.diag(1) + off.diag(-1);
    }
    let (values, vectors) = t.f_linalg_eigh("L")?;
    let values = Vec::<f64>::try_from(values)?;
    let k = alphas.len() as i64;
    Ok(LowestRitz {
        value: values[0],
        last_component: vectors.double_value(&[k - 1, 0]),
        radius: values.iter().fold(0.0f64, |m, v| m.max(v.abs())),
    })
}

/// JSON has no infinity: an infinite relative change (one iteration) is null.
mod finite_or_null {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &f64, s: S) -> Result<S::Ok, S::Error> {
        if value.is_finite() {
            s.serialize_f64(*value)
        } else {
            s.serialize_none()
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::INFINITY))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind};

    /// `Q diag(eigenvalues) Q^T` with Q the Householder reflection of a fixed
    /// vector: a symmetric matrix whose spectrum is known by construction.
    fn matrix_with_spectrum(eigenvalues: &[f64]) -> Tensor {
        let n = eigenvalues.len() as i64;
        let u = Tensor::from_slice(&(0..n).map(|i| 1.0 + i as f64 * 0.7).collect::<Vec<_>>());
        let u = &u / u.norm();
        let q = Tensor::eye(n, (Kind::Double, Device::Cpu)) - u.outer(&u) * 2.0;
        q.matmul(&Tensor::from_slice(eigenvalues).diag(0))
            .matmul(&q.tr())
    }

    fn start(n: usize) -> Tensor {
        Tensor::from_slice(
            &(0..n)
                .map(|i| 1.0 + (i as f64 * 0.37).sin())
                .collect::<Vec<_>>(),
        )
    }

    const TIGHT: PowerSettings = PowerSettings {
        max_iterations: 2000,
        tolerance: 1e-12,
    };

    #[test]
    fn power_iteration_finds_the_top_of_a_known_spectrum() {
        let a = matrix_with_spectrum(&[5.0, 2.0, 1.0, -0.5, -1.5]);
        let top = power_iteration(&mut |v| Ok(a.mv(v)), &start(5), 0.0, TIGHT).unwrap();
        // Stopped at a relative change <= 1e-12; the Rayleigh quotient's error
        // falls by (2/5)^2 per step, so ~1e-12 is left, + f64 round-off ~1e-15.
        assert!((top.value - 5.0).abs() < 1e-9, "{top:?}");
        assert!(top.converged && top.iterations > 5, "{top:?}");
        // With a shift the dominant eigenvalue of A - 5 I is -6.5.
        let shifted = power_iteration(&mut |v| Ok(a.mv(v)), &start(5), 5.0, TIGHT).unwrap();
        // Ratio (5.5/6.5)^2 = 0.72: the error left is ~2.5 * 1e-12 * 6.5 ~ 2e-11.
        assert!((shifted.value + 6.5).abs() < 1e-9, "{shifted:?}");
    }

    #[test]
    fn top_eigenvalue_below_a_dominant_negative_one() {
        let a = matrix_with_spectrum(&[3.0, 1.0, 0.5, -8.0]);
        let top = top_eigenvalue(&mut |v| Ok(a.mv(v)), &start(4), TIGHT).unwrap();
        // The shifted run's ratio is (9/11)^2 = 0.67: ~2 * 1e-12 * 11 ~ 2e-11 left.
        assert!((top.value - 3.0).abs() < 1e-9, "{top:?}");
    }

    #[test]
    fn lanczos_finds_the_bottom_below_a_cluster_near_zero() {
        // A Hessian-like spectrum: one large eigenvalue, a dense cluster near
        // 0 and a slightly negative minimum, where shifted power iteration
        // would crawl (ratio 10.0 / 10.02).
        let mut spectrum = vec![10.0, -0.02];
        spectrum.extend((0..40).map(|i| 1e-3 * i as f64 - 0.01));
        let a = matrix_with_spectrum(&spectrum);
        let settings = PowerSettings {
            max_iterations: 100,
            tolerance: 1e-10,
        };
        let min = lanczos_min(&mut |v| Ok(a.mv(v)), &start(42), settings).unwrap();
        // Residual <= 1e-10 * radius 10 = 1e-9; for a symmetric matrix the Ritz
        // value's error is <= residual^2 / gap (0.01) = 1e-16, + round-off 1e-13.
        assert!((min.value + 0.02).abs() < 1e-9, "{min:?}");
        assert!(min.converged && min.iterations <= 42, "{min:?}");
    }

    #[test]
    fn stops_at_the_iteration_limit_and_says_so() {
        let a = matrix_with_spectrum(&[1.0, 0.999, 0.5]);
        let start = Tensor::from_slice(&[1.0, 0.3, -0.2]);
        let settings = PowerSettings {
            max_iterations: 3,
            tolerance: 1e-15,
        };
        let e = power_iteration(&mut |v| Ok(a.mv(v)), &start, 0.0, settings).unwrap();
        assert_eq!(e.iterations, 3);
        assert!(!e.converged);
        let json = serde_json::to_string(&Eigen {
            relative_change: f64::INFINITY,
            ..e
        })
        .unwrap();
        assert!(json.contains("\"relative_change\":null"), "{json}");
    }

    #[test]
    fn bad_settings_are_refused() {
        let start = Tensor::from_slice(&[1.0]);
        let apply = &mut |v: &Tensor| Ok(v.shallow_clone());
        for settings in [
            PowerSettings {
                max_iterations: 0,
                tolerance: 1e-3,
            },
            PowerSettings {
                max_iterations: 10,
                tolerance: 0.0,
            },
        ] {
            assert!(power_iteration(apply, &start, 0.0, settings).is_err());
        }
    }
}
