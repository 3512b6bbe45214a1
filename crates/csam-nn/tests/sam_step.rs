//! The SAM / CSAM step against a hand-written reference on a 2-layer model
//! with BatchNorm (Linear -> BatchNorm1d -> ReLU -> Linear), plus the
//! invariants of docs/conventions.md ("The SAM step"): exact restore of theta, BatchNorm running
//! statistics updated once per step, CSAM(gamma = 0) == SAM bit for bit,
//! m-sharpness and `sam_every`.

mod support;

use csam_nn::model::TrainingPass;
use csam_nn::optim::{
    BaseOptimizer, Perturbation, SamConfig, SamStep, SecondLoss, Sgd, SgdConfig, StepStats,
};
use std::collections::BTreeMap;
use support::lock_generator;
use tch::{nn, nn::Module, nn::ModuleT, Device, Kind, Tensor};

const BN_EPS: f64 = 1e-5;
const BN_MOMENTUM: f64 = 0.1;

#[derive(Debug)]
struct TwoLayer {
    fc1: nn::Linear,
    bn: nn::BatchNorm,
    fc2: nn::Linear,
}

impl TwoLayer {
    fn new(vs: &nn::VarStore) -> Self {
        let root = vs.root();
        let bn_config = nn::BatchNormConfig {
            ws_init: nn::Init::Uniform { lo: 0.5, up: 1.5 },
            bs_init: nn::Init::Uniform { lo: -0.2, up: 0.2 },
            ..Default::default()
        };
        Self {
            fc1: nn::linear(&root / "fc1", 4, 6, Default::default()),
            bn: nn::batch_norm1d(&root / "bn", 6, bn_config),
            fc2: nn::linear(&root / "fc2", 6, 3, Default::default()),
        }
    }
}

impl TrainingPass for TwoLayer {}

impl ModuleT for TwoLayer {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let h = self.bn.forward_t(&self.fc1.forward(xs), train).relu();
        self.fc2.forward(&h)
    }
}

/// A model and its store, float64 unless `kind` says otherwise.
fn setup(seed: i64, kind: Kind) -> (nn::VarStore, TwoLayer) {
    tch::manual_seed(seed);
    let mut vs = nn::VarStore::new(Device::Cpu);
    let model = TwoLayer::new(&vs);
    vs.set_kind(kind);
    (vs, model)
}

fn batch(seed: i64, n: i64, kind: Kind) -> (Tensor, Tensor) {
    tch::manual_seed(seed);
    let xs = Tensor::randn([n, 4], (kind, Device::Cpu)) * 2.0;
    let ys = Tensor::randint(3, [n], (Kind::Int64, Device::Cpu));
    (xs, ys)
}

type Theta = BTreeMap<String, Tensor>;

fn shallow(th: &Theta) -> Theta {
    th.iter()
        .map(|(k, v)| (k.clone(), v.shallow_clone()))
        .collect()
}

fn snapshot(vs: &nn::VarStore) -> Theta {
    vs.variables()
        .into_iter()
        .map(|(k, v)| (k, v.detach().copy()))
        .collect()
}

/// Hand-written forward with batch statistics: logits, batch mean and
/// unbiased batch variance of the BatchNorm input.
fn reference_forward(th: &Theta, x: &Tensor) -> (Tensor, Tensor, Tensor) {
    let h = x.matmul(&th["fc1.weight"].tr()) + &th["fc1.bias"];
    let n = h.size()[0] as f64;
    let mean = h.mean_dim(0, false, None);
    let var = (&h - &mean).square().mean_dim(0, false, None);
    let normed = (&h - &mean) / (&var + BN_EPS).sqrt() * &th["bn.weight"] + &th["bn.bias"];
    let logits = normed.relu().matmul(&th["fc2.weight"].tr()) + &th["fc2.bias"];
    (logits, mean.detach(), (var * (n / (n - 1.0))).detach())
}

fn log_p_true(logits: &Tensor, y: &Tensor) -> Tensor {
    logits
        .log_softmax(1, None)
        .gather(1, &y.unsqueeze(1), false)
        .squeeze_dim(1)
}

