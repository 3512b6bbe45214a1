//! bSAM's step by hand on a two-parameter model (logits `(w0 x, w1 x)`,
//! cross entropy, whose gradient is `(-p1, p1) x` with `p1 = sigmoid((w1 -
//! w0) x)`), every term of Algorithm 1 checked over two steps; the settings
//! it refuses; its state through a save and restore.

mod support;

use csam_nn::mixing::TrainBatch;
use csam_nn::model::TrainingPass;
use csam_nn::optim::{BsamConfig, BsamStep, OptimError};
use support::lock_generator;
use tch::{nn, nn::ModuleT, Device, Kind, Tensor};

/// Logits `(w0 x, w1 x)` of one input feature `x`.
#[derive(Debug)]
struct TwoWeights {
    w: Tensor,
}

impl TwoWeights {
    fn new(vs: &nn::VarStore, w: [f64; 2]) -> Self {
        let mut v = vs.root().zeros("w", &[2]);
        tch::no_grad(|| v.copy_(&Tensor::from_slice(&w)));
        Self { w: v }
    }
}

impl TrainingPass for TwoWeights {}

impl ModuleT for TwoWeights {
    fn forward_t(&self, xs: &Tensor, _train: bool) -> Tensor {
        xs.unsqueeze(1) * self.w.unsqueeze(0)
    }
}

fn setup(w: [f64; 2]) -> (nn::VarStore, TwoWeights) {
    let mut vs = nn::VarStore::new(Device::Cpu);
    vs.set_kind(Kind::Double);
    let model = TwoWeights::new(&vs, w);
    (vs, model)
}

fn config() -> BsamConfig {
    BsamConfig {
        lr: 0.2,
        beta1: 0.9,
        beta2: 0.99,
        rho: 0.1,
        weight_decay: 0.05,
        damping: 0.1,
        init_precision: 2.0,
        n_data: 8.0,
        loss: Default::default(),
    }
}

fn values(t: &Tensor) -> Vec<f64> {
    Vec::<f64>::try_from(t.detach().to_kind(Kind::Double)).unwrap()
}

/// The gradient of the cross entropy of label 0 at input `x`: `(-p1, p1) x`.
fn gradient(w: [f64; 2], x: f64) -> [f64; 2] {
    let p1 = 1.0 / (1.0 + (-(w[1] - w[0]) * x).exp());
    [-p1 * x, p1 * x]
}

/// The state of the hand computation: mean, momentum, precision.
struct Hand {
    m: [f64; 2],
    g_m: [f64; 2],
    s: [f64; 2],
}

impl Hand {
    /// Algorithm 1 by hand, with input `x`, label 0 and noise `e`.
    fn step(&mut self, c: &BsamConfig, x: f64, e: [f64; 2]) {
        let sample = [0, 1].map(|i| self.m[i] + e[i] / (c.n_data * self.s[i]).sqrt());
        let g = gradient(sample, x);
        let perturbed = [0, 1].map(|i| self.m[i] + c.rho * g[i] / self.s[i]);
        let g_eps = gradient(perturbed, x);
        for i in 0..2 {
            let descent = g_eps[i] + c.weight_decay * self.m[i];
            self.g_m[i] = c.beta1 * self.g_m[i] + (1.0 - c.beta1) * descent;
            self.m[i] -= c.lr * self.g_m[i] / self.s[i];
            let curvature = self.s[i].sqrt() * g[i].abs() + c.weight_decay + c.damping;
            self.s[i] = c.beta2 * self.s[i] + (1.0 - c.beta2) * curvature;
        }
    }
}

/// Float64, 2 parameters, 2 steps of ~30 operations on values <= ~3 each
/// side (libtorch vs plain Rust): a few dozen roundings, ~1e-14; 1e-12 leaves
/// 100x.
fn assert_close(ours: &[f64], hand: &[f64; 2], what: &str) {
    for (a, b) in ours.iter().zip(hand) {
        assert!(
            (a - b).abs() < 1e-12,
            "{what}: csam {ours:?}, by hand {hand:?}"
        );
    }
}

