//! The run specification: every key round-trips (flat keys -> spec -> the
//! nested config.toml -> spec), every key refused on a branch that does not
//! read it, the flat config.toml of the previous release loads, and bad
//! values are refused naming their key.

use csam_data::DatasetSpec;
use csam_train::spec::keys::{Applies, Scope, ValueKind, KEYS};
use csam_train::spec::{BaseSpec, DataSpec, RunSpec, Schedule, SpecLayers, UpdateRule, ValSize};
use csam_train::train::ConfigError;

fn flat(pairs: &[(&str, toml::Value)]) -> toml::Table {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

fn build(pairs: &[(&str, toml::Value)]) -> Result<RunSpec, ConfigError> {
    let mut table = flat(pairs);
    table
        .entry("data")
        .or_insert_with(|| toml::Value::String("digits".into()));
    SpecLayers::new()
        .flags(table)?
        .build()
        .map(|(spec, _)| spec)
}

/// A value for `key` that differs from its default and passes validation.
fn sample_value(name: &str, kind: ValueKind) -> toml::Value {
    use toml::Value as V;
    match name {
        "data" => V::String("fashion-mnist".into()),
        "model" => V::String("mlp".into()),
        "loss" => V::String("flsd".into()),
        "mixing" => V::String("mit-l".into()),
        "head" => V::String("balcal".into()),
        "ensemble" => V::String("batch-ensemble".into()),
        "bayesian" => V::String("mean-field".into()),
        "mit_margin" => V::Float(0.25),
        "adafocal_gamma_max" => V::Float(10.0),
        "adafocal_gamma_min" => V::Float(-1.0),
        "base_optimizer" => V::String("sgd".into()),
        "schedule" => V::String("step".into()),
        "optimizer" => V::String("csam".into()),
        "sam_policy" => V::String("looksam".into()),
        "msam_direction" => V::String("ascent".into()),
        "best_metric" => V::String("ece".into()),
        "edges" => V::String("left-closed-with-one-bin".into()),
        "adaptive" => V::String("chunked".into()),
        "precision" => V::String("bf16".into()),
        "memory_format" => V::String("channels_last".into()),
        // Files the spec only checks for existence.
        "init" | "script" => V::String(env!("CARGO_MANIFEST_DIR").to_string() + "/Cargo.toml"),
        "val_size" => V::Float(0.2),
        "dropout" | "momentum" => V::Float(0.5),
        "lr" => V::Float(0.3),
        "min_lr" => V::Float(0.01),
        "m" => V::Integer(16),
        "epochs" => V::Integer(7),
        "warmup_epochs" => V::Integer(2),
        "step_size" => V::Integer(3),
        "device" => V::String("cpu".into()),
        "tensorboard" => V::Boolean(false),
        _ => match kind {
            ValueKind::Text => unreachable!("every text key is listed: {name}"),
            ValueKind::Count => V::Integer(3),
            ValueKind::Real => V::Float(0.25),
            ValueKind::CountOrFraction => V::Integer(100),
            ValueKind::Switch => V::Boolean(true),
            ValueKind::Counts => V::Array(vec![V::Integer(32), V::Integer(16)]),
        },
    }
}

/// The selector values under which `key` is read (and those under which
/// its selector is read, for a selector of a branch: `sam_policy`).
fn enabling(applies: Applies) -> Vec<(&'static str, toml::Value)> {
    match applies {
        Applies::Always => Vec::new(),
        Applies::When { selector, values } => {
            let mut pairs = KEYS
                .iter()
                .find(|k| k.name == selector)
                .map_or_else(Vec::new, |k| enabling(k.applies));
            pairs.push((selector, toml::Value::String(values.names()[0].into())));
            pairs
        }
    }
}

#[test]
fn every_key_round_trips_through_the_spec_and_its_toml() {
    for key in KEYS {
        let mut pairs = enabling(key.applies);
        if key.name == "nesterov" || key.name == "track_theory" {
            // Nesterov needs momentum (the default 0.9 has it); the theory
            // log needs SAM's point.
            pairs.push(("optimizer", toml::Value::String("sam".into())));
        }
        let value = sample_value(key.name, key.value);
        pairs.push((key.name, value.clone()));
        if key.name == "schedule" {
            pairs.push(("epochs", toml::Value::Integer(10)));
        }
        if pairs.iter().any(|(name, _)| *name == "bayesian") {
            // A posterior is regularised by its KL term alone.
            pairs.push(("weight_decay", toml::Value::Float(0.0)));
        }
        if key.name == "init_new_classifier" {
            // A fresh classifier over initial weights needs the weights.
            pairs.push(("init", sample_value("init", ValueKind::Text)));
        }
        let (spec, runtime) = SpecLayers::new()
            .flags(flat(&[("data", toml::Value::String("digits".into()))]))
            .unwrap()
            .flags(flat(&pairs))
            .unwrap()
            .build()
            .unwrap_or_else(|e| panic!("{}: {e}", key.name));
        spec.validate()
            .unwrap_or_else(|e| panic!("{}: {e}", key.name));
        match key.scope {
            Scope::Runtime => {
                let got = match key.name {
                    "device" => runtime.device.map(toml::Value::String),
                    "tensorboard" => Some(toml::Value::Boolean(runtime.tensorboard)),
                    "resident_data" => Some(toml::Value::Boolean(runtime.resident_data)),
                    "workers" => runtime.workers.map(|t| toml::Value::Integer(t as i64)),
                    "log_every_n_steps" => {
                        Some(toml::Value::Integer(runtime.log_every_n_steps as i64))
                    }
                    _ => runtime.threads.map(|t| toml::Value::Integer(t as i64)),
                };
                assert_eq!(got, Some(value), "{}", key.name);
                continue;
            }
            Scope::Run => {}
        }
        assert_eq!(
            spec.to_flat().get(key.name),
            Some(&value),
            "{} lands where it is read back",
            key.name
        );
        let text = spec.to_toml();
        assert!(text.starts_with("schema = 2\n"), "{text}");
        let again = RunSpec::from_saved_toml(&text, "round trip").unwrap();
        assert_eq!(again, spec, "{}: {text}", key.name);
        assert!(spec.differences(&again).is_empty());
    }
}

#[test]
fn every_key_on_a_branch_that_does_not_read_it_is_refused() {
    let mut checked = 0;
    for key in KEYS {
        let Applies::When { selector, values } = key.applies else {
            continue;
        };
        let other = KEYS
            .iter()
            .find(|k| k.name == selector)
            .map(|_| match selector {
                "optimizer" => ["sgd", "sam", "asam", "csam", "vasso", "bsam"].as_slice(),
                "schedule" => ["cosine", "step"].as_slice(),
                "base_optimizer" => ["sgd", "adamw"].as_slice(),
                "model" => ["mlp", "cnn", "resnet20"].as_slice(),
                "loss" => csam_nn::loss::TrainingLoss::NAMES,
                "mixing" => ["none", "mixup", "mit-l"].as_slice(),
                "head" => ["linear", "balcal"].as_slice(),
                "ensemble" => ["single", "batch-ensemble", "mimo"].as_slice(),
                "sam_policy" => [
                    "every", "rst", "looksam", "aesam", "esam", "subbatch", "msam",
                ]
                .as_slice(),
                "bayesian" => ["none", "mean-field", "rank1"].as_slice(),
                other => panic!("selector {other} has no branch list here"),
            })
            .unwrap();
        let selector_key = KEYS.iter().find(|k| k.name == selector).unwrap();
        for branch in other.iter().filter(|b| !values.contains(b)) {
            let mut pairs = enabling(selector_key.applies);
            pairs.extend([
                (selector, toml::Value::String(branch.to_string())),
                (key.name, sample_value(key.name, key.value)),
            ]);
            match build(&pairs) {
                Err(ConfigError::Inapplicable {
                    key: got,
                    selector: s,
                    chosen,
                    ..
                }) => {
                    assert_eq!((got, s, chosen.as_str()), (key.name, selector, *branch));
                    checked += 1;
                }
                other => panic!("{} with {selector} {branch}: {other:?}", key.name),
            }
        }
    }
    assert!(checked >= 20, "only {checked} refusals checked");
}

#[test]
fn the_flat_config_of_the_previous_release_loads() {
    let text = include_str!("fixtures/config-flat-v0.1.toml");
    let spec = RunSpec::from_saved_toml(text, "config-flat-v0.1.toml").unwrap();
    let mut expected = RunSpec::new(DataSpec {
        val_size: ValSize::Count(300),
        augment: false,
        ..DataSpec::new(DatasetSpec::Digits)
    });
    expected.epochs = 2;
    expected.seed = 3;
    expected.model.arch = "mlp".parse().unwrap();
    expected.model.mlp_hidden = Some(vec![64, 32]);
    expected.optim.lr = 0.05;
    expected.optim.rule = UpdateRule::Csam {
        rho: 0.1,
        gamma: 2.0,
        detach: true,
        m: Some(32),
        every: 2,
    };
    expected.optim.base = BaseSpec::Sgd {
        momentum: 0.9,
        nesterov: true,
    };
    assert_eq!(spec, expected);
    // The old file named eta (an ASAM key) and device/threads: dropped.
    assert!(spec.to_flat().get("eta").is_none());
}

#[test]
fn a_flag_switching_branch_drops_the_files_settings_of_the_old_branch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.toml");
    std::fs::write(
        &path,
        "data = \"digits\"\noptimizer = \"csam\"\ngamma = 2.0\nlr = 0.05\n",
    )
    .unwrap();
    let (spec, _) = SpecLayers::new()
        .file(&path)
        .unwrap()
        .flags(flat(&[("optimizer", "sam".into()), ("rho", 0.2.into())]))
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(spec.optim.lr, 0.05, "the file's other keys stay");
    assert_eq!(
        spec.optim.rule,
        UpdateRule::Sam {
            rho: 0.2,
            m: None,
            every: 1
        }
    );
    // The nested layout of a run's config.toml is a settings file too.
    std::fs::write(&path, spec.to_toml()).unwrap();
    let (again, _) = SpecLayers::new()
        .file(&path)
        .unwrap()
        .flags(flat(&[("lr", 0.01.into())]))
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(again.optim.lr, 0.01);
    assert_eq!(again.optim.rule, spec.optim.rule);
}