/// `-(1/B) sum w_i log p_i` with w_i = (1 + p_i)^(-gamma) where p_i > 1/2.
fn reference_csam(log_p: &Tensor, gamma: f64, detach: bool) -> Tensor {
    let p = log_p.exp();
    let mut w = (&p + 1.0).pow_tensor_scalar(-gamma);
    if detach {
        w = w.detach();
    }
    let w = w.where_self(&p.gt(0.5), &p.ones_like());
    -(w * log_p).mean(None)
}

const TRAINABLE: [&str; 6] = [
    "bn.bias",
    "bn.weight",
    "fc1.bias",
    "fc1.weight",
    "fc2.bias",
    "fc2.weight",
];

fn grads_at(th: &Theta, loss: impl Fn(&Theta) -> Tensor) -> Vec<Tensor> {
    let leaves: Theta = th
        .iter()
        .map(|(k, v)| (k.clone(), v.detach().copy().set_requires_grad(true)))
        .collect();
    let l = loss(&leaves);
    let inputs: Vec<&Tensor> = TRAINABLE.iter().map(|k| &leaves[*k]).collect();
    Tensor::run_backward(&[l], &inputs, false, false)
}

/// One SAM step by hand: per sub-batch, g at theta, e = rho g / (||g|| + 1e-12),
/// g' at theta + e; g' averaged by sub-batch size; then SGD (first step, so the
/// momentum buffer is d) with coupled weight decay. Returns the new theta and
/// the running statistics after the first sub-batch's pass 1.
fn reference_sam_sgd(
    theta: &Theta,
    parts: &[(Tensor, Tensor)],
    rho: f64,
    second: &dyn Fn(&Tensor) -> Tensor,
    lr: f64,
    weight_decay: f64,
) -> (Theta, Tensor, Tensor) {
    let total: i64 = parts.iter().map(|(x, _)| x.size()[0]).sum();
    let mut update: Vec<Tensor> = TRAINABLE.iter().map(|k| theta[*k].zeros_like()).collect();
    let mut running = None;
    for (x, y) in parts {
        let share = x.size()[0] as f64 / total as f64;
        let g = grads_at(theta, |th| {
            -log_p_true(&reference_forward(th, x).0, y).mean(None)
        });
        let norm: f64 = g
            .iter()
            .map(|t| t.square().sum(None).double_value(&[]))
            .sum::<f64>()
            .sqrt();
        let mut tilde = shallow(theta);
        for (k, gk) in TRAINABLE.iter().zip(&g) {
            tilde.insert(k.to_string(), &theta[*k] + gk * (rho / (norm + 1e-12)));
        }
        let g2 = grads_at(&tilde, |th| {
            second(&log_p_true(&reference_forward(th, x).0, y))
        });
        for (u, g2k) in update.iter_mut().zip(&g2) {
            *u = &*u + g2k * share;
        }
        if running.is_none() {
            let (_, mean, var) = reference_forward(theta, x);
            let rm = &theta["bn.running_mean"] * (1.0 - BN_MOMENTUM) + mean * BN_MOMENTUM;
            let rv = &theta["bn.running_var"] * (1.0 - BN_MOMENTUM) + var * BN_MOMENTUM;
            running = Some((rm, rv));
        }
    }
    let mut next = shallow(theta);
    for (k, u) in TRAINABLE.iter().zip(&update) {
        let d = u + &theta[*k] * weight_decay;
        next.insert(k.to_string(), &theta[*k] - d * lr);
    }
    let (rm, rv) = running.unwrap();
    (next, rm, rv)
}

fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
    (a - b).abs().max().double_value(&[])
}

fn sgd(vs: &nn::VarStore, lr: f64, weight_decay: f64) -> Sgd {
    let config = SgdConfig {
        lr,
        momentum: 0.9,
        nesterov: false,
        weight_decay,
    };
    Sgd::new(vs, config).unwrap()
}

