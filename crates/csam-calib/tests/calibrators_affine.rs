//! Vector scaling, matrix scaling and Dirichlet calibration: hand-computed optima,
//! "a fit never makes the validation NLL worse than where it started", nesting
//! (matrix scaling contains vector scaling) and the limits of heavy regularisation.

use csam_calib::calibrators::affine::Regularisation;
use csam_calib::calibrators::dirichlet::DirichletCalibration;
use csam_calib::calibrators::matrix::MatrixScaling;
use csam_calib::calibrators::vector::VectorScaling;
use csam_calib::calibrators::Calibrator;
use ndarray::{array, Array2};
use proptest::prelude::*;

mod calibrators_support;
use calibrators_support::{mean_nll, softmax};

/// With every logit row equal to 0, only the intercepts matter and the NLL optimum is
/// the label frequency: 3 of 4 labels are 0, so q = (3/4, 1/4) for every calibrator.
#[test]
fn constant_logits_are_calibrated_to_the_label_frequencies() {
    let logits = Array2::<f64>::zeros((4, 2));
    let labels = [0, 0, 0, 1];
    let calibrators: Vec<Box<dyn Calibrator>> = vec![
        Box::new(VectorScaling::default()),
        Box::new(MatrixScaling::default()),
        Box::new(DirichletCalibration::with_regularisation(Regularisation::None).unwrap()),
    ];
    for mut calibrator in calibrators {
        calibrator.fit(logits.view(), &labels).unwrap();
        let q = calibrator.transform(array![[0.0, 0.0]].view()).unwrap();
        // The intercepts' gradient is the mean of q - e_y, so L-BFGS's gradient rule
        // (max |grad| <= 1e-9) leaves |q - (3/4, 1/4)| <= 1e-9. Its value rule (a last
        // step gaining <= 1e-13, near an optimum reached superlinearly) leaves less than
        // sqrt(2 q (1 - q) 1e-13) ~ 2e-7, in practice far less.
        assert!(
            (q[[0, 0]] - 0.75).abs() < 1e-7,
            "{}: {q}",
            calibrator.name()
        );
        assert!(
            (q[[0, 1]] - 0.25).abs() < 1e-7,
            "{}: {q}",
            calibrator.name()
        );
    }
}

/// Vector scaling of a binary problem whose logits are `(0, s)` is the logistic
/// regression `q_1 = sigma(w_1 s + b_1 - b_0)` on `s`. With two distinct scores and
/// two free parameters the NLL optimum matches the empirical frequency at each score:
/// s = -1 (labels 0, 1) -> 1/2 and s = 1 (labels 1, 1, 1, 0) -> 3/4.
#[test]
fn vector_scaling_reaches_the_empirical_frequencies_at_two_scores() {
    let logits = array![
        [0.0, -1.0],
        [0.0, -1.0],
        [0.0, 1.0],
        [0.0, 1.0],
        [0.0, 1.0],
        [0.0, 1.0]
    ];
    let labels = [0, 1, 1, 1, 1, 0];
    let mut vector = VectorScaling::default();
    vector.fit(logits.view(), &labels).unwrap();
    let q = vector
        .transform(array![[0.0, -1.0], [0.0, 1.0]].view())
        .unwrap();
    // As above: a zero gradient of (w_1, b_1 - b_0) is q = frequency at each score,
    // and the gradient rule (<= 1e-9) leaves each within ~1e-9 * 6 / 2 of it.
    assert!((q[[0, 1]] - 0.5).abs() < 1e-7, "{q}");
    assert!((q[[1, 1]] - 0.75).abs() < 1e-7, "{q}");
    // The diagonal weight of class 0 multiplies the constant logit 0: it stays at 1.
    assert_eq!(vector.weights()[0], 1.0);
}

#[test]
fn unfitted_and_mismatched_inputs_are_refused() {
    let vector = VectorScaling::default();
    assert!(vector.transform(array![[0.0, 1.0]].view()).is_err());
    let mut matrix = MatrixScaling::default();
    matrix
        .fit(array![[0.0, 1.0], [1.0, 0.0]].view(), &[0, 1])
        .unwrap();
    assert!(matrix.transform(array![[0.0, 1.0, 2.0]].view()).is_err());
    assert!(matrix
        .transform(array![[f64::INFINITY, 1.0]].view())
        .is_err());
    assert!(MatrixScaling::with_regularisation(Regularisation::L2 { lambda: -1.0 }).is_err());
}

