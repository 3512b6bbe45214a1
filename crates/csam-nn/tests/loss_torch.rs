//! The training losses and their CSAM weighting against a PyTorch float64
//! implementation written from each paper's formula
//! (tests/fixtures/loss_reference.py): value and gradient with respect to the
//! logits, on examples on both sides of every branch (p_y below and above
//! FLSD's 0.2, below and above CSAM's 1/2, p_y near 1), plus the properties
//! that tie them to cross entropy.
//!
//! Needs the project venv's python (`<workspace>/.venv/bin/python`, or
//! `CSAM_PYTHON`) for the twin; skipped with a notice when it is absent.

mod support;

use csam_nn::loss::{
    cross_entropy, true_class_log_probs, Acls, AdaFocal, AdaFocalBins, Crl, CrossEntropy, CsamLoss,
    DualFocal, Flsd, Focal, LabelSmoothing, MarginLabelSmoothing, Mdca, Mmce, PairwiseConstraints,
    Scores, TrainingLoss,
};
use support::{close, python, run_twin};
use tch::{Device, Kind, Tensor};

const CLASSES: usize = 4;
/// True-class probabilities of the examples: below FLSD's 0.2, between 0.2
/// and CSAM's 1/2, above 1/2, and near 1.
const P_TRUE: [f64; 10] = [
    0.05, 0.15, 0.199, 0.21, 0.35, 0.49, 0.51, 0.7, 0.9, 0.999_999,
];

/// The examples' normalised correctness histories for CRL: ties (0.5, 0.5;
/// 0.25, 0.25), neighbours ranked up and down, and the last example paired
/// with the first.
const CORRECTNESS: [f64; 10] = [0.0, 0.5, 0.5, 1.0, 0.25, 0.25, 0.0, 1.0, 0.75, 0.5];

/// Float64 logits whose softmax gives example i the true-class probability
/// `P_TRUE[i]`, the true class at column `i % CLASSES`, the other classes
/// sharing the rest unevenly (so the true class is not always the argmax).
fn inputs() -> (Tensor, Tensor) {
    let shares = [0.2, 0.3, 0.5];
    let mut flat = Vec::new();
    let mut targets = Vec::new();
    for (i, &p) in P_TRUE.iter().enumerate() {
        let target = i % CLASSES;
        let shift = i as f64 * 0.37 - 1.0;
        let mut others = shares.iter();
        for class in 0..CLASSES {
            let probability = match class == target {
                true => p,
                false => (1.0 - p) * others.next().unwrap(),
            };
            flat.push(probability.ln() + shift);
        }
        targets.push(target as i64);
    }
    let logits = Tensor::from_slice(&flat).reshape([P_TRUE.len() as i64, CLASSES as i64]);
    (logits, Tensor::from_slice(&targets))
}

/// One loss, plain or in CSAM's second pass.
#[derive(Clone)]
struct Case {
    loss: TrainingLoss,
    csam: Option<(f64, bool)>,
}

impl Case {
    /// The loss as it is saved in a run's spec (`kind` and parameters),
    /// with CSAM's settings.
    fn json(&self) -> serde_json::Value {
        let mut value = serde_json::json!({ "loss": self.loss });
        if self.loss.needs_correctness_history() {
            value["correctness"] = CORRECTNESS.to_vec().into();
        }
        if let TrainingLoss::AdaFocal(adafocal) = &self.loss {
            let bins = adafocal.bins();
            value["adafocal"] = serde_json::json!({ "edges": bins.edges, "gammas": bins.gammas });
        }
        value["csam"] = match self.csam {
            Some((gamma, detach)) => serde_json::json!({ "gamma": gamma, "detach": detach }),
            None => serde_json::Value::Null,
        };
        value
    }

    /// csam's value and gradient with respect to the logits.
    fn rust(&self, logits: &Tensor, targets: &Tensor) -> (Tensor, Tensor) {
        let z = logits.detach().set_requires_grad(true);
        let mut scores = Scores::new(&z, targets).unwrap();
        if self.loss.needs_correctness_history() {
            scores.correctness = Some(Tensor::from_slice(&CORRECTNESS));
        }
        let value = match self.csam {
            None => self.loss.mean_of(&scores, targets).unwrap(),
            Some((gamma, detach)) => CsamLoss::new(gamma, detach)
                .unwrap()
                .weighted_of(&self.loss, &scores, targets)
                .unwrap(),
        };
        let grad = Tensor::run_backward(&[&value], &[&z], false, false).remove(0);
        (value.detach(), grad)
    }
}

