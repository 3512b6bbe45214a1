//! Output shapes, the registry and parameter counts of the architectures.

use csam_nn::model::{
    build_model, build_model_with, InputShape, Mode, ModelError, ModelKind, ModelSpec,
};
use tch::{nn, nn::ModuleT, Device, Kind, Tensor};

fn shape(channels: i64, height: i64, width: i64) -> InputShape {
    InputShape {
        channels,
        height,
        width,
    }
}

fn n_parameters(vs: &nn::VarStore) -> i64 {
    vs.trainable_variables()
        .iter()
        .map(|t| t.numel() as i64)
        .sum()
}

#[test]
fn registry_parses_every_documented_name() {
    let names: Vec<&str> = ModelKind::all().map(|k| k.name()).collect();
    assert_eq!(
        names,
        [
            "mlp",
            "cnn",
            "resnet20",
            "resnet32",
            "resnet44",
            "resnet56",
            "resnet110",
            "resnet18",
            "resnet34",
            "resnet50",
            "resnet18-cifar",
            "resnet34-cifar",
            "resnet50-cifar",
            "pyramidnet110-a48",
            "pyramidnet110-a270",
            "pyramidnet272-a200",
            "vit-ti16",
            "vit-s16",
            "vit-s32",
            "vit-b16",
            "wrn-16-4",
            "wrn-16-8",
            "wrn-28-10",
            "wrn-40-2",
            "torchscript"
        ]
    );
    for name in names {
        let kind: ModelKind = name.parse().unwrap();
        assert_eq!(kind.to_string(), name);
        let json = serde_json::to_string(&kind).unwrap();
        assert_eq!(serde_json::from_str::<ModelKind>(&json).unwrap(), kind);
    }
    assert_eq!("ResNet56".parse::<ModelKind>().unwrap().name(), "resnet56");
    let err = "resnet19".parse::<ModelKind>().unwrap_err();
    assert!(matches!(err, ModelError::UnknownKind { .. }));
    assert!(err.to_string().contains("resnet110"), "{err}");
}

fn assert_logits_shape(kind: ModelKind, input: InputShape) {
    tch::set_num_threads(1); // tiny tensors: threads only contend
    let vs = nn::VarStore::new(Device::Cpu);
    let model = build_model(kind, &vs.root(), input, 7).unwrap();
    let xs = Tensor::randn(
        [3, input.channels, input.height, input.width],
        (Kind::Float, Device::Cpu),
    );
    for train in [true, false] {
        let logits = tch::no_grad(|| model.forward_t(&xs, train));
        assert_eq!(logits.size(), [3, 7], "{kind} {input:?} train={train}");
        assert!(
            logits.isfinite().all().int64_value(&[]) == 1,
            "{kind} {input:?}"
        );
    }
}

#[test]
fn every_model_maps_1_and_3_channel_inputs_to_logits() {
    // The deepest and the widest build in their own tests, the ViTs (which
    // need images of at least a patch) in theirs, a TorchScript module (which
    // needs its file) in tests/torchscript_torch.rs.
    let big = [
        "torchscript",
        "vit-ti16",
        "vit-s16",
        "vit-s32",
        "vit-b16",
        "resnet110",
        "wrn-16-8",
        "wrn-28-10",
        "resnet34",
        "resnet50",
        "resnet34-cifar",
    ];
    for kind in ModelKind::all().filter(|k| !big.contains(&k.name())) {
        for input in [shape(1, 8, 8), shape(3, 7, 5)] {
            assert_logits_shape(kind, input);
        }
    }
}

#[test]
fn models_accept_any_spatial_size() {
    for name in ["mlp", "cnn", "resnet20", "wrn-16-4", "resnet18"] {
        for input in [
            shape(1, 1, 1),
            shape(3, 12, 12),
            shape(1, 28, 28),
            shape(3, 2, 9),
        ] {
            assert_logits_shape(name.parse().unwrap(), input);
        }
    }
}

