//! Every update-rule option and training loss reaches a real training run
//! and resumes bit-identically: `sam_every`, m-sharpness, clipping, ASAM,
//! CSAM with a detached factor, AdamW, VASSO, bSAM, and the training losses (focal,
//! FLSD-53, AdaFocal, dual focal, MbLS, label smoothing, ACLS, CPC, MMCE,
//! MDCA, CRL), mixings (mixup, MIT-L), BalCAL's head, BatchEnsemble and MIMO
//! under SGD, SAM and CSAM each train on digits, change the weights
//! against the same run without the option (so the option is not ignored),
//! and a run stopped after epoch 1 and resumed ends with the same bytes as
//! the uninterrupted one.
//!
//! libtorch's random generator is process-global, so the runs of this file
//! take a lock and never overlap.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use csam_testkit::roundoff::training_bar;
use csam_train::spec::{RunSpec, Runtime, SpecLayers};
use csam_train::train::{RunOutcome, Silent, TrainRequest};

static SERIAL: Mutex<()> = Mutex::new(());

/// A run reported to no one.
fn run(request: &TrainRequest) -> Result<RunOutcome, csam_train::train::TrainError> {
    csam_train::train::run(request, &mut Silent)
}

/// A two-epoch digits MLP run with `extra` flat keys (lr 0.05 unless they
/// name one).
fn spec(extra: &str) -> RunSpec {
    let lr = match extra.contains("lr =") {
        true => "",
        false => "lr = 0.05\n",
    };
    let flags: toml::Table = format!(
        "data = \"digits\"\nval_size = 300\nmodel = \"mlp\"\nmlp_hidden = [32]\nepochs = 2\n\
         batch_size = 64\naugment = false\n{lr}{extra}"
    )
    .parse()
    .unwrap();
    let (spec, _) = SpecLayers::new().flags(flags).unwrap().build().unwrap();
    spec.validate().unwrap();
    spec
}

fn train(spec: &RunSpec, out: &Path, resume: bool, stop: Option<usize>) -> RunOutcome {
    run(&TrainRequest {
        spec: spec.clone(),
        runtime: Runtime {
            device: Some("cpu".into()),
            threads: Some(1),
            ..Runtime::default()
        },
        out: out.to_path_buf(),
        resume,
        stop_after_epoch: stop,
    })
    .unwrap()
}

fn last_weights(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join("model-last.safetensors")).unwrap()
}

/// Trains `option` whole in `dir/whole` and stopped after epoch 1 then
/// resumed in `dir/split`, asserts both end with the same weights' bytes and
/// returns the whole run's directory.
fn trains_and_resumes_bit_identically(option: &RunSpec, dir: &Path, what: &str) -> PathBuf {
    let whole = dir.join("whole");
    train(option, &whole, false, None);
    let split = dir.join("split");
    train(option, &split, false, Some(1));
    train(option, &split, true, None);
    assert_eq!(
        last_weights(&whole),
        last_weights(&split),
        "the resumed {what} run differs from the uninterrupted one"
    );
    whole
}