#[test]
fn a_nested_file_with_a_key_of_another_branch_is_refused() {
    let text =
        "schema = 2\n[data]\nsource = \"digits\"\n[optim.rule]\nkind = \"sam\"\ngamma = 1.0\n";
    let err = RunSpec::from_saved_toml(text, "x.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("gamma"), "{err}");
    let err = RunSpec::from_saved_toml("schema = 3\n", "x.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("schema = 3"), "{err}");
}

#[test]
fn bad_values_are_refused_naming_the_key() {
    let manifest = env!("CARGO_MANIFEST_DIR").to_string() + "/Cargo.toml";
    use toml::Value as V;
    let cases: Vec<(Vec<(&str, V)>, &str)> = vec![
        (vec![("lr", V::Float(0.0))], "lr"),
        (vec![("lr", V::Float(f64::NAN))], "lr"),
        (vec![("batch_size", V::Integer(0))], "batch_size"),
        (vec![("epochs", V::Integer(0))], "epochs"),
        (vec![("val_size", V::Integer(0))], "val_size"),
        (vec![("val_size", V::Float(1.5))], "val_size"),
        (vec![("dropout", V::Float(1.0))], "dropout"),
        (
            vec![("model", "vit-ti16".into()), ("drop_path", V::Float(1.0))],
            "drop_path",
        ),
        (
            vec![("model", "vit-b16".into()), ("drop_path", V::Float(-0.1))],
            "drop_path",
        ),
        (vec![("drop_path", V::Float(0.1))], "drop_path"),
        (
            vec![
                ("model", "pyramidnet272-a200".into()),
                ("shakedrop", V::Float(1.0)),
            ],
            "shakedrop",
        ),
        (
            vec![("model", "vit-s16".into()), ("shakedrop", V::Float(0.5))],
            "shakedrop",
        ),
        (
            vec![
                ("model", "mlp".into()),
                ("mlp_hidden", V::Array(vec![V::Integer(0)])),
            ],
            "mlp_hidden",
        ),
        (
            vec![("optimizer", "sam".into()), ("rho", V::Float(0.0))],
            "rho",
        ),
        (vec![("optimizer", "sam".into()), ("m", V::Integer(0))], "m"),
        (
            vec![("optimizer", "sam".into()), ("m", V::Integer(129))],
            "m",
        ),
        (
            vec![("optimizer", "sam".into()), ("sam_every", V::Integer(0))],
            "sam_every",
        ),
        (
            vec![("optimizer", "asam".into()), ("eta", V::Float(-1.0))],
            "eta",
        ),
        (
            vec![("optimizer", "csam".into()), ("gamma", V::Float(-0.5))],
            "gamma",
        ),
        (
            vec![("loss", "focal".into()), ("focal_gamma", V::Float(-1.0))],
            "focal_gamma",
        ),
        (
            vec![
                ("loss", "label-smoothing".into()),
                ("smoothing", V::Float(1.0)),
            ],
            "smoothing",
        ),
        (
            vec![
                ("loss", "label-smoothing".into()),
                ("smoothing", V::Float(-0.1)),
            ],
            "smoothing",
        ),
        (
            vec![("loss", "mbls".into()), ("margin", V::Float(0.0))],
            "margin",
        ),
        (
            vec![("loss", "mbls".into()), ("margin_weight", V::Float(-0.1))],
            "margin_weight",
        ),
        (
            vec![("loss", "acls".into()), ("margin", V::Float(-1.0))],
            "margin",
        ),
        (
            vec![("loss", "acls".into()), ("acls_pos_lambda", V::Float(-1.0))],
            "acls_pos_lambda",
        ),
        (
            vec![("loss", "acls".into()), ("acls_neg_lambda", V::Float(-1.0))],
            "acls_neg_lambda",
        ),
        (
            vec![("loss", "cpc".into()), ("cpc_bdc_weight", V::Float(-1.0))],
            "cpc_bdc_weight",
        ),
        (
            vec![("loss", "cpc".into()), ("cpc_bec_weight", V::Float(-1.0))],
            "cpc_bec_weight",
        ),
        (
            vec![("loss", "mmce".into()), ("mmce_lambda", V::Float(-2.0))],
            "mmce_lambda",
        ),
        (
            vec![("loss", "mdca".into()), ("mdca_beta", V::Float(-1.0))],
            "mdca_beta",
        ),
        (
            vec![("loss", "mdca".into()), ("focal_gamma", V::Float(-1.0))],
            "focal_gamma",
        ),
        (
            vec![
                ("loss", "adafocal".into()),
                ("adafocal_lambda", V::Float(0.0)),
            ],
            "adafocal_lambda",
        ),
        (
            vec![
                ("loss", "adafocal".into()),
                ("adafocal_bins", V::Integer(0)),
            ],
            "adafocal_bins",
        ),
        (
            vec![
                ("loss", "adafocal".into()),
                ("adafocal_switch", V::Float(-0.2)),
            ],
            "adafocal_switch",
        ),
        (
            vec![
                ("loss", "adafocal".into()),
                ("adafocal_gamma_min", V::Float(0.5)),
            ],
            "adafocal_gamma_min",
        ),
        (
            vec![
                ("loss", "adafocal".into()),
                ("adafocal_gamma_max", V::Float(0.1)),
            ],
            "adafocal_gamma_max",
        ),
        (
            vec![
                ("loss", "adafocal".into()),
                ("adafocal_initial_gamma", V::Float(30.0)),
            ],
            "adafocal_initial_gamma",
        ),
        (
            vec![("loss", "crl".into()), ("crl_weight", V::Float(-1.0))],
            "crl_weight",
        ),
        (
            vec![("loss", "crl".into()), ("mixing", "mixup".into())],
            "mixing",
        ),
        (
            vec![("mixing", "mixup".into()), ("mixup_alpha", V::Float(-0.5))],
            "mixup_alpha",
        ),
        (
            vec![("mixing", "mit-l".into()), ("mixup_alpha", V::Float(0.0))],
            "mixup_alpha",
        ),
        (
            vec![("mixing", "mit-l".into()), ("mit_margin", V::Float(1.0))],
            "mit_margin",
        ),
        (
            vec![("head", "balcal".into()), ("balcal_lambda", V::Float(1.5))],
            "balcal_lambda",
        ),
        (
            vec![("init_new_classifier", V::Boolean(true))],
            "init_new_classifier",
        ),
        (vec![("model", "torchscript".into())], "model"),
        (
            vec![("model", "torchscript:/no/such/model.pt".into())],
            "script",
        ),
        (
            vec![
                ("model", format!("torchscript:{manifest}").into()),
                ("init", manifest.clone().into()),
                ("init_new_classifier", V::Boolean(true)),
            ],
            "init_new_classifier",
        ),
        (
            vec![("head", "balcal".into()), ("balcal_delta", V::Float(0.0))],
            "balcal_delta",
        ),
        (
            vec![("head", "balcal".into()), ("mixing", "mixup".into())],
            "mixing",
        ),
        (
            vec![
                ("ensemble", "batch-ensemble".into()),
                ("mixing", "mixup".into()),
            ],
            "mixing",
        ),
        (
            vec![
                ("ensemble", "batch-ensemble".into()),
                ("head", "balcal".into()),
            ],
            "ensemble",
        ),
        (
            vec![
                ("ensemble", "batch-ensemble".into()),
                ("ensemble_size", V::Integer(0)),
            ],
            "ensemble_size",
        ),
        (
            vec![
                ("ensemble", "batch-ensemble".into()),
                ("random_sign_init", V::Float(1.5)),
            ],
            "random_sign_init",
        ),
        (vec![("bayesian", "mean-field".into())], "weight_decay"),
        (
            vec![
                ("bayesian", "mean-field".into()),
                ("weight_decay", V::Float(0.0)),
                ("mixing", "mixup".into()),
            ],
            "mixing",
        ),
        (
            vec![
                ("bayesian", "mean-field".into()),
                ("weight_decay", V::Float(0.0)),
                ("optimizer", "bsam".into()),
            ],
            "optimizer",
        ),
        (
            vec![
                ("bayesian", "mean-field".into()),
                ("ensemble", "batch-ensemble".into()),
            ],
            "bayesian",
        ),
        (
            vec![
                ("bayesian", "mean-field".into()),
                ("weight_decay", V::Float(0.0)),
                ("prior_std", V::Float(0.0)),
            ],
            "prior_std",
        ),
        (
            vec![
                ("bayesian", "mean-field".into()),
                ("weight_decay", V::Float(0.0)),
                ("posterior_samples", V::Integer(0)),
            ],
            "posterior_samples",
        ),
        (
            vec![
                ("ensemble", "mimo".into()),
                ("input_repetition", V::Float(1.5)),
            ],
            "input_repetition",
        ),
        (
            vec![
                ("ensemble", "mimo".into()),
                ("batch_repetitions", V::Integer(0)),
            ],
            "batch_repetitions",
        ),
        (
            vec![("ensemble", "mimo".into()), ("loss", "crl".into())],
            "ensemble",
        ),
        (
            vec![("ensemble", "mimo".into()), ("mixing", "mixup".into())],
            "mixing",
        ),
        (
            vec![
                ("mixing", "mixup".into()),
                ("optimizer", "sam".into()),
                ("track_theory", V::Boolean(true)),
            ],
            "track_theory",
        ),
        (
            vec![
                ("optimizer", "vasso".into()),
                ("vasso_theta", V::Float(0.0)),
            ],
            "vasso_theta",
        ),
        (
            vec![
                ("optimizer", "vasso".into()),
                ("vasso_theta", V::Float(1.5)),
            ],
            "vasso_theta",
        ),
        // bSAM: its own settings, and the settings of a base optimizer or of
        // the SAM family's step that it would ignore.
        (
            vec![("optimizer", "bsam".into()), ("rho", V::Float(0.0))],
            "rho",
        ),
        (
            vec![("optimizer", "bsam".into()), ("bsam_beta2", V::Float(1.0))],
            "bsam_beta2",
        ),
        (
            vec![
                ("optimizer", "bsam".into()),
                ("bsam_damping", V::Float(0.0)),
            ],
            "bsam_damping",
        ),
        (
            vec![
                ("optimizer", "bsam".into()),
                ("bsam_init_precision", V::Float(-1.0)),
            ],
            "bsam_init_precision",
        ),
        (
            vec![
                ("optimizer", "bsam".into()),
                ("bsam_data_factor", V::Float(0.0)),
            ],
            "bsam_data_factor",
        ),
        (
            vec![
                ("optimizer", "bsam".into()),
                ("base_optimizer", "adamw".into()),
            ],
            "base_optimizer",
        ),
        (
            vec![("optimizer", "bsam".into()), ("nesterov", V::Boolean(true))],
            "nesterov",
        ),
        (
            vec![("optimizer", "bsam".into()), ("clip", V::Float(1.0))],
            "clip",
        ),
        (
            vec![("optimizer", "bsam".into()), ("m", V::Integer(16))],
            "m",
        ),
        (
            vec![("optimizer", "bsam".into()), ("sam_every", V::Integer(2))],
            "sam_every",
        ),
        (
            vec![("optimizer", "bsam".into()), ("gamma", V::Float(1.0))],
            "gamma",
        ),
        (
            vec![
                ("optimizer", "bsam".into()),
                ("track_theory", V::Boolean(true)),
            ],
            "track_theory",
        ),
        (
            vec![("optimizer", "bsam".into()), ("momentum", V::Float(1.0))],
            "momentum",
        ),
        (vec![("momentum", V::Float(1.0))], "momentum"),
        (
            vec![("nesterov", V::Boolean(true)), ("momentum", V::Float(0.0))],
            "nesterov",
        ),
        (vec![("warmup_epochs", V::Integer(200))], "warmup_epochs"),
        (vec![("min_lr", V::Float(1.0))], "min_lr"),
        (
            vec![("schedule", "step".into()), ("step_size", V::Integer(0))],
            "step_size",
        ),
        (
            vec![("schedule", "step".into()), ("decay_factor", V::Float(2.0))],
            "decay_factor",
        ),
        (vec![("clip", V::Float(-1.0))], "clip"),
        (vec![("bins", V::Integer(0))], "bins"),
        // The efficient SAM policies: their own ranges, and the settings they replace.
        (
            vec![
                ("optimizer", "csam".into()),
                ("sam_policy", "rst".into()),
                ("rst_p", V::Float(1.5)),
            ],
            "rst_p",
        ),
        (
            vec![
                ("optimizer", "csam".into()),
                ("sam_policy", "rst".into()),
                ("rst_p_end", V::Float(-0.1)),
            ],
            "rst_p_end",
        ),
        (
            vec![
                ("optimizer", "csam".into()),
                ("sam_policy", "looksam".into()),
                ("looksam_k", V::Integer(0)),
            ],
            "looksam_k",
        ),
        (
            vec![
                ("optimizer", "csam".into()),
                ("sam_policy", "looksam".into()),
                ("looksam_alpha", V::Float(-1.0)),
            ],
            "looksam_alpha",
        ),
        (
            vec![
                ("optimizer", "csam".into()),
                ("sam_policy", "aesam".into()),
                ("aesam_delta", V::Float(1.0)),
            ],
            "aesam_delta",
        ),
        (
            vec![
                ("optimizer", "csam".into()),
                ("sam_policy", "aesam".into()),
                ("aesam_lambda1", V::Float(f64::NAN)),
            ],
            "aesam_lambda1",
        ),
        (
            vec![
                ("optimizer", "csam".into()),
                ("sam_policy", "looksam".into()),
                ("sam_every", V::Integer(2)),
            ],
            "sam_every",
        ),
        (
            vec![
                ("optimizer", "csam".into()),
                ("sam_policy", "esam".into()),
                ("esam_beta", V::Float(0.0)),
            ],
            "esam_beta",
        ),
        (
            vec![
                ("optimizer", "sam".into()),
                ("sam_policy", "esam".into()),
                ("esam_gamma", V::Float(1.5)),
            ],
            "esam_gamma",
        ),
        (
            vec![
                ("optimizer", "sam".into()),
                ("sam_policy", "esam".into()),
                ("mixing", "mixup".into()),
            ],
            "mixing",
        ),
        (
            vec![
                ("optimizer", "csam".into()),
                ("sam_policy", "esam".into()),
                ("m", V::Integer(16)),
            ],
            "m",
        ),
        (
            vec![
                ("optimizer", "csam".into()),
                ("sam_policy", "aesam".into()),
                ("m", V::Integer(16)),
            ],
            "m",
        ),
        (
            vec![("optimizer", "sgd".into()), ("sam_policy", "rst".into())],
            "sam_policy",
        ),
        (
            vec![
                ("optimizer", "sam".into()),
                ("track_theory", V::Boolean(true)),
                ("optimizer", "asam".into()),
            ],
            "track_theory",
        ),
    ];
    for (pairs, key) in cases {
        let result = build(&pairs).and_then(|spec| spec.validate().map(|_| spec));
        match result {
            Err(ConfigError::Invalid { key: got, .. }) => assert_eq!(got, key),
            Err(ConfigError::Inapplicable { key: got, .. }) => assert_eq!(got, key),
            other => panic!("{key}: expected a refusal, got {other:?}"),
        }
    }
}

#[test]
fn defaults_and_warnings() {
    let spec = build(&[]).unwrap();
    assert_eq!(spec.data.val_size, ValSize::Fraction(0.1));
    assert_eq!(spec.data.val_size.count(1442), 144);
    assert_eq!(spec.optim.schedule, Schedule::default());
    assert_eq!(spec.optim.rule, UpdateRule::Sgd);
    let err = SpecLayers::new().build().unwrap_err().to_string();
    assert!(err.contains("no data set given"), "{err}");
    let hot = build(&[("optimizer", "csam".into()), ("gamma", 3.0.into())]).unwrap();
    let warnings = hot.validate().unwrap();
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].0.contains("gamma = 3"));
    assert_eq!(
        build(&[("optimizer", "CSAM".into())])
            .unwrap()
            .optim
            .rule
            .csam_gradient_mode(),
        Some("differentiated")
    );
}