fn sam_config(rho: f64, second_loss: SecondLoss, m: Option<usize>) -> SamConfig {
    SamConfig {
        rho,
        second_loss,
        m,
        ..SamConfig::default()
    }
}

fn check_against_reference(second_loss: SecondLoss, m: Option<usize>) {
    let (rho, lr, wd) = (0.3, 0.2, 5e-3);
    let (vs, model) = setup(1, Kind::Double);
    let (xs, ys) = batch(2, 8, Kind::Double);
    let theta = snapshot(&vs);
    let parts: Vec<(Tensor, Tensor)> = match m {
        Some(m) => xs
            .split(m as i64, 0)
            .into_iter()
            .zip(ys.split(m as i64, 0))
            .collect(),
        None => vec![(xs.shallow_clone(), ys.shallow_clone())],
    };
    let second: Box<dyn Fn(&Tensor) -> Tensor> = match second_loss {
        SecondLoss::Plain => Box::new(|lp: &Tensor| -lp.mean(None)),
        SecondLoss::Csam { gamma, detach } => {
            Box::new(move |lp: &Tensor| reference_csam(lp, gamma, detach))
        }
    };
    let (expected, rm, rv) = reference_sam_sgd(&theta, &parts, rho, &*second, lr, wd);

    let mut opt = sgd(&vs, lr, wd);
    let mut step = SamStep::new(sam_config(rho, second_loss, m), &vs).unwrap();
    let stats = step.step(&model, &xs, &ys, &mut opt).unwrap();
    let after = snapshot(&vs);
    // Float64, a 4-6-3 network on 8 rows, one step: reductions of <= 8 terms
    // on values ~1, a few dozen chained ops, ~1e-14; 1e-12 leaves 100x. A
    // step moves weights by ~1e-2, so 1e-6 only asks that they moved.
    for k in TRAINABLE {
        let d = max_diff(&after[k], &expected[k]);
        assert!(
            d < 1e-12,
            "{second_loss:?} m={m:?}: {k} differs from the reference by {d}"
        );
        assert!(max_diff(&after[k], &theta[k]) > 1e-6, "{k} did not move");
    }
    assert!(
        max_diff(&after["bn.running_mean"], &rm) < 1e-12,
        "running_mean"
    );
    assert!(
        max_diff(&after["bn.running_var"], &rv) < 1e-12,
        "running_var"
    );
    assert!(stats.perturbed.is_some());
    if m.is_none() {
        let (logits, _, _) = reference_forward(&theta, &xs);
        let ce = -log_p_true(&logits, &ys).mean(None).double_value(&[]);
        assert!((stats.loss - ce).abs() < 1e-12);
        assert!((stats.p_true - (-ce).exp()).abs() < 1e-12);
    }
}

#[test]
fn sam_step_matches_hand_reference() {
    let _serial = lock_generator();
    check_against_reference(SecondLoss::Plain, None);
}

#[test]
fn csam_step_matches_hand_reference_in_both_detach_modes() {
    let _serial = lock_generator();
    check_against_reference(
        SecondLoss::Csam {
            gamma: 1.5,
            detach: false,
        },
        None,
    );
    check_against_reference(
        SecondLoss::Csam {
            gamma: 1.5,
            detach: true,
        },
        None,
    );
}

#[test]
fn m_sharpness_matches_hand_reference_per_sub_batch() {
    let _serial = lock_generator();
    check_against_reference(SecondLoss::Plain, Some(4));
    check_against_reference(
        SecondLoss::Csam {
            gamma: 2.0,
            detach: false,
        },
        Some(3),
    );
}

