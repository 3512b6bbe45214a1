//! Mean-field VI (Flipout) end to end through the binary on the bundled
//! digits with an MLP: `csam train --bayesian mean-field` with CSAM writes a
//! run whose config holds the posterior and whose predictions are
//! probabilities; `csam compare --methods vi` trains it without weight
//! decay; the refusals are one line.

mod support;

use support::probabilities::{read_logits, softmax};
use support::{assert_one_line_error, csam, text, DIGITS_MLP};

#[test]
fn a_vi_run_trains_with_csam_and_compare_trains_vi_without_weight_decay() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("vi");
    let trained = csam(
        &[
            &["train", "--epochs", "2", "--optimizer", "csam"][..],
            &["--bayesian", "mean-field", "--weight-decay", "0"],
            &["--posterior-samples", "3", "--kl-annealing-epochs", "1"],
            &["--out", run.to_str().unwrap()],
            DIGITS_MLP,
        ]
        .concat(),
    );
    assert!(trained.status.success(), "{}", text(&trained));
    let config = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(
        config.contains(
            "[model.bayesian]\nkind = \"mean-field\"\nprior_std = 1.0\ntied_prior_mean = false\n\
             stddev_init = 0.04858735157374206\nsamples = 3"
        ),
        "{config}"
    );
    let probabilities = softmax(read_logits(&run.join("test_logits.npy")));
    assert!(probabilities.iter().all(|p| p.is_finite()));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    let accuracy = summary["test"]["accuracy"].as_f64().unwrap();
    // A network that learned nothing scores 0.10 +- 0.016 (one standard error
    // on the 355 test digits): 0.2 is 6 standard errors above chance.
    assert!(accuracy > 0.2, "above chance (0.1): {accuracy}");

    let out = dir.path().join("cmp");
    let compared = csam(
        &[
            &[
                "compare",
                "--epochs",
                "1",
                "--seeds",
                "0",
                "--methods",
                "vi",
            ][..],
            &["--out", out.to_str().unwrap()],
            DIGITS_MLP,
        ]
        .concat(),
    );
    assert!(compared.status.success(), "{}", text(&compared));
    let config = std::fs::read_to_string(out.join("runs/vi-seed0/config.toml")).unwrap();
    // uncertainty-baselines' variational_inference.py, its annealing over
    // 200 of 250 epochs scaled to one epoch (at least 1).
    assert!(
        config.contains(
            "kind = \"mean-field\"\nprior_std = 0.1\ntied_prior_mean = true\n\
             stddev_init = 0.001\nsamples = 5\nkl_annealing_epochs = 1\n"
        ),
        "{config}"
    );
    assert!(config.contains("weight_decay = 0.0"), "{config}");
}

#[test]
fn refusals_are_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("refused");
    let train = |extra: &[&str]| {
        csam(
            &[
                &["train", "--epochs", "1", "--out", out.to_str().unwrap()][..],
                extra,
                DIGITS_MLP,
            ]
            .concat(),
        )
    };
    // The default weight decay would also shrink rho.
    assert_one_line_error(
        &train(&["--bayesian", "mean-field"]),
        &["weight_decay", "rho"],
    );
    assert_one_line_error(
        &train(&[
            "--bayesian",
            "mean-field",
            "--weight-decay",
            "0",
            "--optimizer",
            "bsam",
        ]),
        &["bsam", "mean-field"],
    );
    assert_one_line_error(
        &train(&[
            "--bayesian",
            "mean-field",
            "--weight-decay",
            "0",
            "--prior-std",
            "0",
        ]),
        &["prior_std"],
    );
    let vit = csam(&[
        "train",
        "--data",
        "digits",
        "--model",
        "vit-ti16",
        "--bayesian",
        "mean-field",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_one_line_error(&vit, &["bayesian", "vit-ti16"]);
    assert!(!out.exists(), "nothing trained");
}