#[test]
fn regularisers_apply_to_their_models_and_stay_out_of_old_configs() {
    use csam_nn::model::ModelKind;
    // The key table's model lists are the registry's ViTs and PyramidNets.
    for (key, family) in [("drop_path", "vit-"), ("shakedrop", "pyramidnet")] {
        let Some(Applies::When { selector, values }) =
            KEYS.iter().find(|k| k.name == key).map(|k| k.applies)
        else {
            panic!("{key} applies to some models");
        };
        assert_eq!(selector, "model");
        let registered: Vec<&str> = ModelKind::all()
            .map(|kind| kind.name())
            .filter(|name| name.starts_with(family))
            .collect();
        assert_eq!(values.names(), registered, "{key}");
    }
    // Off by default, and then left out of config.toml, so a run written
    // before the keys existed loads and compares equal.
    let plain = build(&[]).unwrap();
    assert_eq!((plain.model.drop_path, plain.model.shakedrop), (0.0, 0.0));
    let text = plain.to_toml();
    assert!(
        !text.contains("drop_path") && !text.contains("shakedrop"),
        "{text}"
    );
    let on = build(&[
        ("model", "pyramidnet110-a48".into()),
        ("shakedrop", 0.5.into()),
    ])
    .unwrap();
    assert!(on
        .differences(&plain)
        .iter()
        .any(|d| d.contains("shakedrop")));
    assert_eq!(on.model.shakedrop, 0.5);
    // A nested config.toml bypasses the flat keys' branch check; validation
    // still refuses the rate on a model without the regulariser.
    let nested = "schema = 2\n[data]\nsource = \"digits\"\n[model]\narch = \"resnet20\"\n\
                  drop_path = 0.1\n";
    let spec = RunSpec::from_saved_toml(nested, "x.toml").unwrap();
    match spec.validate() {
        Err(ConfigError::Invalid { key, reason, .. }) => {
            assert_eq!(key, "drop_path");
            assert!(reason.contains("vit-ti16"), "{reason}");
        }
        other => panic!("drop_path on resnet20: {other:?}"),
    }
}