#[test]
fn m_equal_to_batch_size_is_plain_sam() {
    let _serial = lock_generator();
    let run = |m: Option<usize>| {
        let (vs, model) = setup(3, Kind::Float);
        let mut opt = sgd(&vs, 0.1, 5e-4);
        let mut step = SamStep::new(sam_config(0.1, SecondLoss::Plain, m), &vs).unwrap();
        for s in 0..3 {
            let (xs, ys) = batch(10 + s, 8, Kind::Float);
            step.step(&model, &xs, &ys, &mut opt).unwrap();
        }
        snapshot(&vs)
    };
    let (plain, with_m) = (run(None), run(Some(8)));
    // m = the batch takes the whole-batch path: the same float32 ops in the
    // same order, equal bits on any CPU (kernels are deterministic there).
    for (k, v) in &plain {
        assert!(v.equal(&with_m[k]), "{k} differs");
    }
}

#[test]
fn theta_is_restored_exactly_and_running_stats_move_once() {
    let _serial = lock_generator();
    tch::set_num_threads(1); // tiny tensors: threads only contend
                             // lr = 0: the base step changes nothing, so theta after SAM steps must be
                             // bit-identical to theta before (subtracting e would drift in float32).
    let (vs, model) = setup(4, Kind::Float);
    let (shadow_vs, shadow) = setup(4, Kind::Float);
    let before = snapshot(&vs);
    let mut opt = sgd(&vs, 0.0, 0.0);
    let config = SamConfig {
        perturbation: Perturbation::Asam { eta: 0.01 },
        ..sam_config(
            0.7,
            SecondLoss::Csam {
                gamma: 1.0,
                detach: false,
            },
            None,
        )
    };
    let mut step = SamStep::new(config, &vs).unwrap();
    for s in 0..3 {
        let (xs, ys) = batch(20 + s, 8, Kind::Float);
        step.step(&model, &xs, &ys, &mut opt).unwrap();
        // The shadow model sees one train-mode forward per step at the same theta.
        let _ = tch::no_grad(|| shadow.forward_t(&xs, true));
    }
    let (after, shadow_after) = (snapshot(&vs), snapshot(&shadow_vs));
    // theta comes back by copy, and the shadow runs the same forward passes on
    // the same weights and inputs: equal bits on any CPU.
    for k in TRAINABLE {
        assert!(after[k].equal(&before[k]), "{k} not restored exactly");
    }
    for k in ["bn.running_mean", "bn.running_var"] {
        assert!(!after[k].equal(&before[k]), "{k} never updated");
        assert!(
            after[k].equal(&shadow_after[k]),
            "{k} is not one forward per step"
        );
    }
}

#[test]
fn csam_with_gamma_zero_is_bit_identical_to_sam() {
    let _serial = lock_generator();
    tch::set_num_threads(1); // tiny tensors: threads only contend
    let run = |second_loss: SecondLoss| {
        let (vs, model) = setup(5, Kind::Float);
        let mut opt = sgd(&vs, 0.5, 5e-4);
        let mut step = SamStep::new(sam_config(0.2, second_loss, None), &vs).unwrap();
        for s in 0..4 {
            let (xs, ys) = batch(30 + s, 16, Kind::Float);
            step.step(&model, &xs, &ys, &mut opt).unwrap();
        }
        snapshot(&vs)
    };
    let sam = run(SecondLoss::Plain);
    for detach in [false, true] {
        let csam0 = run(SecondLoss::Csam { gamma: 0.0, detach });
        // Weights (1 + p)^0 = 1 exactly: the same float32 values through the
        // same ops, so equal bits on any CPU.
        for (k, v) in &sam {
            assert!(v.equal(&csam0[k]), "detach={detach}: {k} differs");
        }
    }
    // And a non-zero gamma does change the trajectory (the test can tell them apart).
    let csam2 = run(SecondLoss::Csam {
        gamma: 2.0,
        detach: false,
    });
    assert!(TRAINABLE.iter().any(|k| !sam[*k].equal(&csam2[*k])));
}

