//! Training on mixed inputs (mixup, MIT-L) against a PyTorch float64
//! implementation of each paper's procedure (tests/fixtures/mixing_reference.py):
//! for a fixed draw, the objective of a small network and its gradient with
//! respect to the weights agree, with cross entropy, focal loss and CSAM's
//! weighting of the loss; and the draws themselves keep to their definitions.
//!
//! Needs the project venv's python (`<workspace>/.venv/bin/python`, or
//! `CSAM_PYTHON`) for the twin; skipped with a notice when it is absent.

mod support;

use csam_nn::loss::{CsamLoss, Focal, TrainingLoss};
use csam_nn::mixing::{Coefficients, Draw, Mixing, TrainBatch};
use support::{close, python, run_twin};
use tch::{nn, Device, Kind, Tensor};

const BATCH: i64 = 6;

/// One objective: a draw, a loss, CSAM's weighting or none.
struct Case {
    draw: Draw,
    loss: TrainingLoss,
    csam: Option<f64>,
}

impl Case {
    fn json(&self) -> serde_json::Value {
        let mut value = serde_json::json!({
            "partner": self.draw.partner,
            "loss": self.loss.name(),
            "csam": self.csam,
        });
        match self.draw.coefficients {
            Coefficients::Mixup(lambda) => {
                value["mixing"] = "mixup".into();
                value["lambda"] = lambda.into();
            }
            Coefficients::Decoupled(l1, l2) => {
                value["mixing"] = "mit-l".into();
                value["l1"] = l1.into();
                value["l2"] = l2.into();
            }
            Coefficients::None => unreachable!("the cases mix"),
        }
        if let TrainingLoss::Focal(Focal { gamma }) = self.loss {
            value["gamma"] = gamma.into();
        }
        value
    }

    /// csam's objective and its gradients with respect to (w1, w2).
    fn rust(&self, x: &Tensor, y: &Tensor, w1: &Tensor, w2: &Tensor) -> (Tensor, Tensor, Tensor) {
        let (w1, w2) = (w1.set_requires_grad(true), w2.set_requires_grad(true));
        let (a, b) = (w1.shallow_clone(), w2.shallow_clone());
        let model = nn::func_t(move |xs, _train| xs.matmul(&a).relu().matmul(&b));
        let batch = TrainBatch::mixed(x, y, &self.draw).unwrap();
        let pass = batch.forward(&model).unwrap();
        let value = pass
            .objective(|scores, targets| match self.csam {
                None => self.loss.mean_of(scores, targets),
                Some(gamma) => CsamLoss::new(gamma, false)
                    .unwrap()
                    .weighted_of(&self.loss, scores, targets),
            })
            .unwrap();
        let mut grads = Tensor::run_backward(&[&value], &[&w1, &w2], false, false);
        let g2 = grads.remove(1);
        (value.detach(), grads.remove(0), g2)
    }
}