/// Validation sets of 60..120 rows, K = 3, random logits and labels: never linearly
/// separable in practice, so every fit has a finite optimum.
fn validation_set() -> impl Strategy<Value = (Array2<f64>, Vec<usize>)> {
    (60usize..120).prop_flat_map(|n| {
        (
            proptest::collection::vec(-4.0f64..4.0, n * 3),
            proptest::collection::vec(0usize..3, n),
        )
            .prop_filter("two classes", |(_, y)| y.iter().any(|&c| c != y[0]))
            .prop_map(move |(z, y)| (Array2::from_shape_vec((n, 3), z).unwrap(), y))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Each fit starts at the uncalibrated model and only accepts decreasing steps;
    /// the optimum over the larger family (matrix) is at least as good as over the
    /// smaller one (vector), up to the optimiser's tolerance.
    #[test]
    fn fits_never_increase_the_validation_nll((logits, labels) in validation_set()) {
        let start = mean_nll(&softmax(logits.view()), &labels);
        let mut vector = VectorScaling::default();
        vector.fit(logits.view(), &labels).unwrap();
        let vector_nll = mean_nll(&vector.transform(logits.view()).unwrap(), &labels);
        let mut matrix = MatrixScaling::default();
        matrix.fit(logits.view(), &labels).unwrap();
        let matrix_nll = mean_nll(&matrix.transform(logits.view()).unwrap(), &labels);
        let mut dirichlet = DirichletCalibration::with_regularisation(Regularisation::None).unwrap();
        dirichlet.fit(logits.view(), &labels).unwrap();
        let dirichlet_nll = mean_nll(&dirichlet.transform(logits.view()).unwrap(), &labels);
        // Steps only lower the fit's objective; these means of <= 120 logs (|ln q| <= 9)
        // are recomputed here, each within 120 * 2.2e-16 * 9 ~ 2.4e-13 of it.
        prop_assert!(vector_nll <= start + 1e-12, "vector {vector_nll} > start {start}");
        // Each fit stops within ~1e-13 of its optimum (value rule), far inside 1e-8.
        prop_assert!(matrix_nll <= vector_nll + 1e-8, "matrix {matrix_nll} > vector {vector_nll}");
        prop_assert!(dirichlet_nll <= start + 1e-12, "dirichlet {dirichlet_nll} > start {start}");
    }

    /// L2 centred on the identity with a huge strength keeps the uncalibrated model;
    /// huge ODIR drives the off-diagonal weights and the intercepts to 0.
    #[test]
    fn heavy_regularisation_stays_near_identity((logits, labels) in validation_set()) {
        let mut l2 = DirichletCalibration::with_regularisation(Regularisation::L2 { lambda: 1e9 }).unwrap();
        l2.fit(logits.view(), &labels).unwrap();
        let q = l2.transform(logits.view()).unwrap();
        let p = softmax(logits.view());
        let gap = (&q - &p).mapv(f64::abs).fold(0.0f64, |m, &v| m.max(v));
        // At the optimum theta - identity = -P grad(NLL) / (2 lambda): |grad| <= 9.1
        // (|ln p| for logits in [-4, 4]), so weights move <= 12 * 9.1 / 2e9 = 5.5e-8,
        // logits <= 3 * 5.5e-8 * 9.1 ~ 1.5e-6 and probabilities half that.
        prop_assert!(gap < 1e-6, "L2 moved probabilities by {gap}");

        let odir = Regularisation::Odir { lambda: 1e9, mu: 1e9 };
        let mut dirichlet = DirichletCalibration::with_regularisation(odir).unwrap();
        dirichlet.fit(logits.view(), &labels).unwrap();
        // Likewise w_ij <= 9.1 / (2 * 1e9 / 6) ~ 2.7e-8 and b_j <= 1 / (2 * 1e9 / 3) ~ 1.5e-9.
        for (i, row) in dirichlet.weights().iter().enumerate() {
            for (j, w) in row.iter().enumerate() {
                prop_assert!(i == j || w.abs() < 1e-6, "w[{i}][{j}] = {w}");
            }
        }
        prop_assert!(dirichlet.bias().iter().all(|b| b.abs() < 1e-6), "{:?}", dirichlet.bias());
    }
}