#[test]
fn the_split_seed_fixes_the_validation_split_and_stays_out_of_old_configs() {
    let data = DataSpec {
        val_size: ValSize::Count(200),
        ..DataSpec::new(DatasetSpec::Digits)
    };
    let shared = DataSpec {
        split_seed: Some(3),
        ..data.clone()
    };
    let val_images = |spec: &DataSpec, seed| spec.splits(seed).unwrap().val.images;
    // A run's own seed draws its split unless the split seed is given.
    assert_ne!(val_images(&data, 3), val_images(&data, 4));
    assert_eq!(val_images(&shared, 4), val_images(&data, 3));
    assert_eq!(val_images(&shared, 9), val_images(&shared, 4));
    let spec = RunSpec::new(data);
    assert!(!spec.to_toml().contains("split_seed"));
}

#[test]
fn batch_ensemble_applies_to_its_models_and_stays_out_of_old_configs() {
    use csam_nn::model::{Ensemble, ModelKind};
    // The key table's models are the registry's that build members.
    let Some(Applies::When { selector, values }) = KEYS
        .iter()
        .find(|k| k.name == "ensemble")
        .map(|k| k.applies)
    else {
        panic!("ensemble applies to some models");
    };
    assert_eq!(selector, "model");
    let registered: Vec<&str> = ModelKind::all()
        .filter(ModelKind::takes_members)
        .map(|kind| kind.name())
        .collect();
    assert_eq!(values.names(), registered);
    // One network by default, and in a config.toml written before the
    // table existed.
    let plain = build(&[]).unwrap();
    assert!(plain.model.ensemble.is_single());
    let text = plain.to_toml();
    assert!(
        text.contains("[model.ensemble]\nkind = \"single\""),
        "{text}"
    );
    let old = text.replace("[model.ensemble]\nkind = \"single\"\n", "");
    assert!(!old.contains("ensemble"), "{old}");
    assert_eq!(
        RunSpec::from_saved_toml(&old, "config.toml").unwrap(),
        plain
    );
    let on = build(&[
        ("ensemble", "batch-ensemble".into()),
        ("ensemble_size", 2.into()),
    ])
    .unwrap();
    let expected = Ensemble::BatchEnsemble {
        size: 2,
        random_sign_init: -0.5,
    };
    assert_eq!(on.model.ensemble, expected);
    assert!(on
        .differences(&plain)
        .iter()
        .any(|d| d.contains("ensemble")));
    let saved = RunSpec::from_saved_toml(&on.to_toml(), "config.toml").unwrap();
    assert_eq!(saved, on);
    let mimo = build(&[("ensemble", "mimo".into()), ("ensemble_size", 2.into())]).unwrap();
    let expected = Ensemble::Mimo {
        size: 2,
        input_repetition: 0.0,
        batch_repetitions: 4,
    };
    assert_eq!(mimo.model.ensemble, expected);
    let saved = RunSpec::from_saved_toml(&mimo.to_toml(), "config.toml").unwrap();
    assert_eq!(saved, mimo);
    // Refused by flag on a model without members, and in a nested
    // config.toml, which bypasses the flat keys' branch check.
    let flags = build(&[
        ("model", "vit-ti16".into()),
        ("ensemble", "batch-ensemble".into()),
    ]);
    assert!(
        matches!(flags, Err(ConfigError::Inapplicable { .. })),
        "{flags:?}"
    );
    let nested = "schema = 2\n[data]\nsource = \"digits\"\n[model]\narch = \"wrn-16-4\"\n\
                  [model.ensemble]\nkind = \"batch-ensemble\"\n";
    let spec = RunSpec::from_saved_toml(nested, "x.toml").unwrap();
    match spec.validate() {
        Err(ConfigError::Invalid { key, reason, .. }) => {
            assert_eq!(key, "ensemble");
            assert!(
                reason.contains("resnet110") && reason.contains("wrn-16-4"),
                "{reason}"
            );
        }
        other => panic!("batch-ensemble on wrn-16-4: {other:?}"),
    }
}

