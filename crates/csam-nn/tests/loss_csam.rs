//! Cross entropy and the CSAM loss: hand-computed values, finite-difference
//! gradient checks in float64 (both detach modes, examples on both sides of
//! p = 1/2) and error cases.

use csam_nn::loss::{cross_entropy, true_class_log_probs, CsamLoss, LossError};
use tch::{Device, Kind, Tensor};

fn f64_tensor(rows: &[[f64; 3]]) -> Tensor {
    let flat: Vec<f64> = rows.iter().flatten().copied().collect();
    Tensor::from_slice(&flat).reshape([rows.len() as i64, 3])
}

fn targets(ys: &[i64]) -> Tensor {
    Tensor::from_slice(ys)
}

fn value(t: &Tensor) -> f64 {
    t.double_value(&[])
}

/// Logits whose softmax gives the true class (class 0) probability p.
fn logits_with_p(ps: &[f64]) -> Tensor {
    let rows: Vec<[f64; 3]> = ps
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            let shift = i as f64 * 0.7 - 1.0; // softmax is shift-invariant
            [
                p.ln() + shift,
                ((1.0 - p) * 0.3).ln() + shift,
                ((1.0 - p) * 0.7).ln() + shift,
            ]
        })
        .collect();
    f64_tensor(&rows)
}

#[test]
fn csam_loss_hand_values() {
    let ln3 = 3f64.ln();
    let ln4 = 4f64.ln();
    // Row 0: p = 1/2 exactly (the -log p branch) -> ln 2.
    // Row 1: p = 3/4 -> -(7/4)^(-gamma) ln(3/4).
    // Row 2: p = 1/5 -> ln 5.
    let z = f64_tensor(&[
        [0.0, 0.0, f64::NEG_INFINITY],
        [ln3, 0.0, f64::NEG_INFINITY],
        [0.0, ln4, f64::NEG_INFINITY],
    ]);
    let y = targets(&[0, 0, 0]);
    let ln43 = 0.287_682_072_451_780_85; // ln(4/3)
    let cases = [
        (0.0, (2f64.ln() + ln43 + 5f64.ln()) / 3.0),
        (1.0, (2f64.ln() + ln43 / 1.75 + 5f64.ln()) / 3.0),
        (2.0, (2f64.ln() + ln43 / 3.0625 + 5f64.ln()) / 3.0),
    ];
    for (gamma, expected) in cases {
        for detach in [false, true] {
            let loss = value(&CsamLoss::new(gamma, detach).unwrap().loss(&z, &y).unwrap());
            // Float64: ~6 roundings of terms <= 1.61, a sum <= 2.6 then / 3,
            // on each side: <= ~5e-16 apart.
            assert!(
                (loss - expected).abs() < 1e-15,
                "gamma {gamma}: {loss} vs {expected}"
            );
        }
    }
    // Single examples: 0.16438975568673192 = ln(4/3) / 1.75.
    let one = value(
        &CsamLoss::new(1.0, false)
            .unwrap()
            .loss(&z.narrow(0, 1, 1), &y.narrow(0, 1, 1))
            .unwrap(),
    );
    // A few float64 roundings of values <= 0.29 (ulp 5.6e-17): ~2e-16.
    assert!((one - 0.164_389_755_686_731_92).abs() < 1e-15);
    let ce = value(&cross_entropy(&z, &y).unwrap());
    // The mean of 3 float64 logs <= 1.61: ~5e-16 at most.
    assert!((ce - cases[0].1).abs() < 1e-15);
}

#[test]
fn cross_entropy_matches_libtorch_and_stays_float64() {
    let z = Tensor::randn([6, 5], (Kind::Double, Device::Cpu)) * 3.0;
    let y = targets(&[0, 4, 2, 2, 1, 3]);
    let ours = cross_entropy(&z, &y).unwrap();
    assert_eq!(ours.kind(), Kind::Double);
    let theirs = z.to_kind(Kind::Float).cross_entropy_for_logits(&y);
    // Float32 logits up to |z| ~ 10 (3 sd of 3 N(0, 1)) round by <= 4.8e-7
    // (0.5 ulp in [8, 16)); a row's loss takes ~4 such roundings, <= 2e-6.
    // A wrong class or reduction moves the loss by O(0.1).
    assert!((value(&ours) - value(&theirs)).abs() < 1e-5);
    // Saturated softmax: no NaN, exact log-sum-exp.
    let z = f64_tensor(&[[1000.0, 0.0, -1000.0]]);
    let l = value(&cross_entropy(&z, &targets(&[1])).unwrap());
    // Exact log-sum-exp gives 1000 within ulp(1000) = 1.1e-13; a naive one
    // overflows to inf or NaN.
    assert!((l - 1000.0).abs() < 1e-9, "{l}");
    let lp = true_class_log_probs(&z, &targets(&[0])).unwrap();
    assert_eq!(value(&lp.sum(None)), 0.0);
}