fn losses() -> Vec<TrainingLoss> {
    let mut losses = vec![TrainingLoss::CrossEntropy(CrossEntropy {})];
    for gamma in [0.0, 1.0, 2.5, 3.0] {
        losses.push(TrainingLoss::Focal(Focal { gamma }));
    }
    losses.push(TrainingLoss::Flsd(Flsd {}));
    for epsilon in [0.0, 0.1, 0.3] {
        losses.push(TrainingLoss::LabelSmoothing(LabelSmoothing { epsilon }));
    }
    for gamma in [0.0, 2.0, 5.0] {
        losses.push(TrainingLoss::DualFocal(DualFocal { gamma }));
    }
    // Margins that the examples' logit distances (up to ln(0.999999 / 2e-7),
    // about 15.4) exceed for some classes and not for others.
    for (margin, alpha) in [(10.0, 0.1), (2.0, 0.5), (1.0, 0.0)] {
        losses.push(TrainingLoss::MarginLabelSmoothing(MarginLabelSmoothing {
            margin,
            alpha,
        }));
    }
    // ACLS's margins: the largest logits (up to about 4.3) exceed 1 and not
    // 10; the distances exceed 1 for some classes and not for others.
    losses.push(TrainingLoss::Acls(Acls::default()));
    for (margin, pos_lambda, neg_lambda) in [(1.0, 1.0, 0.1), (2.0, 0.5, 2.0)] {
        losses.push(TrainingLoss::Acls(Acls {
            margin,
            pos_lambda,
            neg_lambda,
            alpha: 0.3,
        }));
    }
    for (bdc_weight, bec_weight) in [(0.1, 1.0), (2.0, 0.0), (0.0, 0.5)] {
        losses.push(TrainingLoss::PairwiseConstraints(PairwiseConstraints {
            bdc_weight,
            bec_weight,
        }));
    }
    // AdaFocal before its first update (focal with gamma 1), and with bins
    // whose exponents are focal, inverse focal and 0, edges between some of the
    // examples. p_y (0.2, 0.5) and the outer bins open-ended.
    losses.push(TrainingLoss::AdaFocal(AdaFocal::default()));
    losses.push(TrainingLoss::AdaFocal(AdaFocal {
        bins: 4,
        state: Some(AdaFocalBins {
            edges: vec![0.1, 0.2, 0.5, 0.8, 0.95],
            gammas: vec![3.0, -1.5, 0.0, 2.0],
        }),
        ..AdaFocal::default()
    }));
    for weight in [1.0, 0.3] {
        losses.push(TrainingLoss::Crl(Crl { weight }));
    }
    for lambda in [2.0, 0.5] {
        losses.push(TrainingLoss::Mmce(Mmce { lambda }));
    }
    for (beta, gamma) in [(1.0, 0.0), (3.0, 1.0)] {
        losses.push(TrainingLoss::Mdca(Mdca { beta, gamma }));
    }
    losses
}

fn cases() -> Vec<Case> {
    losses()
        .into_iter()
        .flat_map(|loss| {
            [
                None,
                Some((0.0, false)),
                Some((1.0, false)),
                Some((2.0, true)),
            ]
            .map(|csam| Case {
                loss: loss.clone(),
                csam,
            })
        })
        .collect()
}

#[test]
fn losses_and_their_csam_weighting_match_pytorch_float64() {
    let Some(python) = python() else {
        return;
    };
    let (logits, targets) = inputs();
    let p = true_class_log_probs(&logits, &targets).unwrap().exp();
    let p: Vec<f64> = Vec::try_from(&p).unwrap();
    for (&want, got) in P_TRUE.iter().zip(&p) {
        // Float64 ln, shift and softmax over 4 classes of p <= 1: a few ulps,
        // ~1e-15; 1e-12 leaves 1000x.
        assert!((want - got).abs() < 1e-12, "{want} vs {got}");
    }
    let dir = tempfile::tempdir().unwrap();
    let cases = cases();
    let reference = run_twin(
        &python,
        "loss_reference.py",
        dir.path(),
        &[("logits", &logits), ("targets", &targets)],
        cases.iter().map(Case::json).collect(),
    );
    for (i, case) in cases.iter().enumerate() {
        let what = case.json().to_string();
        let (value, grad) = case.rust(&logits, &targets);
        assert_eq!(value.kind(), Kind::Double, "{what}");
        close(&value, &reference[&format!("value_{i}")], &what);
        close(&grad, &reference[&format!("grad_{i}")], &what);
    }
}