#[test]
fn channels_last_applies_to_the_convolutional_models_and_stays_out_of_old_configs() {
    use csam_nn::model::memory_format::MemoryFormat;
    use csam_nn::model::ModelKind;
    // The key table's models are the registry's convolutional ones.
    let Some(Applies::When { selector, values }) = KEYS
        .iter()
        .find(|k| k.name == "memory_format")
        .map(|k| k.applies)
    else {
        panic!("memory_format applies to some models");
    };
    assert_eq!(selector, "model");
    let registered: Vec<&str> = ModelKind::all()
        .filter(ModelKind::is_convolutional)
        .map(|kind| kind.name())
        .collect();
    assert_eq!(values.names(), registered);
    // Contiguous by default, and left out of config.toml, so a run written
    // before the key existed loads and compares equal.
    let plain = build(&[("model", "resnet20".into())]).unwrap();
    assert_eq!(plain.model.memory_format, MemoryFormat::Contiguous);
    assert!(!plain.to_toml().contains("memory_format"));
    let on = build(&[
        ("model", "resnet20".into()),
        ("memory_format", "channels_last".into()),
    ])
    .unwrap();
    on.validate().unwrap();
    assert_eq!(on.model.memory_format, MemoryFormat::ChannelsLast);
    assert!(on
        .differences(&plain)
        .iter()
        .any(|d| d.contains("memory_format")));
    let saved = RunSpec::from_saved_toml(&on.to_toml(), "config.toml").unwrap();
    assert_eq!(saved, on);
    // Refused by flag on a model without convolutions, and in a nested
    // config.toml, which bypasses the flat keys' branch check; an unknown
    // name is refused naming both formats.
    let flags = build(&[
        ("model", "mlp".into()),
        ("memory_format", "channels_last".into()),
    ]);
    assert!(
        matches!(flags, Err(ConfigError::Inapplicable { .. })),
        "{flags:?}"
    );
    let nested = "schema = 2\n[data]\nsource = \"digits\"\n[model]\narch = \"vit-ti16\"\n\
                  memory_format = \"channels_last\"\n";
    let spec = RunSpec::from_saved_toml(nested, "x.toml").unwrap();
    match spec.validate() {
        Err(ConfigError::Invalid { key, reason, .. }) => {
            assert_eq!(key, "memory_format");
            assert!(
                reason.contains("applies only to cnn, resnet20")
                    && reason.ends_with("not vit-ti16"),
                "{reason}"
            );
        }
        other => panic!("channels_last on vit-ti16: {other:?}"),
    }
    let unknown = build(&[("model", "cnn".into()), ("memory_format", "nhwc".into())]);
    let message = unknown.unwrap_err().to_string();
    assert!(message.contains("channels_last"), "{message}");
}