#[test]
fn mixed_objectives_match_pytorch_float64() {
    let Some(python) = python() else {
        return;
    };
    tch::manual_seed(5);
    let f64_cpu = (Kind::Double, Device::Cpu);
    let x = Tensor::randn([BATCH, 5], f64_cpu);
    let y = Tensor::from_slice(&[0i64, 1, 2, 3, 1, 0]);
    let w1 = Tensor::randn([5, 7], f64_cpu);
    let w2 = Tensor::randn([7, 4], f64_cpu) * 2.0;
    let partner = vec![3i64, 0, 5, 1, 4, 2];
    let draw = |coefficients| Draw {
        partner: partner.clone(),
        coefficients,
    };
    let focal = TrainingLoss::Focal(Focal { gamma: 2.0 });
    let mut cases = Vec::new();
    for coefficients in [
        Coefficients::Mixup(0.3),
        Coefficients::Mixup(0.9),
        Coefficients::Decoupled(0.8, 0.3),
        Coefficients::Decoupled(0.55, 0.5),
    ] {
        for (loss, csam) in [
            (TrainingLoss::default(), None),
            (focal.clone(), None),
            (TrainingLoss::default(), Some(1.0)),
            (focal.clone(), Some(2.0)),
        ] {
            cases.push(Case {
                draw: draw(coefficients),
                loss,
                csam,
            });
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let reference = run_twin(
        &python,
        "mixing_reference.py",
        dir.path(),
        &[("x", &x), ("y", &y), ("w1", &w1), ("w2", &w2)],
        cases.iter().map(Case::json).collect(),
    );
    for (i, case) in cases.iter().enumerate() {
        let what = case.json().to_string();
        let (value, g1, g2) = case.rust(&x, &y, &w1, &w2);
        close(&value, &reference[&format!("value_{i}")], &what);
        close(&g1, &reference[&format!("grad_w1_{i}")], &what);
        close(&g2, &reference[&format!("grad_w2_{i}")], &what);
    }
}

/// Mixup's coefficient follows Beta(alpha, alpha): over 4000 seeds, its mean
/// and variance are Beta(0.4, 0.4)'s, 1/2 and 1 / (4 (2 alpha + 1)) =
/// 0.1389, within six standard errors of each sample statistic (from the
/// distribution's own moments: a symmetric Beta's fourth central moment is
/// sigma^4 (3 - 6 / (2 alpha + 3))). Beta(1, 1), the default alpha, has
/// variance 0.0833: an alpha that does not reach the draw fails.
#[test]
fn mixup_draws_its_coefficient_from_beta_alpha_alpha() {
    let alpha = 0.4;
    let mixup = Mixing::Mixup { alpha };
    let n = 4000;
    let draws: Vec<f64> = (0..n)
        .map(|seed| match mixup.draw(2, seed).coefficients {
            Coefficients::Mixup(lambda) => lambda,
            other => panic!("mixup drew {other:?}"),
        })
        .collect();
    let n = n as f64;
    let variance = 1.0 / (4.0 * (2.0 * alpha + 1.0));
    let fourth = variance * variance * (3.0 - 6.0 / (2.0 * alpha + 3.0));
    let mean = draws.iter().sum::<f64>() / n;
    let spread = draws.iter().map(|l| (l - 0.5).powi(2)).sum::<f64>() / n;
    let mean_bar = 6.0 * (variance / n).sqrt();
    let spread_bar = 6.0 * ((fourth - variance * variance) / n).sqrt();
    assert!(
        (mean - 0.5).abs() < mean_bar,
        "mean {mean} (bar {mean_bar})"
    );
    assert!(
        (spread - variance).abs() < spread_bar,
        "variance {spread}, Beta({alpha}, {alpha})'s {variance} (bar {spread_bar})"
    );
}

#[test]
fn draws_keep_to_their_definitions_and_repeat_with_their_seed() {
    let is_permutation = |partner: &[i64]| {
        let mut sorted = partner.to_vec();
        sorted.sort();
        sorted == (0..partner.len() as i64).collect::<Vec<_>>()
    };
    let mixup = Mixing::Mixup { alpha: 0.4 };
    let mit = Mixing::MitL {
        alpha: 1.0,
        margin: 0.3,
    };
    for seed in 0..200 {
        let draw = mixup.draw(9, seed);
        assert!(is_permutation(&draw.partner));
        assert!(matches!(draw.coefficients, Coefficients::Mixup(l) if (0.0..=1.0).contains(&l)));
        assert_eq!(draw, mixup.draw(9, seed), "a seed fixes the draw");
        let draw = mit.draw(9, seed);
        assert!(is_permutation(&draw.partner));
        let Coefficients::Decoupled(l1, l2) = draw.coefficients else {
            panic!("MIT-L draws two coefficients");
        };
        // The draw keeps only l1 - l2 >= margin, the same f64 expression: exact.
        assert!(l1 >= 0.5 && l2 <= 0.5 && l1 - l2 >= 0.3, "{l1} {l2}");
    }
    assert_ne!(mixup.draw(64, 1), mixup.draw(64, 2));
    // alpha 0 is no mixing (Zhang et al.'s lam = 1), and no mixing keeps the
    // batch in place.
    for none in [Mixing::None, Mixing::Mixup { alpha: 0.0 }] {
        assert!(none.is_none());
        let draw = none.draw(5, 3);
        assert_eq!(draw.coefficients, Coefficients::None);
        assert_eq!(draw.partner, vec![0, 1, 2, 3, 4]);
    }
    for bad in [
        Mixing::Mixup { alpha: -1.0 },
        Mixing::Mixup { alpha: f64::NAN },
        Mixing::MitL {
            alpha: 0.0,
            margin: 0.0,
        },
        Mixing::MitL {
            alpha: 1.0,
            margin: 1.0,
        },
    ] {
        assert!(bad.validate().is_err(), "{bad:?}");
    }
}