#[test]
fn resnet110_builds_and_runs() {
    tch::set_num_threads(1); // tiny tensors: threads only contend
    let vs = nn::VarStore::new(Device::Cpu);
    let kind = "resnet110".parse().unwrap();
    let model = build_model(kind, &vs.root(), shape(3, 8, 8), 100).unwrap();
    let xs = Tensor::randn([2, 3, 8, 8], (Kind::Float, Device::Cpu));
    assert_eq!(
        tch::no_grad(|| model.forward_t(&xs, false)).size(),
        [2, 100]
    );
    // 54 blocks of 2 convolutions + the stem convolution: 109 convolutions.
    let convs = vs.variables().keys().filter(|k| k.contains("conv")).count();
    assert_eq!(convs, 109);
}

#[test]
fn resnet20_has_the_option_a_parameter_count() {
    // By hand: stem 3*16*9 + 2*16; stage 1: 3 * (2 * 16*16*9 + 4*16);
    // stage 2: 16*32*9 + 32*32*9 + 4*32 + 2 * (2 * 32*32*9 + 4*32);
    // stage 3: 32*64*9 + 64*64*9 + 4*64 + 2 * (2 * 64*64*9 + 4*64); fc 64*10 + 10.
    let vs = nn::VarStore::new(Device::Cpu);
    build_model(
        "resnet20".parse().unwrap(),
        &vs.root(),
        shape(3, 32, 32),
        10,
    )
    .unwrap();
    assert_eq!(n_parameters(&vs), 269_722);
}

#[test]
fn mlp_keys_follow_the_sequential_twin() {
    let keys = |dropout: f64| {
        let vs = nn::VarStore::new(Device::Cpu);
        let spec = ModelSpec {
            mlp_hidden: Some(vec![5, 4]),
            dropout,
            ..ModelSpec::of("mlp".parse().unwrap())
        };
        build_model_with(&spec, &vs.root(), shape(1, 2, 3), 3).unwrap();
        let mut keys: Vec<String> = vs.variables().into_keys().collect();
        keys.sort();
        keys
    };
    let plain = [
        "1.bias", "1.weight", "3.bias", "3.weight", "5.bias", "5.weight",
    ];
    assert_eq!(keys(0.0), plain);
    let with_dropout = [
        "1.bias", "1.weight", "4.bias", "4.weight", "7.bias", "7.weight",
    ];
    assert_eq!(keys(0.3), with_dropout);
    // MLP weight shapes: d_in = C*H*W = 6.
    let vs = nn::VarStore::new(Device::Cpu);
    build_model("mlp".parse().unwrap(), &vs.root(), shape(1, 2, 3), 3).unwrap();
    assert_eq!(vs.variables()["1.weight"].size(), [256, 6]);
    assert_eq!(vs.variables()["5.weight"].size(), [3, 256]);
}

#[test]
fn models_follow_the_store_kind() {
    let mut vs = nn::VarStore::new(Device::Cpu);
    let model = build_model("cnn".parse().unwrap(), &vs.root(), shape(1, 6, 6), 3).unwrap();
    vs.double();
    let xs = Tensor::randn([2, 1, 6, 6], (Kind::Double, Device::Cpu));
    assert_eq!(model.forward_t(&xs, true).kind(), Kind::Double);
}

#[test]
fn dropout_modes() {
    tch::set_num_threads(1); // tiny tensors: threads only contend
                             // Dropout on the pooled features (ResNet) and inside the blocks (WRN).
    for (kind, buffer) in [
        ("resnet20", "bn1.running_mean"),
        ("wrn-16-4", "block1.layer.0.bn1.running_mean"),
    ] {
        let vs = nn::VarStore::new(Device::Cpu);
        let spec = ModelSpec {
            dropout: 0.5,
            ..ModelSpec::of(kind.parse().unwrap())
        };
        let model = build_model_with(&spec, &vs.root(), shape(3, 8, 8), 4).unwrap();
        let xs = Tensor::randn([4, 3, 8, 8], (Kind::Float, Device::Cpu));
        let run = |mode| tch::no_grad(|| model.forward_mode(&xs, mode));
        assert!(
            run(Mode::Eval).equal(&run(Mode::Eval)),
            "{kind}: eval must be deterministic"
        );
        assert!(
            !run(Mode::McDropout).equal(&run(Mode::McDropout)),
            "{kind}: MC-Dropout must sample"
        );
        // MC-Dropout keeps BatchNorm in eval mode: running statistics do not move.
        let before = vs.variables()[buffer].copy();
        let _ = run(Mode::McDropout);
        assert!(vs.variables()[buffer].equal(&before), "{kind}");
        let _ = run(Mode::Train);
        assert!(!vs.variables()[buffer].equal(&before), "{kind}");
    }
}

