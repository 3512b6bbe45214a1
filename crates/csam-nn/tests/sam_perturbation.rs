//! The perturbation rules on hand-computed cases (docs/conventions.md, "The
//! SAM step").

use csam_nn::optim::{
    AeSam, Horizon, LookSam, Perturbation, Rst, SamConfig, SamPolicy, SamStep, SecondLoss,
};
use tch::{nn, Tensor};

fn flat(values: &[f64]) -> Tensor {
    Tensor::from_slice(values)
}

fn to_vec(t: &Tensor) -> Vec<f64> {
    Vec::try_from(t).unwrap()
}

/// Float64 on 3-vectors with entries <= 4: a handful of roundings, ~1e-15;
/// the callers' 1e-12 leaves 1000x (and covers the 1e-12 in the denominator).
fn assert_all_close(got: &[f64], expected: &[f64], tol: f64) {
    assert_eq!(got.len(), expected.len());
    for (g, e) in got.iter().zip(expected) {
        assert!((g - e).abs() < tol, "{got:?} vs {expected:?}");
    }
}

#[test]
fn sam_uses_the_global_norm() {
    // Weights (1, -1, 2), g = (3, 0, 4): ||g|| = 5, e = rho g / (5 + 1e-12).
    let (tilde, norm) = Perturbation::Sam.perturb(
        &flat(&[1.0, -1.0, 2.0]),
        &flat(&[3.0, 0.0, 4.0]),
        0.5,
        &mut None,
        None,
    );
    // 9 + 0 + 16 = 25 and sqrt(25) = 5 are exact in float64: 1e-15 is slack.
    assert!((norm.double_value(&[]) - 5.0).abs() < 1e-15);
    assert_all_close(&to_vec(&tilde), &[1.3, -1.0, 2.4], 1e-12);
}

#[test]
fn asam_scales_by_t_squared_over_the_norm_of_t_g() {
    // w = (1, -2, 0), g = (3, 1, 2), eta = 0.01, rho = 0.5.
    // T = |w| + eta = (1.01, 2.01, 0.01); T g = (3.03, 2.01, 0.02);
    // ||T g|| = sqrt(9.1809 + 4.0401 + 0.0004) = sqrt(13.2214);
    // e = rho T^2 g / ||T g|| = 0.5 (3.0603, 4.0401, 0.0002) / sqrt(13.2214).
    let rule = Perturbation::Asam { eta: 0.01 };
    let (tilde, norm) = rule.perturb(
        &flat(&[1.0, -2.0, 0.0]),
        &flat(&[3.0, 1.0, 2.0]),
        0.5,
        &mut None,
        None,
    );
    let denom = 13.2214f64.sqrt();
    let expected = [
        1.0 + 0.5 * 3.0603 / denom,
        -2.0 + 0.5 * 4.0401 / denom,
        0.5 * 0.0002 / denom,
    ];
    assert_all_close(&to_vec(&tilde), &expected, 1e-12);
    // The reported norm is ||g||, not ||T g||: sqrt(9 + 1 + 4).
    // sqrt(14) on both sides, each correctly rounded from an exact 14: <= 1 ulp.
    assert!((norm.double_value(&[]) - 14f64.sqrt()).abs() < 1e-12);
}

#[test]
fn asam_leaves_entries_outside_weights_unscaled() {
    // As above, but the last entry is a bias: T = (1.01, 2.01, 1);
    // T g = (3.03, 2.01, 2); ||T g|| = sqrt(9.1809 + 4.0401 + 4) = sqrt(17.221);
    // e = rho (T^2 g) / ||T g|| = 0.5 (3.0603, 4.0401, 2) / sqrt(17.221).
    let names = ["fc.weight".to_string(), "fc.bias".to_string()];
    let shapes = [
        Tensor::zeros([2], tch::kind::FLOAT_CPU),
        Tensor::zeros([1], tch::kind::FLOAT_CPU),
    ];
    let scaled = csam_nn::optim::weight_entries(&names, &shapes, tch::Device::Cpu).unwrap();
    assert_eq!(Vec::<bool>::try_from(&scaled).unwrap(), [true, true, false]);
    let rule = Perturbation::Asam { eta: 0.01 };
    let (tilde, _) = rule.perturb(
        &flat(&[1.0, -2.0, 0.0]),
        &flat(&[3.0, 1.0, 2.0]),
        0.5,
        &mut None,
        Some(&scaled),
    );
    let denom = 17.221f64.sqrt();
    let expected = [
        1.0 + 0.5 * 3.0603 / denom,
        -2.0 + 0.5 * 4.0401 / denom,
        0.5 * 2.0 / denom,
    ];
    assert_all_close(&to_vec(&tilde), &expected, 1e-12);
}