#[test]
fn every_option_trains_changes_the_run_and_resumes_bit_identically() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    // (name, the option's keys, the keys of the same run without it)
    let cases = [
        (
            "sam-every",
            "optimizer = \"sam\"\nsam_every = 2\n",
            "optimizer = \"sam\"\n",
        ),
        (
            "m",
            "optimizer = \"sam\"\nm = 16\n",
            "optimizer = \"sam\"\n",
        ),
        (
            "clip",
            "optimizer = \"sam\"\nclip = 0.05\n",
            "optimizer = \"sam\"\n",
        ),
        (
            "asam",
            "optimizer = \"asam\"\nrho = 0.05\n",
            "optimizer = \"sam\"\n",
        ),
        // davda54/sam's form scales the biases too: another run than the
        // authors' rule at the same eta.
        (
            "asam-scale-all",
            "optimizer = \"asam\"\nrho = 0.05\nasam_scale_all = true\n",
            "optimizer = \"asam\"\nrho = 0.05\n",
        ),
        (
            "csam-detach",
            "optimizer = \"csam\"\ncsam_detach = true\n",
            "optimizer = \"csam\"\n",
        ),
        (
            "adamw",
            "base_optimizer = \"adamw\"\nlr = 0.002\n",
            "lr = 0.002\n",
        ),
        // Mixed precision: autocast to bfloat16 in both of CSAM's passes,
        // and to float16 with the loss scale in the checkpoint.
        (
            "bf16",
            "optimizer = \"csam\"\nprecision = \"bf16\"\n",
            "optimizer = \"csam\"\n",
        ),
        (
            "fp16",
            "optimizer = \"csam\"\nprecision = \"fp16\"\n",
            "optimizer = \"csam\"\nprecision = \"bf16\"\n",
        ),
        // VASSO's moving average reaches the steps and, through the
        // checkpoint, the resumed run.
        ("vasso", "optimizer = \"vasso\"\n", "optimizer = \"sam\"\n"),
        // bSAM's momentum and precision reach the resumed run through the
        // checkpoint, and its noise replays; each of its keys acts, and so
        // does a training loss and a mixing in both of its passes.
        ("bsam", "optimizer = \"bsam\"\n", "optimizer = \"sam\"\n"),
        (
            "bsam-beta2",
            "optimizer = \"bsam\"\nbsam_beta2 = 0.9\n",
            "optimizer = \"bsam\"\n",
        ),
        (
            "bsam-damping",
            "optimizer = \"bsam\"\nbsam_damping = 1.0\n",
            "optimizer = \"bsam\"\n",
        ),
        (
            "bsam-init-precision",
            "optimizer = \"bsam\"\nbsam_init_precision = 3.0\n",
            "optimizer = \"bsam\"\n",
        ),
        (
            "bsam-data-factor",
            "optimizer = \"bsam\"\nbsam_data_factor = 4.0\n",
            "optimizer = \"bsam\"\n",
        ),
        (
            "focal-bsam",
            "loss = \"focal\"\noptimizer = \"bsam\"\n",
            "optimizer = \"bsam\"\n",
        ),
        (
            "mixup-bsam",
            "mixing = \"mixup\"\noptimizer = \"bsam\"\n",
            "optimizer = \"bsam\"\n",
        ),
        // The training losses, with SGD, SAM and CSAM (the loss reaches both
        // passes and CSAM's weighting).
        ("focal", "loss = \"focal\"\nfocal_gamma = 2.0\n", ""),
        (
            "focal-sam",
            "loss = \"focal\"\noptimizer = \"sam\"\n",
            "optimizer = \"sam\"\n",
        ),
        (
            "flsd-csam",
            "loss = \"flsd\"\noptimizer = \"csam\"\n",
            "optimizer = \"csam\"\n",
        ),
        (
            "dual-focal-sam",
            "loss = \"dual-focal\"\noptimizer = \"sam\"\n",
            "optimizer = \"sam\"\n",
        ),
        (
            "mbls-csam",
            "loss = \"mbls\"\nmargin = 2.0\noptimizer = \"csam\"\n",
            "optimizer = \"csam\"\n",
        ),
        (
            "label-smoothing-csam",
            "loss = \"label-smoothing\"\nsmoothing = 0.2\noptimizer = \"csam\"\n",
            "optimizer = \"csam\"\n",
        ),
        // Small margins, so that the regularisers act within 2 epochs.
        (
            "acls-csam",
            "loss = \"acls\"\nmargin = 1.0\noptimizer = \"csam\"\n",
            "optimizer = \"csam\"\n",
        ),
        ("cpc", "loss = \"cpc\"\n", ""),
        // The batch terms, in both passes and beside CSAM's weighting.
        (
            "mmce-sam",
            "loss = \"mmce\"\noptimizer = \"sam\"\n",
            "optimizer = \"sam\"\n",
        ),
        (
            "mdca-csam",
            "loss = \"mdca\"\noptimizer = \"csam\"\n",
            "optimizer = \"csam\"\n",
        ),
        // CRL's history (all zero in epoch 1) ranks epoch 2's examples and,
        // through the checkpoint, the resumed run's.
        (
            "crl-csam",
            "loss = \"crl\"\noptimizer = \"csam\"\n",
            "optimizer = \"csam\"\n",
        ),
        (
            "crl-m",
            "loss = \"crl\"\noptimizer = \"sam\"\nm = 16\n",
            "optimizer = \"sam\"\nm = 16\n",
        ),
        // AdaFocal's bins learnt after epoch 1 reach epoch 2 and, through
        // the checkpoint, the resumed run.
        (
            "adafocal-csam",
            "loss = \"adafocal\"\noptimizer = \"csam\"\n",
            "optimizer = \"csam\"\n",
        ),
        // BalCAL's lambda, set from epoch 1's training logits, is kept with
        // the weights and reaches epoch 2 and the resumed run; with CSAM and
        // m-sharpness each sub-batch scales its own ETF logits.
        ("balcal", "head = \"balcal\"\nbalcal_delta = 0.95\n", ""),
        (
            "balcal-csam-m",
            "head = \"balcal\"\noptimizer = \"csam\"\nm = 16\n",
            "optimizer = \"csam\"\nm = 16\n",
        ),
        // BatchEnsemble's fast weights and per-member biases are trained,
        // saved in the checkpoint and read back on resume; with CSAM and
        // m-sharpness each sub-batch is tiled once per member.
        (
            "batch-ensemble-csam-m",
            "ensemble = \"batch-ensemble\"\nensemble_size = 3\noptimizer = \"csam\"\nm = 16\n",
            "optimizer = \"csam\"\nm = 16\n",
        ),
        // MIMO's members' rows are drawn from (seed, step), so they replay
        // on resume; m-sharpness splits each member's rows.
        (
            "mimo-sam-m",
            "ensemble = \"mimo\"\nensemble_size = 2\nbatch_repetitions = 2\n\
             input_repetition = 0.25\noptimizer = \"sam\"\nm = 16\n",
            "optimizer = \"sam\"\nm = 16\n",
        ),
        // Mean-field VI: rho is trained, saved and read back; the Flipout
        // noise of each step (shared by its passes, and by the sub-batches
        // of m-sharpness) and the annealed KL weight follow from the run's
        // seed and the step, so a resumed run samples alike.
        (
            "vi-csam-m",
            "bayesian = \"mean-field\"\nkl_annealing_epochs = 2\nweight_decay = 0.0\n\
             optimizer = \"csam\"\nm = 16\n",
            "weight_decay = 0.0\noptimizer = \"csam\"\nm = 16\n",
        ),
        // Rank-1 BNN: the factors' rho are trained, saved and read back;
        // each step's per-example factor noise follows from the seed and
        // the step, as VI's.
        (
            "rank1-csam-m",
            "ensemble = \"batch-ensemble\"\nensemble_size = 2\nbayesian = \"rank1\"\n\
             kl_annealing_epochs = 2\nweight_decay = 0.0\noptimizer = \"csam\"\nm = 16\n",
            "ensemble = \"batch-ensemble\"\nensemble_size = 2\nweight_decay = 0.0\n\
             optimizer = \"csam\"\nm = 16\n",
        ),
        // Mixed batches: the seeded draws replay on resume; m-sharpness
        // splits the mixed batch.
        ("mixup", "mixing = \"mixup\"\nmixup_alpha = 0.4\n", ""),
        (
            "mit-l-csam",
            "mixing = \"mit-l\"\noptimizer = \"csam\"\nm = 16\n",
            "optimizer = \"csam\"\nm = 16\n",
        ),
    ];
    for (name, with, without) in cases {
        let option = spec(with);
        let whole = dir.path().join(format!("{name}-whole"));
        let finished = train(&option, &whole, false, None);
        assert!(matches!(finished, RunOutcome::Finished(_)), "{name}");

        let baseline = dir.path().join(format!("{name}-without"));
        train(&spec(without), &baseline, false, None);
        assert_ne!(
            last_weights(&whole),
            last_weights(&baseline),
            "{name}: the option did not change the run"
        );

        let split = dir.path().join(format!("{name}-split"));
        assert_eq!(
            train(&option, &split, false, Some(1)),
            RunOutcome::Stopped { epoch: 1 },
            "{name}"
        );
        train(&option, &split, true, None);
        assert_eq!(
            last_weights(&whole),
            last_weights(&split),
            "{name}: the resumed run differs from the uninterrupted one"
        );
        let saved = std::fs::read_to_string(whole.join("config.toml")).unwrap();
        assert_eq!(
            RunSpec::from_saved_toml(&saved, name).unwrap(),
            option,
            "{name}: config.toml holds the option"
        );
    }
}