#[test]
fn focal_gamma_zero_label_smoothing_zero_and_csam_gamma_zero_are_the_plain_losses() {
    let (logits, targets) = inputs();
    let ce = Case {
        loss: TrainingLoss::default(),
        csam: None,
    }
    .rust(&logits, &targets);
    for loss in [
        TrainingLoss::Focal(Focal { gamma: 0.0 }),
        TrainingLoss::LabelSmoothing(LabelSmoothing { epsilon: 0.0 }),
    ] {
        let (value, grad) = Case {
            loss: loss.clone(),
            csam: None,
        }
        .rust(&logits, &targets);
        close(&value, &ce.0, loss.name());
        close(&grad, &ce.1, loss.name());
    }
    // CSAM with gamma 0 weights every example by 1: the loss itself (SAM).
    for loss in losses() {
        let plain = Case {
            loss: loss.clone(),
            csam: None,
        }
        .rust(&logits, &targets);
        let csam = Case {
            loss: loss.clone(),
            csam: Some((0.0, false)),
        }
        .rust(&logits, &targets);
        close(&csam.0, &plain.0, loss.name());
        close(&csam.1, &plain.1, loss.name());
    }
    // The general weighting (focal with gamma 0) agrees with the CSAM loss
    // of cross entropy, which `weighted` computes exactly as before.
    for (gamma, detach) in [(1.0, false), (2.0, true)] {
        let csam = CsamLoss::new(gamma, detach).unwrap();
        let general = Case {
            loss: TrainingLoss::Focal(Focal { gamma: 0.0 }),
            csam: Some((gamma, detach)),
        }
        .rust(&logits, &targets);
        let z = logits.detach().set_requires_grad(true);
        let value = csam.loss(&z, &targets).unwrap();
        let grad = Tensor::run_backward(&[&value], &[&z], false, false).remove(0);
        close(&general.0, &value.detach(), "focal 0 + CSAM");
        close(&general.1, &grad, "focal 0 + CSAM");
        let via_weighted = csam
            .weighted(&TrainingLoss::default(), &logits, &targets)
            .unwrap();
        assert_eq!(
            via_weighted.double_value(&[]).to_bits(),
            csam.loss(&logits, &targets)
                .unwrap()
                .double_value(&[])
                .to_bits()
        );
    }
    assert_eq!(
        TrainingLoss::default()
            .mean(&logits, &targets)
            .unwrap()
            .double_value(&[])
            .to_bits(),
        cross_entropy(&logits, &targets)
            .unwrap()
            .double_value(&[])
            .to_bits()
    );
}

#[test]
fn parameters_outside_each_definition_are_refused() {
    for loss in [
        TrainingLoss::Focal(Focal { gamma: -1.0 }),
        TrainingLoss::Focal(Focal { gamma: f64::NAN }),
        TrainingLoss::LabelSmoothing(LabelSmoothing { epsilon: 1.0 }),
        TrainingLoss::LabelSmoothing(LabelSmoothing { epsilon: -0.1 }),
        TrainingLoss::DualFocal(DualFocal { gamma: -0.5 }),
        TrainingLoss::MarginLabelSmoothing(MarginLabelSmoothing {
            margin: 0.0,
            alpha: 0.1,
        }),
        TrainingLoss::MarginLabelSmoothing(MarginLabelSmoothing {
            margin: 10.0,
            alpha: -1.0,
        }),
        TrainingLoss::Acls(Acls {
            margin: -1.0,
            ..Acls::default()
        }),
        TrainingLoss::Acls(Acls {
            neg_lambda: -0.1,
            ..Acls::default()
        }),
        TrainingLoss::PairwiseConstraints(PairwiseConstraints {
            bdc_weight: f64::INFINITY,
            bec_weight: 1.0,
        }),
        TrainingLoss::Mmce(Mmce { lambda: -2.0 }),
        TrainingLoss::Crl(Crl { weight: -1.0 }),
        TrainingLoss::Mdca(Mdca {
            beta: -1.0,
            gamma: 0.0,
        }),
        TrainingLoss::Mdca(Mdca {
            beta: 1.0,
            gamma: -1.0,
        }),
    ] {
        assert!(loss.validate().is_err(), "{loss:?}");
    }
    for loss in losses() {
        assert!(loss.validate().is_ok(), "{loss:?}");
    }
    let cpu = (Kind::Double, Device::Cpu);
    let bad_targets = Tensor::zeros([3], (Kind::Int64, Device::Cpu));
    let logits = Tensor::zeros([2, 4], cpu);
    for loss in losses() {
        assert!(loss.mean(&logits, &bad_targets).is_err(), "{loss:?}");
    }
}

