//! The theory diagnostics: exact Hessian-vector products against the closed
//! form of multinomial logistic regression, the eigenvalue solvers on that
//! Hessian, the per-step record against an independent recomputation, and
//! `theory.jsonl` across a resume.
//!
//! libtorch's random generator is process-global: tests that seed it hold
//! `serial()`.

use std::path::Path;
use std::sync::Mutex;

use csam_nn::curvature::{lanczos_min, top_eigenvalue, LossSurface, PowerSettings};
use csam_nn::model::TrainingPass;
use csam_nn::optim::{SamConfig, SamStep, Sgd, SgdConfig};
use csam_train::spec::{RunSpec, Runtime, SpecLayers};
use csam_train::theory::{read_theory, TheoryRecord, TheorySummary};
use csam_train::train::{RunOutcome, Silent, TrainRequest};
use tch::{nn, nn::Module, nn::ModuleT, Device, Kind, Tensor};

static SERIAL: Mutex<()> = Mutex::new(());

/// A run reported to no one.
fn run(request: &TrainRequest) -> Result<RunOutcome, csam_train::train::TrainError> {
    csam_train::train::run(request, &mut Silent)
}

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Multinomial logistic regression `z = W x + b` in float64.
#[derive(Debug)]
struct Softmax {
    linear: nn::Linear,
}

impl TrainingPass for Softmax {}

impl ModuleT for Softmax {
    fn forward_t(&self, xs: &Tensor, _train: bool) -> Tensor {
        self.linear.forward(xs)
    }
}

const D: i64 = 4;
const K: i64 = 3;
const N: i64 = 12;

fn logistic(seed: i64) -> (nn::VarStore, Softmax, Tensor, Tensor) {
    tch::manual_seed(seed);
    let mut vs = nn::VarStore::new(Device::Cpu);
    let linear = nn::linear(vs.root() / "fc", D, K, Default::default());
    vs.double();
    let x = Tensor::randn([N, D], (Kind::Double, Device::Cpu));
    let y = Tensor::randint(K, [N], (Kind::Int64, Device::Cpu));
    (vs, Softmax { linear }, x, y)
}

/// The Hessian of the mean cross entropy in the weights `(W row-major, b)`,
/// written out from the closed form with plain loops:
/// `H = (1/n) sum_i (diag(p_i) - p_i p_i^T) (x) [x_i; 1][x_i; 1]^T`,
/// entry `((k, a), (l, c)) = (1/n) sum_i (p_ik [k = l] - p_ik p_il) u_ia u_ic`
/// with `u_i = [x_i; 1]` (index D is the bias).
fn closed_form_hessian(model: &Softmax, x: &Tensor, y_len: i64) -> Vec<Vec<f64>> {
    let p = tch::no_grad(|| model.forward_t(x, false).softmax(1, Kind::Double));
    let p: Vec<f64> = Vec::try_from(p.reshape([-1])).unwrap();
    let xs: Vec<f64> = Vec::try_from(x.reshape([-1])).unwrap();
    let (d, k, n) = (D as usize, K as usize, y_len as usize);
    let u = |i: usize, a: usize| if a == d { 1.0 } else { xs[i * d + a] };
    // Parameter order of the VarStore's trainable variables: weight [K, D], bias [K].
    let index = |k_: usize, a: usize| if a == d { k * d + k_ } else { k_ * d + a };
    let dim = k * d + k;
    let mut h = vec![vec![0.0; dim]; dim];
    for i in 0..n {
        for k1 in 0..k {
            for k2 in 0..k {
                let pk = p[i * k + k1];
                let c = if k1 == k2 { pk } else { 0.0 } - pk * p[i * k + k2];
                for a in 0..=d {
                    for b in 0..=d {
                        h[index(k1, a)][index(k2, b)] += c * u(i, a) * u(i, b) / n as f64;
                    }
                }
            }
        }
    }
    h
}

/// The model's trainable variables in (weight, bias) order.
fn params(vs: &nn::VarStore) -> Vec<Tensor> {
    let vars = vs.variables();
    vec![
        vars["fc.weight"].shallow_clone(),
        vars["fc.bias"].shallow_clone(),
    ]
}