#[test]
fn batch_ensemble_checkpoints_hold_every_members_weights_and_resume_bit_identically() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let option = spec("ensemble = \"batch-ensemble\"\noptimizer = \"sam\"\n");
    let whole = trains_and_resumes_bit_identically(&option, dir.path(), "BatchEnsemble");
    // Digits: 64 features, 10 classes; hidden width 32; 4 members.
    assert_last_weights_have(
        &whole,
        &[
            ("1.weight", &[32, 64]),
            ("1.r", &[4, 64]),
            ("1.s", &[4, 32]),
            ("1.bias", &[4, 32]),
            ("3.weight", &[10, 32]),
            ("3.r", &[4, 32]),
            ("3.s", &[4, 10]),
            ("3.bias", &[4, 10]),
        ],
    );
}

#[test]
fn vi_checkpoints_hold_the_posterior_and_resume_bit_identically() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let option = spec("bayesian = \"mean-field\"\nweight_decay = 0.0\noptimizer = \"sam\"\n");
    let whole = trains_and_resumes_bit_identically(&option, dir.path(), "VI");
    // Digits: 64 features, 10 classes; hidden width 32; deterministic biases.
    assert_last_weights_have(
        &whole,
        &[
            ("1.weight", &[32, 64]),
            ("1.weight_rho", &[32, 64]),
            ("1.bias", &[32]),
            ("3.weight", &[10, 32]),
            ("3.weight_rho", &[10, 32]),
            ("3.bias", &[10]),
        ],
    );
}

#[test]
fn rank1_checkpoints_hold_the_factors_posterior_and_resume_bit_identically() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let option = spec(
        "ensemble = \"batch-ensemble\"\nbayesian = \"rank1\"\nweight_decay = 0.0\n\
         optimizer = \"sam\"\n",
    );
    let whole = trains_and_resumes_bit_identically(&option, dir.path(), "rank-1 BNN");
    // Digits: 64 features, 10 classes; hidden width 32; 4 members; the
    // shared weights are point estimates.
    assert_last_weights_have(
        &whole,
        &[
            ("1.weight", &[32, 64]),
            ("1.r", &[4, 64]),
            ("1.r_rho", &[4, 64]),
            ("1.s", &[4, 32]),
            ("1.s_rho", &[4, 32]),
            ("1.bias", &[4, 32]),
            ("3.weight", &[10, 32]),
            ("3.r_rho", &[4, 32]),
            ("3.s_rho", &[4, 10]),
        ],
    );
}

/// Asserts that the run in `dir` saved its last weights with these names
/// and shapes.
fn assert_last_weights_have(dir: &Path, expected: &[(&str, &[i64])]) {
    let saved = tch::Tensor::read_safetensors(dir.join("model-last.safetensors")).unwrap();
    let shapes: std::collections::HashMap<String, Vec<i64>> = saved
        .iter()
        .map(|(name, t)| (name.clone(), t.size()))
        .collect();
    for (name, shape) in expected {
        let got = shapes.get(*name).map(Vec::as_slice);
        assert_eq!(got, Some(*shape), "{name} in {shapes:?}");
    }
}

#[test]
fn mixup_with_alpha_zero_is_plain_training_bit_for_bit() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    for rule in ["sgd", "csam"] {
        let (mixed, plain) = (
            dir.path().join(format!("{rule}-alpha0")),
            dir.path().join(rule),
        );
        let optimizer = format!("optimizer = \"{rule}\"\n");
        train(
            &spec(&format!(
                "{optimizer}mixing = \"mixup\"\nmixup_alpha = 0.0\n"
            )),
            &mixed,
            false,
            None,
        );
        train(&spec(&optimizer), &plain, false, None);
        assert_eq!(last_weights(&mixed), last_weights(&plain), "{rule}");
    }
}