#[test]
fn sam_every_k_perturbs_on_steps_0_k_2k() {
    let _serial = lock_generator();
    let (vs, model) = setup(6, Kind::Float);
    let mut opt = sgd(&vs, 0.05, 0.0);
    let config = SamConfig {
        sam_every: 3,
        ..sam_config(0.1, SecondLoss::Plain, None)
    };
    let mut step = SamStep::new(config, &vs).unwrap();
    let mut pattern = Vec::new();
    for s in 0..7 {
        assert_eq!(step.steps_taken(), s as u64);
        let (xs, ys) = batch(40 + s, 8, Kind::Float);
        let stats: StepStats = step.step(&model, &xs, &ys, &mut opt).unwrap();
        pattern.push(stats.perturbed.is_some());
    }
    assert_eq!(pattern, [true, false, false, true, false, false, true]);
    // A resumed run continues the pattern from its global step.
    step.set_steps_taken(5);
    let next: Vec<bool> = (0..3)
        .map(|s| {
            let (xs, ys) = batch(50 + s, 8, Kind::Float);
            let stats = step.step(&model, &xs, &ys, &mut opt).unwrap();
            stats.perturbed.is_some()
        })
        .collect();
    assert_eq!(next, [false, true, false]);
    assert_eq!(step.steps_taken(), 8);
}

#[test]
fn skipped_sam_steps_are_plain_sgd_steps() {
    let _serial = lock_generator();
    let (vs, model) = setup(7, Kind::Double);
    let (xs, ys) = batch(50, 8, Kind::Double);
    let theta = snapshot(&vs);
    let mut opt = sgd(&vs, 0.1, 1e-3);
    let config = SamConfig {
        sam_every: 2,
        ..sam_config(0.1, SecondLoss::Plain, None)
    };
    let mut step = SamStep::new(config, &vs).unwrap();
    step.step(&model, &xs, &ys, &mut opt).unwrap(); // SAM
    let mid = snapshot(&vs);
    let stats = step.step(&model, &xs, &ys, &mut opt).unwrap(); // plain
    assert!(stats.perturbed.is_none());
    // Plain SGD with momentum by hand: b1 = d0 (SAM step), b2 = 0.9 b1 + d1.
    let g = grads_at(&mid, |th| {
        -log_p_true(&reference_forward(th, &xs).0, &ys).mean(None)
    });
    let after = snapshot(&vs);
    for (k, gk) in TRAINABLE.iter().zip(&g) {
        let b1 = (&theta[*k] - &mid[*k]) / 0.1;
        let d1 = gk + &mid[*k] * 1e-3;
        let expected = &mid[*k] - (b1 * 0.9 + d1) * 0.1;
        // Float64 on a tiny model: ~1e-15 round-off (b1 recovered through / 0.1
        // loses ~1e-15); 1e-12 leaves 1000x.
        assert!(max_diff(&after[*k], &expected) < 1e-12, "{k}");
    }
    // The constant schedule returns the configured 0.1 itself: exact.
    assert!((opt.learning_rate() - 0.1).abs() < 1e-15);
}

#[test]
fn clipping_bounds_the_update_gradient_of_both_step_kinds() {
    let _serial = lock_generator();
    // SGD without momentum or decay, lr 1: theta moves by exactly -clip(g').
    let max_norm = 1e-3;
    for sam_every in [1, 2] {
        let (vs, model) = setup(8, Kind::Double);
        let plain = SgdConfig {
            lr: 1.0,
            momentum: 0.0,
            nesterov: false,
            weight_decay: 0.0,
        };
        let mut opt = Sgd::new(&vs, plain).unwrap();
        let config = SamConfig {
            sam_every,
            clip_grad_norm: Some(max_norm),
            ..sam_config(0.1, SecondLoss::Plain, None)
        };
        let mut step = SamStep::new(config, &vs).unwrap();
        for s in 0..2 {
            let before = snapshot(&vs);
            let (xs, ys) = batch(60 + s, 8, Kind::Double);
            let stats = step.step(&model, &xs, &ys, &mut opt).unwrap();
            assert!(
                stats.grad_norm > 10.0 * max_norm,
                "the gradient must need clipping"
            );
            let after = snapshot(&vs);
            let moved: f64 = TRAINABLE
                .iter()
                .map(|k| {
                    (&after[*k] - &before[*k])
                        .square()
                        .sum(None)
                        .double_value(&[])
                })
                .sum::<f64>()
                .sqrt();
            // clip_grad_norm_: g * max_norm / (||g|| + 1e-6). With ||g|| > 1e-2
            // the 1e-6 shortens the move by <= 1e-3 * 1e-6 / 1e-2 = 1e-7;
            // float64 round-off adds ~1e-15. 2e-7 is twice the bound.
            assert!(
                (moved - max_norm).abs() < 2e-7,
                "sam_every {sam_every} step {s}: {moved}"
            );
        }
    }
}