/// Central finite differences of `f` at `z`, step `h`.
fn numeric_gradient(f: &dyn Fn(&Tensor) -> f64, z: &Tensor, h: f64) -> Tensor {
    let flat: Vec<f64> = Vec::try_from(z.flatten(0, -1)).unwrap();
    let grad: Vec<f64> = (0..flat.len())
        .map(|i| {
            let mut plus = flat.clone();
            let mut minus = flat.clone();
            plus[i] += h;
            minus[i] -= h;
            let at = |v: Vec<f64>| f(&Tensor::from_slice(&v).reshape(z.size()));
            (at(plus) - at(minus)) / (2.0 * h)
        })
        .collect();
    Tensor::from_slice(&grad).reshape(z.size())
}

fn analytic_gradient(loss: &dyn Fn(&Tensor) -> Tensor, z: &Tensor) -> Tensor {
    let z = z.detach().copy().set_requires_grad(true);
    let l = loss(&z);
    Tensor::run_backward(&[l], &[&z], false, false).remove(0)
}

fn assert_close(a: &Tensor, b: &Tensor, tol: f64, what: &str) {
    let d = (a - b).abs().max().double_value(&[]);
    assert!(d < tol, "{what}: max difference {d}");
}

#[test]
fn gradients_match_finite_differences() {
    // True-class probabilities on both sides of 1/2.
    let z = logits_with_p(&[0.2, 0.45, 0.7, 0.95, 0.55]);
    let y = targets(&[0, 0, 0, 0, 0]);
    // Central differences, h = 1e-6, of float64 losses ~1: truncation
    // h^2 f''' / 6 ~ 1e-12, round-off 2.2e-16 |f| / h ~ 2e-10; the 1e-8 bars
    // below leave 50x.
    let h = 1e-6;

    let ce = |z: &Tensor| cross_entropy(z, &y).unwrap();
    let numeric = numeric_gradient(&|z| value(&ce(z)), &z, h);
    assert_close(&analytic_gradient(&ce, &z), &numeric, 1e-8, "cross entropy");

    for gamma in [0.5, 1.0, 2.0] {
        let loss = CsamLoss::new(gamma, false).unwrap();
        let f = |z: &Tensor| loss.loss(z, &y).unwrap();
        let numeric = numeric_gradient(&|z| value(&f(z)), &z, h);
        let analytic = analytic_gradient(&f, &z);
        assert_close(&analytic, &numeric, 1e-8, &format!("CSAM gamma {gamma}"));

        // Detached: the gradient of -(1/B) sum w_i log p_i with w frozen at z.
        let p: Vec<f64> = Vec::try_from(true_class_log_probs(&z, &y).unwrap().exp()).unwrap();
        let w: Vec<f64> = p
            .iter()
            .map(|&p| if p > 0.5 { (1.0 + p).powf(-gamma) } else { 1.0 })
            .collect();
        let w = Tensor::from_slice(&w);
        let frozen = |z: &Tensor| value(&-(true_class_log_probs(z, &y).unwrap() * &w).mean(None));
        let numeric = numeric_gradient(&frozen, &z, h);
        let detached = CsamLoss::new(gamma, true).unwrap();
        let analytic = analytic_gradient(&|z| detached.loss(z, &y).unwrap(), &z);
        assert_close(
            &analytic,
            &numeric,
            1e-8,
            &format!("detached CSAM gamma {gamma}"),
        );
        // The two modes differ only through the examples with p > 1/2.
        let diff = (analytic_gradient(&f, &z) - &analytic)
            .abs()
            .sum_dim_intlist(1, false, None);
        let diff: Vec<f64> = Vec::try_from(diff).unwrap();
        // Rows with p <= 1/2 run the same ops (exactly 0); with p > 1/2 the
        // weight's derivative adds >= 1.8e-4 here (p = 0.95, gamma 0.5), far
        // above 1e-6 and float64 round-off (~1e-16).
        assert!(
            diff[0] == 0.0 && diff[1] == 0.0 && diff[2] > 1e-6 && diff[3] > 1e-6,
            "{diff:?}"
        );
    }
}

#[test]
fn bad_inputs_are_errors() {
    let z = Tensor::zeros([2, 3], (Kind::Float, Device::Cpu));
    assert!(matches!(
        cross_entropy(&z, &targets(&[0])),
        Err(LossError::Shape(_))
    ));
    assert!(matches!(
        cross_entropy(&z.flatten(0, -1), &targets(&[0, 1])),
        Err(LossError::Shape(_))
    ));
    let as_f32 = Tensor::from_slice(&[0f32, 1.0]);
    assert!(matches!(
        cross_entropy(&z, &as_f32),
        Err(LossError::Shape(_))
    ));
    assert!(matches!(
        cross_entropy(&z, &targets(&[0, 3])),
        Err(LossError::Torch(_))
    ));
    assert!(matches!(
        cross_entropy(&z, &targets(&[-1, 0])),
        Err(LossError::Torch(_))
    ));
    for gamma in [-0.1, f64::INFINITY, f64::NAN] {
        assert!(matches!(
            CsamLoss::new(gamma, false),
            Err(LossError::Field { field: "gamma", .. })
        ));
    }
    // Beyond the paper's analysed range [0, 2] but inside its gamma sweep.
    assert!(CsamLoss::new(3.0, false).is_ok());
}