#[test]
fn csam_with_gamma_zero_is_sam_with_the_same_loss_bit_for_bit() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    for objective in [
        "",
        "loss = \"focal\"\n",
        "loss = \"mmce\"\n",
        "loss = \"acls\"\nmargin = 1.0\n",
        "loss = \"adafocal\"\n",
        "mixing = \"mixup\"\n",
        "head = \"balcal\"\n",
    ] {
        let (csam, sam) = (dir.path().join("csam"), dir.path().join("sam"));
        for out in [&csam, &sam] {
            let _ = std::fs::remove_dir_all(out);
        }
        let csam_spec = format!("{objective}optimizer = \"csam\"\ngamma = 0.0\n");
        train(&spec(&csam_spec), &csam, false, None);
        train(
            &spec(&format!("{objective}optimizer = \"sam\"\n")),
            &sam,
            false,
            None,
        );
        assert_eq!(last_weights(&csam), last_weights(&sam), "{objective}");
    }
}

#[test]
fn vasso_with_theta_one_is_sam_bit_for_bit() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (vasso, sam) = (dir.path().join("vasso"), dir.path().join("sam"));
    train(
        &spec("optimizer = \"vasso\"\nvasso_theta = 1.0\n"),
        &vasso,
        false,
        None,
    );
    train(&spec("optimizer = \"sam\"\n"), &sam, false, None);
    assert_eq!(last_weights(&vasso), last_weights(&sam));
}

#[test]
fn balcal_sets_lambda_after_every_epoch_and_keeps_it_with_the_weights() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("balcal");
    // 0.3 is no midpoint of the bisection and not 1: the value seen after
    // training came from the update.
    let spec = spec("head = \"balcal\"\nbalcal_lambda = 0.3\n");
    train(&spec, &out, false, None);
    let weights = tch::Tensor::read_safetensors(out.join("model-last.safetensors")).unwrap();
    let (_, lambda) = weights
        .iter()
        .find(|(name, _)| name == "balcal.lambda")
        .expect("the weights hold lambda");
    let lambda = lambda.double_value(&[0]);
    assert!(lambda != 0.3 && (0.0..=1.0).contains(&lambda), "{lambda}");
    // Each epoch's line of metrics.jsonl names the lambda it predicted with.
    let log = std::fs::read_to_string(out.join("metrics.jsonl")).unwrap();
    let logged: Vec<f64> = log
        .lines()
        .map(|line| {
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            record["balcal_lambda"]
                .as_f64()
                .expect("balcal_lambda logged")
        })
        .collect();
    assert_eq!(logged.len(), 2);
    assert_eq!(
        logged[1], lambda,
        "the last epoch's lambda is the saved one"
    );
}

#[test]
fn torchscript_model_trains_with_csam_and_resumes_bit_identically() {
    let Some(python) = csam_testkit::twin::python() else {
        return;
    };
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../csam-nn/tests/fixtures/torchscript_reference.py");
    let status = std::process::Command::new(python)
        .args([fixture.as_os_str(), "make".as_ref(), dir.path().as_os_str()])
        .args(["10", "float32"])
        .status()
        .unwrap();
    assert!(status.success(), "torchscript_reference.py make failed");
    let script = dir.path().join("net.pt");
    let flags: toml::Table = format!(
        "data = \"digits\"\nval_size = 300\nmodel = \"torchscript:{}\"\nepochs = 2\n\
         batch_size = 64\naugment = false\nlr = 0.05\noptimizer = \"csam\"\nm = 16\n",
        script.display()
    )
    .parse()
    .unwrap();
    let (option, _) = SpecLayers::new().flags(flags).unwrap().build().unwrap();
    option.validate().unwrap();
    assert_eq!(option.model.script.as_deref(), Some(script.as_path()));

    let whole = trains_and_resumes_bit_identically(&option, dir.path(), "TorchScript");
    // The weights moved from the module's own, and the BatchNorm statistics
    // and num_batches_tracked are kept under the module's names.
    let trained: std::collections::HashMap<String, tch::Tensor> =
        tch::Tensor::read_safetensors(whole.join("model-last.safetensors"))
            .unwrap()
            .into_iter()
            .collect();
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(whole.join("summary.json")).unwrap())
            .unwrap();
    let n_train = summary["n_train"].as_i64().unwrap();
    assert_eq!(
        trained["bn.num_batches_tracked"].int64_value(&[]),
        2 * ((n_train + 63) / 64),
        "one BatchNorm update per step (SAM's second pass undone), 2 epochs"
    );
    assert!(trained["bn.running_var"].ne(1.0).all().int64_value(&[]) == 1);
    let saved = std::fs::read_to_string(whole.join("config.toml")).unwrap();
    assert!(saved.contains("arch = \"torchscript\""), "{saved}");
    assert_eq!(
        RunSpec::from_saved_toml(&saved, "torchscript").unwrap(),
        option
    );
}

#[test]
fn mimo_checkpoints_hold_one_network_for_m_images_and_m_heads_and_resume_bit_identically() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let option = spec("ensemble = \"mimo\"\n");
    let whole = trains_and_resumes_bit_identically(&option, dir.path(), "MIMO");
    let saved = tch::Tensor::read_safetensors(whole.join("model-last.safetensors")).unwrap();
    let shapes: std::collections::HashMap<String, Vec<i64>> = saved
        .iter()
        .map(|(name, t)| (name.clone(), t.size()))
        .collect();
    // Digits: 64 features, 10 classes; hidden width 32; 3 members.
    for (name, shape) in [
        ("1.weight", vec![32, 3 * 64]),
        ("1.bias", vec![32]),
        ("3.weight", vec![3 * 10, 32]),
        ("3.bias", vec![3 * 10]),
    ] {
        assert_eq!(shapes.get(name), Some(&shape), "{name} in {shapes:?}");
    }
    assert_eq!(shapes.len(), 4, "{shapes:?}");
    // The members' own shuffles reach the steps: every member reading the
    // batch in one order trains another network.
    let one_order = spec("ensemble = \"mimo\"\ninput_repetition = 1.0\nbatch_repetitions = 1\n");
    let shared = dir.path().join("one-order");
    train(&one_order, &shared, false, None);
    assert_ne!(last_weights(&whole), last_weights(&shared));
}