#[test]
fn two_steps_match_algorithm_one_by_hand() {
    let w = [0.3, -0.2];
    let (vs, model) = setup(w);
    let c = config();
    let mut step = BsamStep::new(c.clone(), &vs).unwrap();
    let mut hand = Hand {
        m: w,
        g_m: [0.0; 2],
        s: [c.init_precision; 2],
    };
    let y = Tensor::from_slice(&[0i64]);
    for (x, e) in [(1.5, [0.5, -1.0]), (-2.0, [-0.3, 0.8])] {
        let xs = Tensor::from_slice(&[x]);
        let noise = Tensor::from_slice(&e);
        let stats = step
            .step_with_noise(&model, &TrainBatch::plain(&xs, &y), &noise)
            .unwrap();
        let sample = [0, 1].map(|i| hand.m[i] + e[i] / (c.n_data * hand.s[i]).sqrt());
        let g = gradient(sample, x);
        // As assert_close: a sigmoid and a norm of 2 float64 values <= 2, ~1e-15.
        assert!(
            (stats.grad_norm - g[0].hypot(g[1])).abs() < 1e-12,
            "||g|| at the sample"
        );
        hand.step(&c, x, e);
        assert_close(&values(&model.w), &hand.m, "mean m");
        assert_close(&values(step.momentum()), &hand.g_m, "momentum g_m");
        assert_close(&values(step.precision()), &hand.s, "precision s");
    }
}

#[test]
fn state_saved_and_restored_continues_the_same() {
    let _generator = lock_generator();
    let c = config();
    let (xs, y) = (Tensor::from_slice(&[1.0f64]), Tensor::from_slice(&[0i64]));
    let batch = TrainBatch::plain(&xs, &y);
    let (vs, model) = setup([0.3, -0.2]);
    let mut first = BsamStep::new(c.clone(), &vs).unwrap();
    tch::manual_seed(5);
    first.step_batch(&model, &batch).unwrap();
    let saved: Vec<(String, Tensor)> = first
        .state()
        .into_iter()
        .map(|(k, v)| (k, v.copy()))
        .collect();
    let weights = values(&model.w);
    first.step_batch(&model, &batch).unwrap();
    let (vs2, model2) = setup([weights[0], weights[1]]);
    let mut second = BsamStep::new(c.clone(), &vs2).unwrap();
    second.load_state(&saved).unwrap();
    tch::manual_seed(5);
    let _ = Tensor::randn([2], (Kind::Double, Device::Cpu)); // the first step's draw
    second.step_batch(&model2, &batch).unwrap();
    assert_eq!(values(&model.w), values(&model2.w));
    assert_eq!(values(first.precision()), values(second.precision()));
    assert_eq!(values(first.momentum()), values(second.momentum()));
    // A state without the precision is refused and changes nothing.
    let before = values(second.momentum());
    let err = second.load_state(&saved[..1]).unwrap_err();
    assert!(matches!(err, OptimError::Mismatch(_)), "{err}");
    assert_eq!(values(second.momentum()), before);
}

/// A change of one setting.
type Edit = fn(&mut BsamConfig);

#[test]
fn bad_settings_and_noise_are_refused_in_one_line() {
    let (vs, model) = setup([0.0, 0.0]);
    let cases: [(Edit, &str); 7] = [
        (
            |c| c.beta1 = 1.0,
            "invalid bsam beta1 = 1: must lie in [0, 1)",
        ),
        (
            |c| c.beta2 = -0.1,
            "invalid bsam beta2 = -0.1: must lie in [0, 1)",
        ),
        (
            |c| c.damping = 0.0,
            "invalid bsam damping = 0: must be finite and > 0",
        ),
        (
            |c| c.init_precision = -1.0,
            "invalid bsam init_precision = -1: must be finite and > 0",
        ),
        (
            |c| c.n_data = 0.0,
            "invalid bsam n_data = 0: must be finite and > 0",
        ),
        (
            |c| c.rho = f64::NAN,
            "invalid bsam rho = NaN: must be finite and > 0",
        ),
        (
            |c| c.weight_decay = -1e-4,
            "invalid bsam weight_decay = -0.0001: must be finite and >= 0",
        ),
    ];
    for (edit, expected) in cases {
        let mut c = config();
        edit(&mut c);
        let message = BsamStep::new(c, &vs).unwrap_err().to_string();
        assert!(message.contains(expected), "{message}");
        assert!(!message.contains('\n'), "{message}");
    }
    let mut step = BsamStep::new(config(), &vs).unwrap();
    let (xs, y) = (Tensor::from_slice(&[1.0f64]), Tensor::from_slice(&[0i64]));
    let wrong = Tensor::zeros([3], (Kind::Double, Device::Cpu));
    let message = step
        .step_with_noise(&model, &TrainBatch::plain(&xs, &y), &wrong)
        .unwrap_err()
        .to_string();
    assert!(message.contains("bSAM noise is"), "{message}");
    assert_eq!(
        values(&model.w),
        [0.0, 0.0],
        "a refused step moved the weights"
    );
}