#[test]
fn invalid_configurations_are_errors() {
    let vs = nn::VarStore::new(Device::Cpu);
    let mlp = ModelSpec::of("mlp".parse().unwrap());
    let bad = |input, n, spec: ModelSpec| build_model_with(&spec, &vs.root(), input, n).is_err();
    assert!(!bad(shape(1, 4, 4), 3, mlp.clone()));
    assert!(bad(shape(0, 4, 4), 3, mlp.clone()));
    assert!(bad(shape(1, 4, 4), 1, mlp.clone()));
    let dropout = ModelSpec {
        dropout: 1.0,
        ..mlp.clone()
    };
    assert!(bad(shape(1, 4, 4), 3, dropout));
    let hidden = ModelSpec {
        mlp_hidden: Some(vec![8, 0]),
        ..mlp
    };
    assert!(bad(shape(1, 4, 4), 3, hidden));
}

#[test]
fn inputs_that_do_not_fit_are_errors_not_panics() {
    let vs = nn::VarStore::new(Device::Cpu);
    let mlp = build_model("mlp".parse().unwrap(), &vs.root(), shape(1, 4, 4), 3).unwrap();
    let cnn = build_model(
        "cnn".parse().unwrap(),
        &(vs.root() / "c"),
        shape(3, 4, 4),
        3,
    )
    .unwrap();
    let x = |dims: &[i64]| Tensor::zeros(dims, (Kind::Float, Device::Cpu));
    assert!(mlp.try_forward(&x(&[2, 1, 4, 4]), Mode::Eval).is_ok());
    for bad in [&[2, 1, 4, 5][..], &[2, 3, 4, 4], &[2, 16], &[0, 1, 4, 4]] {
        let err = mlp.try_forward(&x(bad), Mode::Eval).unwrap_err();
        assert!(matches!(err, ModelError::Input(_)), "{bad:?}");
        assert!(err.to_string().contains("[B, 1, 4, 4]"), "{err}");
    }
    // Convolutional nets take any spatial size but need their channel count.
    assert!(cnn.check_input(&x(&[2, 3, 9, 2])).is_ok());
    assert!(cnn.check_input(&x(&[2, 1, 4, 4])).is_err());
    assert!(ModelKind::all().all(|k| !k.summary().is_empty()));
}

#[test]
fn vits_take_the_image_size_they_were_built_for_and_refuse_smaller_than_a_patch() {
    tch::set_num_threads(1); // tiny tensors: threads only contend
    let vit: ModelKind = "vit-ti16".parse().unwrap();
    for input in [shape(1, 16, 16), shape(3, 33, 17)] {
        assert_logits_shape(vit, input);
    }
    let vs = nn::VarStore::new(Device::Cpu);
    let model = build_model(vit, &vs.root(), shape(3, 32, 32), 5).unwrap();
    let other = Tensor::zeros([2, 3, 48, 48], (Kind::Float, Device::Cpu));
    let err = model.try_forward(&other, Mode::Eval).unwrap_err();
    assert!(err.to_string().contains("[B, 3, 32, 32]"), "{err}");
    let small = build_model(vit, &(vs.root() / "small"), shape(3, 8, 12), 5).unwrap_err();
    assert!(
        matches!(small, ModelError::InvalidConfig(ref m) if m.contains("16x16 patches")),
        "{small}"
    );
}