/// Gives logits of the wrong batch size on its second forward pass.
#[derive(Debug)]
struct FailsOnPass2 {
    inner: TwoLayer,
    calls: std::sync::atomic::AtomicUsize,
}

impl TrainingPass for FailsOnPass2 {}

impl ModuleT for FailsOnPass2 {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let logits = self.inner.forward_t(xs, train);
        let call = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if call == 1 {
            logits.narrow(0, 0, 1)
        } else {
            logits
        }
    }
}

#[test]
fn a_failed_second_pass_restores_theta_and_running_stats() {
    let _serial = lock_generator();
    let (vs, inner) = setup(9, Kind::Float);
    let (shadow_vs, shadow) = setup(9, Kind::Float);
    let before = snapshot(&vs);
    let model = FailsOnPass2 {
        inner,
        calls: Default::default(),
    };
    let mut opt = sgd(&vs, 0.1, 0.0);
    let mut step = SamStep::new(sam_config(0.5, SecondLoss::Plain, None), &vs).unwrap();
    let (xs, ys) = batch(70, 8, Kind::Float);
    assert!(step.step(&model, &xs, &ys, &mut opt).is_err());
    let _ = tch::no_grad(|| shadow.forward_t(&xs, true));
    let (after, shadow_after) = (snapshot(&vs), snapshot(&shadow_vs));
    // Restored by copy; the shadow's one forward pass is the failed step's:
    // equal bits.
    for k in TRAINABLE {
        assert!(after[k].equal(&before[k]), "{k} left perturbed");
    }
    for k in ["bn.running_mean", "bn.running_var"] {
        assert!(
            after[k].equal(&shadow_after[k]),
            "{k} moved by the failed pass"
        );
    }
    // Mismatched inputs and targets are rejected before any forward pass.
    let (xs, ys) = batch(71, 8, Kind::Float);
    let err = step.step(&model, &xs, &ys.narrow(0, 0, 7), &mut opt);
    assert!(err.is_err());
}

#[test]
fn weights_loaded_after_construction_are_used() {
    let _serial = lock_generator();
    // VarStore::load replaces the variables' data; a SamStep built (and used)
    // before the load must follow it.
    let dir = tempfile::tempdir().unwrap();
    let weights = dir.path().join("w.safetensors");
    setup(12, Kind::Float).0.save(&weights).unwrap();
    let (xs, ys) = batch(80, 8, Kind::Float);
    let config = sam_config(0.2, SecondLoss::Plain, None);

    let (mut vs, model) = setup(13, Kind::Float);
    let mut step = SamStep::new(config.clone(), &vs).unwrap();
    step.step(&model, &xs, &ys, &mut sgd(&vs, 0.1, 5e-4))
        .unwrap();
    vs.load(&weights).unwrap();
    step.step(&model, &xs, &ys, &mut sgd(&vs, 0.1, 5e-4))
        .unwrap();

    let (mut fresh_vs, fresh_model) = setup(14, Kind::Float);
    fresh_vs.load(&weights).unwrap();
    let mut fresh_step = SamStep::new(config, &fresh_vs).unwrap();
    fresh_step
        .step(&fresh_model, &xs, &ys, &mut sgd(&fresh_vs, 0.1, 5e-4))
        .unwrap();

    let (late, fresh) = (snapshot(&vs), snapshot(&fresh_vs));
    // One step from the same loaded weights on the same batch: the same ops,
    // equal bits.
    for (k, v) in &fresh {
        assert!(v.equal(&late[k]), "{k} differs");
    }
}