/// The second-pass share of each epoch in a run's `metrics.jsonl`.
fn second_pass_shares(dir: &Path) -> Vec<f64> {
    std::fs::read_to_string(dir.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|line| {
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            record["train"]["second_pass"].as_f64().unwrap()
        })
        .collect()
}

#[test]
fn efficient_sam_policies_change_the_run_resume_bit_identically_and_log_their_share() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let csam = spec("optimizer = \"csam\"\n");
    let full = dir.path().join("csam");
    train(&csam, &full, false, None);
    assert_eq!(second_pass_shares(&full), [1.0, 1.0]);
    // LookSAM's g_v and AE-SAM's statistics reach the resumed run through
    // the checkpoint (the epoch's 18 steps are no multiple of k = 5, so a
    // resumed LookSAM without g_v would have nothing to reuse); RST's
    // draws are a function of the seed and the step.
    for (name, keys) in [
        ("rst", "sam_policy = \"rst\"\nrst_p = 0.3\n"),
        (
            "rst-linear",
            "sam_policy = \"rst\"\nrst_p = 1\nrst_p_end = 0\n",
        ),
        ("looksam", "sam_policy = \"looksam\"\n"),
        ("aesam", "sam_policy = \"aesam\"\n"),
    ] {
        let option = spec(&format!("optimizer = \"csam\"\n{keys}"));
        let whole = trains_and_resumes_bit_identically(&option, &dir.path().join(name), name);
        assert_ne!(last_weights(&whole), last_weights(&full), "{name}");
        let shares = second_pass_shares(&whole);
        let run_share = shares.iter().sum::<f64>() / shares.len() as f64;
        assert!(0.0 < run_share && run_share < 1.0, "{name}: {shares:?}");
        if name == "looksam" {
            // Steps 0, 5, ..., 35 of 2 x 18: four in each epoch.
            assert_eq!(shares, [4.0 / 18.0, 4.0 / 18.0], "{name}");
        }
    }
    // k counts the run's steps, not the epoch's: with k = 4, steps 0, 4,
    // ..., 16 of the first epoch's 18 and 20, ..., 32 of the second's.
    let every_fourth = spec("optimizer = \"csam\"\nsam_policy = \"looksam\"\nlooksam_k = 4\n");
    let out = dir.path().join("looksam-k4");
    train(&every_fourth, &out, false, None);
    assert_eq!(second_pass_shares(&out), [5.0 / 18.0, 4.0 / 18.0]);
    // ESAM's masks are a function of the seed, the step and the weight; it
    // runs the second pass on every step (on a share of the batch), as the
    // sub-batch ascent does (its first pass on a share of the batch) and
    // Momentum-SAM (its only pass; its direction is SGD's momentum, which
    // the checkpoint holds).
    for name in ["esam", "subbatch", "msam"] {
        let option = spec(&format!("optimizer = \"csam\"\nsam_policy = \"{name}\"\n"));
        let whole = trains_and_resumes_bit_identically(&option, &dir.path().join(name), name);
        assert_ne!(last_weights(&whole), last_weights(&full), "{name}");
        assert_eq!(second_pass_shares(&whole), [1.0, 1.0], "{name}");
    }
}

/// bfloat16 autocast, and float16 autocast with loss scaling, train to
/// within a stated tolerance of float32: the same MLP and CSAM run on digits
/// ends with a validation NLL within 0.05 and an accuracy within 3 points of
/// float32's. The float16 run logs its overflow-skipped steps per epoch.
#[test]
fn mixed_precision_training_stays_within_a_stated_tolerance_of_float32() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let summary = |precision: &str| {
        let option = spec(&format!(
            "optimizer = \"csam\"\nprecision = \"{precision}\"\n"
        ));
        let out = dir.path().join(precision);
        train(&option, &out, false, None);
        let text = std::fs::read_to_string(out.join("summary.json")).unwrap();
        let summary: serde_json::Value = serde_json::from_str(&text).unwrap();
        let val = &summary["val"];
        (
            val["nll"].as_f64().unwrap(),
            val["accuracy"].as_f64().unwrap(),
        )
    };
    let (nll32, acc32) = summary("fp32");
    for precision in ["bf16", "fp16"] {
        let (nll16, acc16) = summary(precision);
        assert!(
            (nll16 - nll32).abs() < 0.05,
            "{precision}: validation NLL {nll16} vs {nll32}"
        );
        assert!(
            (acc16 - acc32).abs() < 0.03,
            "{precision}: validation accuracy {acc16} vs {acc32}"
        );
        assert_ne!(
            (nll16, acc16),
            (nll32, acc32),
            "{precision} changed nothing"
        );
    }
    let skipped: Vec<Option<u64>> = std::fs::read_to_string(dir.path().join("fp16/metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|line| {
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            record["train"]["overflow_skipped"].as_u64()
        })
        .collect();
    assert!(
        skipped.len() == 2 && skipped.iter().all(Option::is_some),
        "fp16 epochs log their skipped steps: {skipped:?}"
    );
}