#[test]
fn hessian_vector_product_matches_the_closed_form_of_softmax_regression() {
    let _serial = serial();
    let (vs, model, x, y) = logistic(3);
    // Two batches of different sizes: the shares must weight them.
    let batches = vec![
        (x.narrow(0, 0, 5), y.narrow(0, 0, 5)),
        (x.narrow(0, 5, N - 5), y.narrow(0, 5, N - 5)),
    ];
    let surface = LossSurface::new(&model, params(&vs), batches).unwrap();
    let h = closed_form_hessian(&model, &x, N);
    assert_eq!(surface.dim() as usize, h.len());
    for trial in 0..3 {
        let v = Tensor::randn([surface.dim()], (Kind::Double, Device::Cpu)) * (trial + 1);
        let hv: Vec<f64> = Vec::try_from(surface.hessian_vector_product(&v).unwrap()).unwrap();
        let v: Vec<f64> = Vec::try_from(v).unwrap();
        for (row, got) in h.iter().zip(&hv) {
            let expected: f64 = row.iter().zip(&v).map(|(a, b)| a * b).sum();
            // Float64: sums of 15 * 12 = 180 terms of magnitude <~ 1 (|v| <= ~10)
            // on each side, 180 * 2.2e-16 * ~50 = 2e-12 at worst; 1e-10 leaves 50x.
            assert!(
                (got - expected).abs() < 1e-10,
                "Hv {got} vs closed form {expected}"
            );
        }
    }
    // The gradient of the same surface: (1/n) sum_i (p_i - e_y) (x) u_i,
    // checked through its norm against a central difference of the loss.
    let g = surface.gradient().unwrap();
    let theta = surface.weights().unwrap();
    let step = 1e-6;
    let direction = &g / g.norm();
    surface.set_weights(&(&theta + &direction * step)).unwrap();
    let up = surface.loss().unwrap();
    surface.set_weights(&(&theta - &direction * step)).unwrap();
    let down = surface.loss().unwrap();
    surface.set_weights(&theta).unwrap();
    let slope = (up - down) / (2.0 * step);
    // Central difference with h = 1e-6: truncation h^2 f''' / 6 ~ 1e-12,
    // round-off 2.2e-16 |loss ~1| / h ~ 2e-10 (and theta +- h rounds by
    // ulp(0.5) / h ~ 1e-10 relative): ~5e-10, 200x below 1e-7.
    assert!((slope - g.norm().double_value(&[])).abs() < 1e-7);
}

#[test]
fn eigenvalue_solvers_find_the_ends_of_the_softmax_hessian() {
    let _serial = serial();
    let (vs, model, x, y) = logistic(5);
    let surface = LossSurface::new(&model, params(&vs), vec![(x.shallow_clone(), y)]).unwrap();
    let h = closed_form_hessian(&model, &x, N);
    let flat: Vec<f64> = h.concat();
    let dim = h.len() as i64;
    // LAPACK on the closed-form matrix: an independent reference.
    let reference: Vec<f64> = Vec::try_from(
        Tensor::from_slice(&flat)
            .reshape([dim, dim])
            .linalg_eigvalsh("L"),
    )
    .unwrap();
    let (lowest, highest) = (reference[0], reference[reference.len() - 1]);
    let settings = PowerSettings {
        max_iterations: 500,
        tolerance: 1e-10,
    };
    let start = Tensor::ones([dim], (Kind::Double, Device::Cpu))
        + Tensor::arange(dim, (Kind::Double, Device::Cpu)) * 0.1;
    let mut apply = |v: &Tensor| surface.hessian_vector_product(v);
    let top = top_eigenvalue(&mut apply, &start, settings).unwrap();
    assert!(top.converged, "{top:?}");
    // Stopped at a relative change <= 1e-10: the error left is 1e-10 * r / (1 -
    // r) with r = (lambda2 / lambda1)^2, under 1e-6 unless r > 1 - 1e-4; LAPACK
    // adds ~15 * 2.2e-16 * lambda_max.
    assert!(
        (top.value - highest).abs() < 1e-6 * highest,
        "{top:?} vs {highest}"
    );
    let bottom = lanczos_min(&mut apply, &start, settings).unwrap();
    assert!(bottom.converged, "{bottom:?}");
    // Softmax regression's Hessian is singular (adding a constant to every
    // class's logit changes nothing): its smallest eigenvalue is 0.
    // LAPACK's float64 eigenvalues are within ~15 * 2.2e-16 * lambda_max (<~ 3)
    // of the assembled matrix's, itself within ~1e-15 of the exact one: ~1e-14.
    assert!(lowest.abs() < 1e-12);
    // Lanczos stops at a residual <= 1e-10 * lambda_max, which bounds the Ritz
    // value's error (symmetric matrix): <~ 3e-10, 30x below 1e-8.
    assert!(
        (bottom.value - lowest).abs() < 1e-8,
        "{bottom:?} vs {lowest}"
    );
}

