//! Optimiser state through a safetensors file (checkpoint / resume), and the
//! optimisers' error cases.

mod support;

use csam_nn::loss::cross_entropy;
use csam_nn::model::{build_model, InputShape, Model};
use csam_nn::optim::{AdamW, AdamWConfig, BaseOptimizer, OptimError, Sgd, SgdConfig};
use support::lock_generator;
use tch::{nn, nn::ModuleT, Device, Kind, Tensor};

fn setup() -> (nn::VarStore, Model) {
    tch::manual_seed(11);
    let vs = nn::VarStore::new(Device::Cpu);
    let input = InputShape {
        channels: 1,
        height: 3,
        width: 3,
    };
    let model = build_model("cnn".parse().unwrap(), &vs.root(), input, 3).unwrap();
    (vs, model)
}

fn train_step(model: &Model, opt: &mut dyn BaseOptimizer, seed: i64) {
    tch::manual_seed(seed);
    let xs = Tensor::randn([4, 1, 3, 3], (Kind::Float, Device::Cpu));
    let ys = Tensor::randint(3, [4], (Kind::Int64, Device::Cpu));
    let loss = cross_entropy(&model.forward_t(&xs, true), &ys).unwrap();
    let grads = Tensor::run_backward(&[loss], opt.params().tensors(), false, false);
    opt.step(&grads).unwrap();
}

type MakeOpt = dyn Fn(&nn::VarStore) -> Box<dyn BaseOptimizer>;

fn resume_is_exact(make: &MakeOpt, expected_entries: usize) {
    let dir = tempfile::tempdir().unwrap();
    let (vs, model) = setup();
    let mut opt = make(&vs);
    for s in 0..2 {
        train_step(&model, &mut *opt, 100 + s);
    }
    let state = opt.state();
    assert_eq!(state.len(), expected_entries);
    let named: Vec<(&str, &Tensor)> = state.iter().map(|(n, t)| (n.as_str(), t)).collect();
    Tensor::write_safetensors(&named, dir.path().join("optim.safetensors")).unwrap();
    vs.save(dir.path().join("model.safetensors")).unwrap();

    let (mut vs2, model2) = setup();
    let mut opt2 = make(&vs2);
    train_step(&model2, &mut *opt2, 999); // some other history, to be overwritten
    vs2.load(dir.path().join("model.safetensors")).unwrap();
    let loaded = Tensor::read_safetensors(dir.path().join("optim.safetensors")).unwrap();
    opt2.load_state(&loaded).unwrap();

    for s in 2..5 {
        train_step(&model, &mut *opt, 100 + s);
        train_step(&model2, &mut *opt2, 100 + s);
    }
    let (a, b) = (vs.variables(), vs2.variables());
    for (k, v) in &a {
        // The same weights, state and batches through the same float32 ops: equal
        // bits on any CPU (a machine's kernels are deterministic).
        assert!(v.equal(&b[k]), "{k} differs after resume");
    }
}

fn sgd(vs: &nn::VarStore) -> Box<dyn BaseOptimizer> {
    Box::new(Sgd::new(vs, SgdConfig::default()).unwrap())
}

fn adamw(vs: &nn::VarStore) -> Box<dyn BaseOptimizer> {
    Box::new(AdamW::new(vs, AdamWConfig::default()).unwrap())
}

#[test]
fn sgd_resumes_bit_identically_from_saved_state() {
    let _serial = lock_generator();
    // One momentum buffer per trainable tensor: 3 convs + 3 BN x 2 + fc x 2 = 11.
    resume_is_exact(&sgd, 11);
}

#[test]
fn adamw_resumes_bit_identically_from_saved_state() {
    let _serial = lock_generator();
    // Two moments per trainable tensor plus the step counter.
    resume_is_exact(&adamw, 2 * 11 + 1);
}

#[test]
fn incomplete_state_is_rejected_and_leaves_the_optimiser_unchanged() {
    let _serial = lock_generator();
    let (vs, model) = setup();
    let mut opt = adamw(&vs);
    train_step(&model, &mut *opt, 1);
    let before: Vec<Tensor> = opt.state().iter().map(|(_, t)| t.copy()).collect();
    let mut bad: Vec<(String, Tensor)> = opt
        .state()
        .into_iter()
        .map(|(n, t)| (n, t.zeros_like()))
        .collect();
    bad.pop();
    assert!(matches!(opt.load_state(&bad), Err(OptimError::Mismatch(_))));
    for ((_, now), then) in opt.state().iter().zip(&before) {
        assert!(now.equal(then), "a failed load changed the state");
    }
    let mut wrong_shape: Vec<(String, Tensor)> = opt
        .state()
        .into_iter()
        .map(|(n, t)| (n, t.copy()))
        .collect();
    let last = wrong_shape.len() - 1;
    wrong_shape[last].1 = Tensor::zeros([7], (Kind::Float, Device::Cpu));
    assert!(matches!(
        opt.load_state(&wrong_shape),
        Err(OptimError::Mismatch(_))
    ));
}