#[test]
fn zero_gradient_gives_zero_perturbation_not_nan() {
    for rule in [Perturbation::Sam, Perturbation::Asam { eta: 0.0 }] {
        let (tilde, norm) = rule.perturb(
            &flat(&[1.0, 2.0]),
            &flat(&[0.0, 0.0]),
            0.05,
            &mut None,
            None,
        );
        assert_eq!(to_vec(&tilde), [1.0, 2.0], "{rule:?}");
        assert_eq!(norm.double_value(&[]), 0.0);
    }
}

/// SAM under `policy` over a run of 100 steps.
fn policy(policy: SamPolicy) -> SamConfig {
    SamConfig {
        policy,
        horizon: Horizon {
            seed: 0,
            total_steps: 100,
        },
        ..SamConfig::default()
    }
}

#[test]
fn invalid_sam_settings_are_errors() {
    let vs = nn::VarStore::new(tch::Device::Cpu);
    let bad = [
        SamConfig {
            rho: -0.1,
            ..SamConfig::default()
        },
        SamConfig {
            rho: f64::NAN,
            ..SamConfig::default()
        },
        SamConfig {
            m: Some(0),
            ..SamConfig::default()
        },
        SamConfig {
            sam_every: 0,
            ..SamConfig::default()
        },
        SamConfig {
            clip_grad_norm: Some(0.0),
            ..SamConfig::default()
        },
        SamConfig {
            perturbation: Perturbation::Asam { eta: -1.0 },
            ..SamConfig::default()
        },
        SamConfig {
            second_loss: SecondLoss::Csam {
                gamma: -1.0,
                detach: false,
            },
            ..SamConfig::default()
        },
        // The efficient policies: their ranges, the run's length they
        // schedule over, and the settings they replace.
        policy(SamPolicy::Rst(Rst {
            p: 1.5,
            p_end: None,
        })),
        policy(SamPolicy::Rst(Rst {
            p: 0.5,
            p_end: Some(-0.1),
        })),
        policy(SamPolicy::LookSam(LookSam { k: 0, alpha: 0.7 })),
        policy(SamPolicy::LookSam(LookSam {
            k: 5,
            alpha: f64::NAN,
        })),
        policy(SamPolicy::AeSam(AeSam {
            delta: 1.0,
            ..AeSam::default()
        })),
        SamConfig {
            horizon: Horizon::default(),
            ..policy(SamPolicy::AeSam(AeSam::default()))
        },
        SamConfig {
            sam_every: 2,
            ..policy(SamPolicy::LookSam(LookSam::default()))
        },
        SamConfig {
            m: Some(4),
            ..policy(SamPolicy::AeSam(AeSam::default()))
        },
    ];
    for config in bad {
        assert!(SamStep::new(config.clone(), &vs).is_err(), "{config:?}");
    }
    for good in SamPolicy::all() {
        assert!(SamStep::new(policy(good), &vs).is_ok(), "{good:?}");
    }
    // The paper sweeps gamma up to 3: above 2 warns but is a valid setting.
    let steep = SamConfig {
        second_loss: SecondLoss::Csam {
            gamma: 3.0,
            detach: false,
        },
        ..SamConfig::default()
    };
    assert!(SamStep::new(steep, &vs).is_ok());
}

#[test]
fn config_serialises_with_readable_tags() {
    let config = SamConfig {
        perturbation: Perturbation::Asam { eta: 0.01 },
        second_loss: SecondLoss::Csam {
            gamma: 1.0,
            detach: false,
        },
        ..SamConfig::default()
    };
    let json = serde_json::to_string(&config).unwrap();
    assert!(
        json.contains(r#""rule":"asam""#) && json.contains(r#""loss":"csam""#),
        "{json}"
    );
    assert_eq!(serde_json::from_str::<SamConfig>(&json).unwrap(), config);
}