/// The memory format channels_last (`memory_format`, for the convolutional
/// models): the small CNN trains with SAM on digits (2 epochs of 3 batches
/// of 512), a run stopped after epoch 1 and resumed ends bit-identical to
/// the uninterrupted one (same machine, same kernels), and its weights files
/// (the last model and the checkpoint) hold the standard layout: started
/// from the same weights, a one-epoch run's files equal the contiguous
/// run's up to float32 round-off of its 3 steps, relative to how far the
/// weights moved. A file written in NHWC order would hold the convolution
/// weights' elements permuted, off by about their whole size. The two
/// layouts' kernels round differently, so over many steps the runs drift
/// apart at a rate set by the CPU's kernels, which no constant bounds: only
/// one epoch is compared.
#[test]
fn channels_last_trains_saves_the_standard_layout_and_resumes_bit_identically() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let spec = |epochs: usize, extra: &str| {
        let flags: toml::Table = format!(
            "data = \"digits\"\nval_size = 300\nmodel = \"cnn\"\nepochs = {epochs}\nbatch_size = 512\n\
             augment = false\nlr = 0.05\noptimizer = \"sam\"\n{extra}"
        )
        .parse()
        .unwrap();
        let (spec, _) = SpecLayers::new().flags(flags).unwrap().build().unwrap();
        spec.validate().unwrap();
        spec
    };
    // The common start: a contiguous run's weights after one epoch.
    let start_run = dir.path().join("start");
    train(&spec(1, ""), &start_run, false, None);
    let start = start_run.join("model-last.safetensors");
    let from_start = format!("init = {:?}\n", start.to_str().unwrap());
    let layout = |epochs: usize, channels_last: bool| {
        let format = match channels_last {
            true => "memory_format = \"channels_last\"\n",
            false => "",
        };
        spec(epochs, &format!("{from_start}{format}"))
    };
    assert!(layout(2, true)
        .to_toml()
        .contains("memory_format = \"channels_last\""));
    assert!(!layout(2, false).to_toml().contains("memory_format"));
    trains_and_resumes_bit_identically(&layout(2, true), &dir.path().join("nhwc"), "channels_last");
    // One epoch in each layout from the common start.
    let (nhwc, nchw) = (dir.path().join("nhwc-1"), dir.path().join("nchw-1"));
    train(&layout(1, true), &nhwc, false, None);
    train(&layout(1, false), &nchw, false, None);
    let read = |path: &Path| {
        let mut named = tch::Tensor::read_safetensors(path).unwrap();
        named.sort_by(|a, b| a.0.cmp(&b.0));
        named
    };
    let largest_difference = |a: &[(String, tch::Tensor)], b: &[(String, tch::Tensor)]| {
        assert_eq!(a.len(), b.len());
        a.iter()
            .zip(b)
            .fold(0.0f64, |largest, ((name, x), (other, y))| {
                assert_eq!(name, other);
                assert_eq!(x.size(), y.size(), "{name}");
                largest.max((x - y).abs().max().double_value(&[]))
            })
    };
    // 3 SAM steps of 2 passes; the first convolution's weight gradient
    // reduces 512 rows x 8 x 8 pixels, the longest float32 reduction.
    let bar = training_bar(3, 2, 512 * 8 * 8);
    let initial = read(&start);
    for file in ["model-last.safetensors", "checkpoint/weights-1.safetensors"] {
        let (a, b) = (read(&nhwc.join(file)), read(&nchw.join(file)));
        let moved = largest_difference(&b, &initial);
        assert!(moved > 0.0, "the contiguous run did not train");
        let gap = largest_difference(&a, &b) / moved;
        eprintln!("{file}: channels_last vs contiguous {gap:e} of the move");
        assert!(
            gap <= bar,
            "{file}: channels_last vs contiguous weights {gap} of their move (bar {bar})"
        );
    }
}