#[test]
fn batch_terms_and_class_counts_follow_their_definitions() {
    let (logits, targets) = inputs();
    let ce = cross_entropy(&logits, &targets).unwrap().double_value(&[]);
    let value = |loss: &TrainingLoss, z: &Tensor, y: &Tensor| loss.mean(z, y).unwrap();
    // MMCE_w is 0 on a batch without a wrong prediction (and without a right
    // one): the loss is cross entropy there.
    let predicted = logits.argmax(1, false);
    let mmce = TrainingLoss::Mmce(Mmce::default());
    for y in [&predicted, &((&predicted + 1).remainder(CLASSES as i64))] {
        let z = logits.detach().set_requires_grad(true);
        let loss = value(&mmce, &z, y);
        let plain = cross_entropy(&logits, y).unwrap();
        // The term is lambda * 0 = 0 exactly, added to the same cross entropy.
        assert_eq!(loss.double_value(&[]), plain.double_value(&[]));
    }
    // With a right and a wrong prediction it is positive.
    assert!(value(&mmce, &logits, &targets).double_value(&[]) > ce);
    // MDCA is 0 when the mean probabilities equal the class frequencies:
    // uniform logits on a batch holding every class once.
    let uniform = Tensor::zeros([4, 4], (Kind::Double, Device::Cpu));
    let each = Tensor::from_slice(&[0i64, 1, 2, 3]);
    let mdca = TrainingLoss::Mdca(Mdca::default());
    // Uniform probabilities 1/4 (exact) minus frequencies 1/4: a gap of exactly
    // 0, times beta, added to the same cross entropy.
    assert_eq!(
        value(&mdca, &uniform, &each).double_value(&[]),
        cross_entropy(&uniform, &each).unwrap().double_value(&[])
    );
    // Weights 0 leave the classification loss.
    for loss in [
        TrainingLoss::Mmce(Mmce { lambda: 0.0 }),
        TrainingLoss::Mdca(Mdca {
            beta: 0.0,
            gamma: 0.0,
        }),
        TrainingLoss::Acls(Acls {
            alpha: 0.0,
            ..Acls::default()
        }),
        TrainingLoss::PairwiseConstraints(PairwiseConstraints {
            bdc_weight: 0.0,
            bec_weight: 0.0,
        }),
    ] {
        let got = value(&loss, &logits, &targets).double_value(&[]);
        // A zero weight adds exact zeros; only the mean of 10 float64 terms
        // (ce ~1.1, sum ~11) may be reassociated: <= ~4e-16, under 1e-15.
        assert!((got - ce).abs() < 1e-15, "{}: {got} vs {ce}", loss.name());
    }
    // CRL ranks by a history that only a training run keeps: without one it
    // is refused, not computed as if every history were equal.
    let error = TrainingLoss::Crl(Crl::default())
        .mean(&logits, &targets)
        .unwrap_err()
        .to_string();
    assert!(error.contains("history of correct predictions"), "{error}");
    // CPC needs 3 classes, ACLS 2: fewer are refused, not turned into NaN.
    let two = Tensor::zeros([2, 2], (Kind::Double, Device::Cpu));
    let one = Tensor::zeros([2, 1], (Kind::Double, Device::Cpu));
    let y = Tensor::from_slice(&[0i64, 0]);
    let cpc = TrainingLoss::PairwiseConstraints(PairwiseConstraints::default());
    let error = cpc.mean(&two, &y).unwrap_err().to_string();
    assert!(error.contains("at least 3 classes"), "{error}");
    let acls = TrainingLoss::Acls(Acls::default());
    let error = acls.mean(&one, &y).unwrap_err().to_string();
    assert!(error.contains("at least 2 classes"), "{error}");
    assert!(acls.mean(&two, &y).unwrap().double_value(&[]).is_finite());
}