#[test]
fn sync_batch_norm_is_part_of_the_run_for_the_batch_norm_models_only() {
    // Off by default and left out of config.toml, so a run written before
    // the key existed loads and compares equal.
    let plain = build(&[("model", "resnet20".into())]).unwrap();
    assert!(!plain.model.sync_batch_norm);
    assert!(!plain.to_toml().contains("sync_batch_norm"));
    let on = build(&[
        ("model", "resnet20".into()),
        ("sync_batch_norm", true.into()),
    ])
    .unwrap();
    on.validate().unwrap();
    assert_eq!(
        KEYS.iter()
            .find(|k| k.name == "sync_batch_norm")
            .map(|k| k.scope),
        Some(Scope::Run)
    );
    // A resume with the other value is refused: the specs differ by it.
    assert!(on
        .differences(&plain)
        .iter()
        .any(|d| d.contains("sync_batch_norm")));
    let saved = RunSpec::from_saved_toml(&on.to_toml(), "config.toml").unwrap();
    assert_eq!(saved, on);
    // Refused on a model without BatchNorm, by flag and in a nested config.
    let flags = build(&[("model", "mlp".into()), ("sync_batch_norm", true.into())]);
    assert!(
        matches!(flags, Err(ConfigError::Inapplicable { .. })),
        "{flags:?}"
    );
    let nested = "schema = 2\n[data]\nsource = \"digits\"\n[model]\narch = \"vit-ti16\"\n\
                  sync_batch_norm = true\n";
    let spec = RunSpec::from_saved_toml(nested, "x.toml").unwrap();
    match spec.validate() {
        Err(ConfigError::Invalid { key, reason, .. }) => {
            assert_eq!(key, "sync_batch_norm");
            assert!(reason.ends_with("not vit-ti16"), "{reason}");
        }
        other => panic!("sync_batch_norm on vit-ti16: {other:?}"),
    }
}