#[test]
fn logged_quantities_match_an_independent_recomputation() {
    let _serial = serial();
    let (vs, model, x, y) = logistic(11);
    let rho = 0.3;
    // The independent recomputation first, at theta, by hand.
    let log_p = |m: &Softmax| {
        m.forward_t(&x, true)
            .log_softmax(1, Kind::Double)
            .gather(1, &y.unsqueeze(1), false)
            .squeeze_dim(1)
    };
    let weights = params(&vs);
    let mean_log_p = log_p(&model).mean(Kind::Double);
    let grads = Tensor::run_backward(&[-&mean_log_p], &weights, false, false);
    let grad_norm = grads
        .iter()
        .map(|g| g.square().sum(Kind::Double))
        .fold(Tensor::from(0.0), |a, b| a + b)
        .sqrt()
        .double_value(&[]);
    let p_y = mean_log_p.double_value(&[]).exp();
    let saved: Vec<Tensor> = weights.iter().map(|w| w.detach().copy()).collect();
    tch::no_grad(|| {
        for (w, g) in weights.iter().zip(&grads) {
            let mut w = w.shallow_clone();
            let _ = w.g_add_(&(g * (rho / grad_norm)));
        }
    });
    let p_y_tilde = tch::no_grad(|| log_p(&model).mean(Kind::Double).double_value(&[]).exp());
    tch::no_grad(|| {
        for (w, s) in weights.iter().zip(&saved) {
            w.shallow_clone().copy_(s);
        }
    });

    // The step that training takes, and its record.
    let config = SamConfig {
        rho,
        ..SamConfig::default()
    };
    let mut step = SamStep::new(config, &vs).unwrap();
    let mut sgd = Sgd::new(&vs, SgdConfig::default()).unwrap();
    let stats = step.step(&model, &x, &y, &mut sgd).unwrap();
    let record = TheoryRecord::from_step(1, 0, rho, &stats).unwrap();
    // Float64 on 12 rows, 15 weights: the step and the recomputation sum in
    // possibly other orders, ~15 * 2.2e-16 relative; the lambda ratio divides by
    // 1 - p_y (~0.7): ~1e-14 at most, 100x below 1e-12.
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs().max(1.0);
    assert!(close(record.p_y, p_y), "{} vs {p_y}", record.p_y);
    assert!(
        close(record.p_y_tilde, p_y_tilde),
        "{} vs {p_y_tilde}",
        record.p_y_tilde
    );
    assert!(
        close(record.grad_norm, grad_norm),
        "{} vs {grad_norm}",
        record.grad_norm
    );
    let bound = (-rho * grad_norm / 2.0).exp() * p_y;
    assert!(close(record.bound, bound));
    assert_eq!(record.lemma2_holds, p_y_tilde <= bound);
    assert!(close(
        record.lambda.unwrap(),
        (1.0 - p_y_tilde) / (1.0 - p_y)
    ));
}

fn digits_sam(epochs: usize) -> (RunSpec, Runtime) {
    let flags: toml::Table = format!(
        "data = \"digits\"\nval_size = 300\nmodel = \"mlp\"\nmlp_hidden = [32]\n\
         epochs = {epochs}\nbatch_size = 128\nlr = 0.05\naugment = false\n\
         optimizer = \"sam\"\ntrack_theory = true\ndevice = \"cpu\"\nthreads = 1\n"
    )
    .parse()
    .unwrap();
    SpecLayers::new().flags(flags).unwrap().build().unwrap()
}

fn train(
    (spec, runtime): &(RunSpec, Runtime),
    out: &Path,
    resume: bool,
    stop: Option<usize>,
) -> RunOutcome {
    run(&TrainRequest {
        spec: spec.clone(),
        runtime: runtime.clone(),
        out: out.to_path_buf(),
        resume,
        stop_after_epoch: stop,
    })
    .unwrap()
}

#[test]
fn theory_log_survives_a_resume_byte_for_byte() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let config = digits_sam(3);
    let whole = dir.path().join("whole");
    train(&config, &whole, false, None);
    let resumed = dir.path().join("resumed");
    assert_eq!(
        train(&config, &resumed, false, Some(1)),
        RunOutcome::Stopped { epoch: 1 }
    );
    // A run killed after logging epoch 2's steps but before its checkpoint.
    let log = resumed.join("theory.jsonl");
    let epoch_one = std::fs::read_to_string(&log).unwrap();
    let stale = epoch_one.replace("\"epoch\":1", "\"epoch\":2");
    std::fs::write(&log, format!("{epoch_one}{stale}")).unwrap();
    train(&config, &resumed, true, None);

    let bytes = |dir: &Path| std::fs::read(dir.join("theory.jsonl")).unwrap();
    assert_eq!(bytes(&whole), bytes(&resumed));
    let records = read_theory(&whole).unwrap();
    let steps_per_epoch = 1142usize.div_ceil(128);
    assert_eq!(records.len(), 3 * steps_per_epoch);
    let steps: Vec<usize> = records.iter().map(|r| r.global_step).collect();
    assert_eq!(steps, (0..3 * steps_per_epoch).collect::<Vec<_>>());
    assert!(records
        .iter()
        .all(|r| r.p_y > 0.0 && r.p_y < 1.0 && r.grad_norm > 0.0));
    assert_eq!(TheorySummary::of(&records).steps, records.len());
    for stem in csam_train::theory::THEORY_PLOTS {
        assert!(whole.join(format!("{stem}.png")).is_file(), "{stem}.png");
        assert!(whole.join(format!("{stem}.svg")).is_file(), "{stem}.svg");
    }
}