/// The keys that no case above sets away from its default: each changes
/// the trained weights against the same run without it, so a key that no
/// longer reaches its branch (or reaches the wrong one) fails here.
/// (`drop_path` and `shakedrop` act on the ViTs and PyramidNets only, which
/// digits' 8x8 images do not fit: see the next test.)
#[test]
fn every_key_away_from_its_default_changes_the_weights() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let step = "schedule = \"step\"\nstep_size = 1\n";
    let adafocal = "loss = \"adafocal\"\n";
    let aesam = "optimizer = \"sam\"\nsam_policy = \"aesam\"\n";
    let esam = "optimizer = \"sam\"\nsam_policy = \"esam\"\n";
    let members = "ensemble = \"batch-ensemble\"\nensemble_size = 2\n";
    let vi = "bayesian = \"mean-field\"\nweight_decay = 0.0\n";
    // (name, the key's line, the run it is added to)
    let cases = [
        ("shuffle", "shuffle = false\n", ""),
        ("momentum", "momentum = 0.5\n", ""),
        ("nesterov", "nesterov = true\n", ""),
        ("warmup-epochs", "warmup_epochs = 1\n", ""),
        ("min-lr", "min_lr = 0.02\n", ""),
        ("step-size", "step_size = 1\n", "schedule = \"step\"\n"),
        ("decay-factor", "decay_factor = 0.5\n", step),
        ("eta", "eta = 0.5\n", "optimizer = \"asam\"\n"),
        (
            "margin-weight",
            "margin_weight = 1.0\n",
            "loss = \"mbls\"\nmargin = 1.0\n",
        ),
        (
            "acls-pos-lambda",
            "acls_pos_lambda = 0.3\n",
            "loss = \"acls\"\nmargin = 1.0\n",
        ),
        (
            "acls-neg-lambda",
            "acls_neg_lambda = 1.0\n",
            "loss = \"acls\"\nmargin = 1.0\n",
        ),
        (
            "cpc-bdc-weight",
            "cpc_bdc_weight = 1.0\n",
            "loss = \"cpc\"\n",
        ),
        (
            "cpc-bec-weight",
            "cpc_bec_weight = 0.1\n",
            "loss = \"cpc\"\n",
        ),
        ("mmce-lambda", "mmce_lambda = 8.0\n", "loss = \"mmce\"\n"),
        ("mdca-beta", "mdca_beta = 5.0\n", "loss = \"mdca\"\n"),
        ("crl-weight", "crl_weight = 3.0\n", "loss = \"crl\"\n"),
        (
            "adafocal-initial-gamma",
            "adafocal_initial_gamma = 3.0\n",
            adafocal,
        ),
        ("adafocal-lambda", "adafocal_lambda = 10.0\n", adafocal),
        ("adafocal-bins", "adafocal_bins = 3\n", adafocal),
        // The lower clamp binds once a large update pushes a negative
        // exponent past it (the MLP is underconfident after one epoch at
        // lr 0.05, so a positive exponent only shrinks).
        (
            "adafocal-gamma-min",
            "adafocal_gamma_min = -0.5\n",
            "loss = \"adafocal\"\nadafocal_lambda = 50.0\nadafocal_initial_gamma = -0.3\n",
        ),
        // The upper clamp binds when an exponent starting at it meets a bin
        // whose confidence exceeds its accuracy: g exp(lambda d) > g for
        // d > 0. At lr 0.5 the first epoch leaves such a bin; with the
        // default gamma_max of 20 the exponent rises instead.
        (
            "adafocal-gamma-max",
            "adafocal_gamma_max = 0.2\n",
            "loss = \"adafocal\"\nlr = 0.5\nadafocal_initial_gamma = 0.2\n",
        ),
        ("adafocal-switch", "adafocal_switch = 1.5\n", adafocal),
        ("mit-margin", "mit_margin = 0.5\n", "mixing = \"mit-l\"\n"),
        (
            "looksam-alpha",
            "looksam_alpha = 0.2\n",
            "optimizer = \"sam\"\nsam_policy = \"looksam\"\n",
        ),
        ("aesam-delta", "aesam_delta = 0.3\n", aesam),
        ("aesam-lambda1", "aesam_lambda1 = 0.0\n", aesam),
        ("aesam-lambda2", "aesam_lambda2 = -1.0\n", aesam),
        ("esam-beta", "esam_beta = 0.3\n", esam),
        ("esam-gamma", "esam_gamma = 0.25\n", esam),
        (
            "subbatch-fraction",
            "subbatch_fraction = 0.5\n",
            "optimizer = \"sam\"\nsam_policy = \"subbatch\"\n",
        ),
        (
            "msam-direction",
            "msam_direction = \"ascent\"\n",
            "optimizer = \"sam\"\nsam_policy = \"msam\"\n",
        ),
        ("random-sign-init", "random_sign_init = 0.5\n", members),
        ("prior-std", "prior_std = 0.1\n", vi),
    ];
    for (name, key, base) in cases {
        let with = dir.path().join(format!("{name}-with"));
        train(&spec(&format!("{base}{key}")), &with, false, None);
        let without = dir.path().join(format!("{name}-without"));
        train(&spec(base), &without, false, None);
        // (Not assert_ne!: it would print both files' bytes.)
        assert!(
            last_weights(&with) != last_weights(&without),
            "{name}: the key did not change the run"
        );
    }
}

/// Writes an IDX directory (the MNIST layout) of `side x side` images of
/// seeded random pixels in 4 classes: `n_train` training and `n_test` test
/// images.
fn idx_images(dir: &Path, side: u32, n_train: u32, n_test: u32) {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    std::fs::create_dir_all(dir).unwrap();
    for (part, n) in [("train", n_train), ("t10k", n_test)] {
        let mut images = [0, 0, 8, 3].to_vec();
        for dim in [n, side, side] {
            images.extend_from_slice(&dim.to_be_bytes());
        }
        images.extend((0..n * side * side).map(|_| rng.random::<u8>()));
        let mut labels = [0, 0, 8, 1].to_vec();
        labels.extend_from_slice(&n.to_be_bytes());
        labels.extend((0..n).map(|i| (i % 4) as u8));
        std::fs::write(dir.join(format!("{part}-images-idx3-ubyte")), images).unwrap();
        std::fs::write(dir.join(format!("{part}-labels-idx1-ubyte")), labels).unwrap();
    }
}

/// Stochastic depth reaches the architectures it acts on: `drop_path` a
/// ViT's blocks and `shakedrop` a PyramidNet's units, each changing the
/// weights of a one-epoch run against the same run without it. The images
/// are 16x16, one ViT patch (digits' 8x8 are smaller than a patch), and few,
/// since the smallest PyramidNet has 110 layers.
#[test]
fn stochastic_depth_changes_the_weights_of_its_architectures() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("images16");
    idx_images(&data, 16, 48, 8);
    let spec = |model: &str, key: &str| {
        let flags: toml::Table = format!(
            "data = \"idx:{}\"\nval_size = 8\nmodel = \"{model}\"\nepochs = 1\n\
             batch_size = 16\naugment = false\nlr = 0.05\n{key}",
            data.display()
        )
        .parse()
        .unwrap();
        let (spec, _) = SpecLayers::new().flags(flags).unwrap().build().unwrap();
        spec.validate().unwrap();
        spec
    };
    for (name, model, key) in [
        ("drop-path", "vit-ti16", "drop_path = 0.5\n"),
        ("shakedrop", "pyramidnet110-a48", "shakedrop = 0.5\n"),
    ] {
        let with = dir.path().join(format!("{name}-with"));
        train(&spec(model, key), &with, false, None);
        let without = dir.path().join(format!("{name}-without"));
        train(&spec(model, ""), &without, false, None);
        assert!(
            last_weights(&with) != last_weights(&without),
            "{name}: the key did not change the run"
        );
    }
}