#[test]
fn misaligned_gradients_are_rejected() {
    let _serial = lock_generator();
    let (vs, _) = setup();
    let mut opt = sgd(&vs);
    let n = opt.params().len();
    let grads: Vec<Tensor> = opt
        .params()
        .tensors()
        .iter()
        .map(|p| p.zeros_like())
        .collect();
    assert!(matches!(
        opt.step(&grads[..n - 1]),
        Err(OptimError::Mismatch(_))
    ));
    let mut swapped: Vec<Tensor> = grads.iter().map(|g| g.shallow_clone()).collect();
    swapped.swap(0, n - 1);
    assert!(matches!(opt.step(&swapped), Err(OptimError::Mismatch(_))));
    let as_f64: Vec<Tensor> = grads.iter().map(|g| g.to_kind(Kind::Double)).collect();
    assert!(matches!(opt.step(&as_f64), Err(OptimError::Mismatch(_))));
}

#[test]
fn parameters_are_named_and_sorted() {
    let _serial = lock_generator();
    let (vs, _) = setup();
    let opt = sgd(&vs);
    let names = opt.params().names();
    assert!(names.windows(2).all(|w| w[0] < w[1]), "{names:?}");
    assert!(names.contains(&"conv1.weight".to_string()));
    assert!(
        !names.iter().any(|n| n.contains("running")),
        "buffers are not parameters"
    );
}

#[test]
fn invalid_hyperparameters_are_errors() {
    let _serial = lock_generator();
    let (vs, _) = setup();
    let bad_sgd = [
        SgdConfig {
            lr: -0.1,
            ..SgdConfig::default()
        },
        SgdConfig {
            momentum: 1.0,
            ..SgdConfig::default()
        },
        SgdConfig {
            weight_decay: f64::NAN,
            ..SgdConfig::default()
        },
        SgdConfig {
            momentum: 0.0,
            nesterov: true,
            ..SgdConfig::default()
        },
    ];
    for c in bad_sgd {
        assert!(
            matches!(Sgd::new(&vs, c), Err(OptimError::Config(_))),
            "{c:?}"
        );
    }
    let bad_adamw = [
        AdamWConfig {
            beta1: 1.0,
            ..AdamWConfig::default()
        },
        AdamWConfig {
            eps: 0.0,
            ..AdamWConfig::default()
        },
        AdamWConfig {
            lr: f64::INFINITY,
            ..AdamWConfig::default()
        },
    ];
    for c in bad_adamw {
        assert!(
            matches!(AdamW::new(&vs, c), Err(OptimError::Config(_))),
            "{c:?}"
        );
    }
    let empty = nn::VarStore::new(Device::Cpu);
    assert!(matches!(
        Sgd::new(&empty, SgdConfig::default()),
        Err(OptimError::Config(_))
    ));
}

#[test]
fn optimizer_config_builds_from_json() {
    let _serial = lock_generator();
    use csam_nn::optim::OptimizerConfig;
    let (vs, _) = setup();
    let json = r#"{"optimizer":"sgd","lr":0.05,"momentum":0.9,"nesterov":true,"weight_decay":0.0}"#;
    let config: OptimizerConfig = serde_json::from_str(json).unwrap();
    let opt = config.build(&vs).unwrap();
    assert_eq!(opt.learning_rate(), 0.05);
    assert_eq!(opt.state().len(), 11);
    let adamw = OptimizerConfig::AdamW(AdamWConfig::default());
    let json = serde_json::to_string(&adamw).unwrap();
    assert!(json.contains(r#""optimizer":"adamw""#), "{json}");
    assert_eq!(
        serde_json::from_str::<OptimizerConfig>(&json).unwrap(),
        adamw
    );
    assert_eq!(adamw.build(&vs).unwrap().state().len(), 23);
    let bad = OptimizerConfig::Sgd(SgdConfig {
        lr: -1.0,
        ..SgdConfig::default()
    });
    assert!(bad.build(&vs).is_err());
}