/// Keys of one branch that are easy to swap reach their own fields: ACLS's
/// two weights, ESAM's two shares, AE-SAM's two threshold factors. (What
/// each field does is held to the authors' code by the losses' and
/// policies' own twins.)
#[test]
fn paired_keys_reach_their_own_fields() {
    use csam_nn::loss::{Acls, TrainingLoss};
    use csam_nn::optim::{AeSam, Esam, SamPolicy};
    let acls = build(&[
        ("loss", "acls".into()),
        ("acls_pos_lambda", 0.7.into()),
        ("acls_neg_lambda", 0.3.into()),
    ])
    .unwrap();
    let TrainingLoss::Acls(Acls {
        pos_lambda,
        neg_lambda,
        ..
    }) = acls.loss
    else {
        panic!("acls: {:?}", acls.loss)
    };
    assert_eq!((pos_lambda, neg_lambda), (0.7, 0.3));
    let esam = build(&[
        ("optimizer", "sam".into()),
        ("sam_policy", "esam".into()),
        ("esam_beta", 0.7.into()),
        ("esam_gamma", 0.3.into()),
    ])
    .unwrap();
    let SamPolicy::Esam(Esam { beta, gamma, .. }) = esam.optim.policy else {
        panic!("esam: {:?}", esam.optim.policy)
    };
    assert_eq!((beta, gamma), (0.7, 0.3));
    let aesam = build(&[
        ("optimizer", "sam".into()),
        ("sam_policy", "aesam".into()),
        ("aesam_lambda1", (-0.5).into()),
        ("aesam_lambda2", 0.5.into()),
    ])
    .unwrap();
    let SamPolicy::AeSam(AeSam {
        lambda1, lambda2, ..
    }) = aesam.optim.policy
    else {
        panic!("aesam: {:?}", aesam.optim.policy)
    };
    assert_eq!((lambda1, lambda2), (-0.5, 0.5));
}