/// The selection and metric keys, and a posterior's prediction samples,
/// change what a run reports, not its weights: the best checkpoint's value
/// is the chosen metric's, the test metrics are binned as `bins`, `edges`
/// and `adaptive` say, and a posterior's are averaged over
/// `posterior_samples` weight samples.
#[test]
fn selection_and_metric_keys_change_what_the_run_reports() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let summary = |name: &str, keys: &str| -> (serde_json::Value, Vec<u8>) {
        let out = dir.path().join(name);
        train(&spec(keys), &out, false, None);
        let text = std::fs::read_to_string(out.join("summary.json")).unwrap();
        (serde_json::from_str(&text).unwrap(), last_weights(&out))
    };
    let vi = "bayesian = \"mean-field\"\nweight_decay = 0.0\n";
    // (name, the run, the key's line, the number it changes)
    for (name, base, key, field) in [
        ("best-metric", "", "best_metric = \"ece\"\n", "/best_value"),
        // At lr 0.05 every bin is underconfident and the ECE is the gap
        // between mean confidence and accuracy whatever the bins; at lr 0.5
        // and 1 the bins' gaps differ in sign, so the binning counts.
        ("bins", "lr = 0.5\n", "bins = 5\n", "/test/ece"),
        // At lr 1 some test confidences are 1.0 exactly: left-closed bins
        // put them in a bin of their own, which regroups the top bin.
        (
            "edges",
            "lr = 1.0\n",
            "edges = \"left-closed-with-one-bin\"\n",
            "/test/ece_l2",
        ),
        (
            "adaptive",
            "lr = 0.5\n",
            "adaptive = \"chunked\"\n",
            "/test/adaece",
        ),
        (
            "posterior-samples",
            vi,
            "posterior_samples = 2\n",
            "/test/nll",
        ),
    ] {
        let (plain, plain_weights) = summary(&format!("{name}-without"), base);
        let (changed, weights) = summary(name, &format!("{base}{key}"));
        assert!(weights == plain_weights, "{name} trains the same weights");
        let number = |summary: &serde_json::Value| {
            let value = summary.pointer(field).and_then(serde_json::Value::as_f64);
            value.unwrap_or_else(|| panic!("{name}: {field} is a number"))
        };
        let (ours, theirs) = (number(&changed), number(&plain));
        // A metric sums at most n_test terms of at most 1 (1 + n_test
        // roundings of at most epsilon each): a change of what it sums
        // must exceed that, not merely reorder the sum.
        let n_test = plain["n_test"].as_f64().unwrap();
        let roundoff = (n_test + 1.0) * f64::EPSILON;
        assert!(
            (ours - theirs).abs() > roundoff,
            "{name}: {field} did not change ({ours} and {theirs})"
        );
    }
}

/// The keys of a pair (ACLS's two lambdas, ESAM's beta and gamma, AE-SAM's
/// lambda1 and lambda2) set their own field: the run given the flat key
/// trains the same bytes as the run whose field is set in the nested
/// layout (read by serde straight into the spec, as a saved config.toml)
/// and other bytes than the run whose partner field is set to that value.
/// Two paths swapped in the key table fail here, at the run's level
/// (`run_spec.rs`, `paired_keys_reach_their_own_fields`, holds the spec's
/// fields by name).
#[test]
fn paired_keys_set_their_own_field_not_their_partners() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let acls = "loss = \"acls\"\nmargin = 1.0\n";
    let esam = "optimizer = \"sam\"\nsam_policy = \"esam\"\n";
    let aesam = "optimizer = \"sam\"\nsam_policy = \"aesam\"\n";
    let (loss, policy) = (&["loss"][..], &["optim", "policy"][..]);
    // (the run, the flat key, the table of both fields, the key's field,
    // its partner's, the value)
    let cases = [
        (
            acls,
            "acls_pos_lambda",
            loss,
            "pos_lambda",
            "neg_lambda",
            0.3,
        ),
        (
            acls,
            "acls_neg_lambda",
            loss,
            "neg_lambda",
            "pos_lambda",
            1.0,
        ),
        (esam, "esam_beta", policy, "beta", "gamma", 0.3),
        (esam, "esam_gamma", policy, "gamma", "beta", 0.25),
        (aesam, "aesam_lambda1", policy, "lambda1", "lambda2", 0.0),
        (aesam, "aesam_lambda2", policy, "lambda2", "lambda1", 0.0),
    ];
    for (base, key, table, field, partner, value) in cases {
        let nested = |field: &str| {
            let mut tree: toml::Table = spec(base).to_toml().parse().unwrap();
            let mut branch = &mut tree;
            for name in table {
                branch = branch
                    .get_mut(*name)
                    .and_then(toml::Value::as_table_mut)
                    .unwrap_or_else(|| panic!("{key}: [{name}] in {table:?}"));
            }
            branch.insert(field.to_string(), toml::Value::Float(value));
            RunSpec::from_saved_toml(&tree.to_string(), key).unwrap()
        };
        let weights = |name: &str, spec: &RunSpec| {
            let out = dir.path().join(format!("{key}-{name}"));
            train(spec, &out, false, None);
            last_weights(&out)
        };
        let flat = weights("flat", &spec(&format!("{base}{key} = {value:?}\n")));
        assert!(flat == weights("own", &nested(field)), "{key} sets {field}");
        assert!(
            flat != weights("partner", &nested(partner)),
            "{key} does not set {partner}"
        );
    }
}