/// A written `[model]` table may name a TorchScript module in the model's
/// name, as the command line does; it reads as the architecture and its
/// file, and naming the file twice is refused by key.
#[test]
fn a_torchscript_file_in_the_model_name_of_a_nested_config_is_its_script() {
    let nested =
        |model: &str| format!("schema = 2\n[data]\nsource = \"digits\"\n[model]\n{model}\n");
    let spec =
        RunSpec::from_saved_toml(&nested("arch = \"torchscript:nets/a.pt\""), "x.toml").unwrap();
    assert_eq!(spec.model.arch.name(), "torchscript");
    assert_eq!(spec.model.script, Some("nets/a.pt".into()));
    let twice = nested("arch = \"torchscript:nets/a.pt\"\nscript = \"nets/b.pt\"");
    match RunSpec::from_saved_toml(&twice, "x.toml") {
        Err(ConfigError::Invalid { key, reason, .. }) => {
            assert_eq!(key, "model");
            assert!(reason.contains("script names another"), "{reason}");
        }
        other => panic!("the file named twice: {other:?}"),
    }
    // Without the prefix nothing is split.
    let plain = RunSpec::from_saved_toml(&nested("arch = \"mlp\""), "x.toml").unwrap();
    assert_eq!((plain.model.arch.name(), plain.model.script), ("mlp", None));
}
