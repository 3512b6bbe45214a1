//! `csam train` and `csam eval` end to end through the binary, on the
//! bundled digits with an MLP (seconds on a CPU).

mod support;

use csam_lab::experiment::base::default_base;
use csam_train::spec::{RunSpec, ValSize, DEFAULT_VAL_FRACTION};
use std::path::Path;
use std::process::{Command, Output};
use support::{text, DIGITS_MLP};

fn csam(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_csam"))
        .args(args)
        .output()
        .expect("the csam binary runs")
}

fn train(out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["train", "--out", out.to_str().unwrap()];
    args.extend_from_slice(DIGITS_MLP);
    args.extend_from_slice(extra);
    csam(&args)
}

#[test]
fn train_then_eval_then_refuse_to_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let trained = train(
        &out,
        &["--epochs", "2", "--optimizer", "csam", "--gamma", "2"],
    );
    assert!(trained.status.success(), "{}", text(&trained));
    let stdout = String::from_utf8_lossy(&trained.stdout);
    assert!(
        stdout.contains("epoch 1/2") && stdout.contains("epoch 2/2"),
        "{stdout}"
    );
    assert!(stdout.contains("test accuracy"), "{stdout}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["optimizer"], "csam");
    assert_eq!(summary["device"], "cpu");
    // Set from chance, not from a run (float32 training takes another path on
    // another CPU): a network that learned nothing scores 0.10 +- 0.016 (one
    // standard error on 355 test digits), 0.3 is 12 of them above; 2-epoch
    // digits MLPs measured 0.52-0.58 (compare_cli), ~8 (0.026) above 0.3.
    assert!(
        summary["test"]["accuracy"].as_f64().unwrap() > 0.3,
        "{summary}"
    );

    let again = train(&out, &["--epochs", "2"]);
    assert!(!again.status.success());
    assert!(
        text(&again).contains("refusing to overwrite"),
        "{}",
        text(&again)
    );

    let run = out.to_str().unwrap();
    let eval = csam(&["eval", "--run", run, "--data", "digits", "--device", "cpu"]);
    assert!(eval.status.success(), "{}", text(&eval));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("eval-digits.json")).unwrap())
            .unwrap();
    assert_eq!(report["n"], 355);
    // The run's own test split is the digits test split: same model, same numbers.
    let (a, b) = (&report["metrics"]["accuracy"], &summary["test"]["accuracy"]);
    assert_eq!(a, b);

    let twice = csam(&["eval", "--run", run, "--data", "digits", "--device", "cpu"]);
    assert!(!twice.status.success());
    assert!(text(&twice).contains("--force"), "{}", text(&twice));
    let forced = csam(&[
        "eval", "--run", run, "--data", "digits", "--device", "cpu", "--force",
    ]);
    assert!(forced.status.success(), "{}", text(&forced));
}

#[test]
fn config_file_is_overridden_by_flags_and_saved() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("run.toml");
    std::fs::write(
        &config,
        "data = \"digits\"\nmodel = \"mlp\"\nepochs = 1\nlr = 0.5\noptimizer = \"sam\"\nrho = 0.1\n",
    )
    .unwrap();
    let out = dir.path().join("run");
    let trained = train(
        &out,
        &[
            "--config",
            config.to_str().unwrap(),
            "--rho",
            "0.02",
            "--mlp-hidden",
            "64,32",
        ],
    );
    assert!(trained.status.success(), "{}", text(&trained));
    let saved = std::fs::read_to_string(out.join("config.toml")).unwrap();
    let saved: toml::Table = saved.parse().unwrap();
    assert_eq!(
        saved["optim"]["rule"]["rho"].as_float(),
        Some(0.02),
        "flag wins over the file"
    );
    assert_eq!(
        saved["optim"]["lr"].as_float(),
        Some(0.05),
        "flag wins over the file"
    );
    assert_eq!(
        saved["optim"]["rule"]["kind"].as_str(),
        Some("sam"),
        "file wins over the default"
    );
    assert_eq!(saved["epochs"].as_integer(), Some(1));
    let hidden = saved["model"]["mlp_hidden"].as_array().unwrap();
    assert_eq!(
        hidden,
        &vec![toml::Value::Integer(64), toml::Value::Integer(32)]
    );
}

/// A saved `config.toml`, read as the spec it holds.
fn saved_spec(run: &Path) -> RunSpec {
    let path = run.join("config.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    RunSpec::from_saved_toml(&text, &path.display().to_string()).unwrap()
}

/// The first line `csam train` printed.
fn first_line(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout.lines().next().unwrap_or_default().to_string()
}

#[test]
fn a_run_without_settings_trains_the_compare_recipe_and_names_it_first() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let args = ["--device", "cpu", "--threads", "1", "--quiet"];
    // One epoch to keep it short; every setting of the run but --epochs is a default.
    let run = out.to_str().unwrap();
    let mut command = vec!["train", "--data", "digits", "--epochs", "1", "--out", run];
    command.extend_from_slice(&args);
    let trained = csam(&command);
    assert!(trained.status.success(), "{}", text(&trained));
    assert_eq!(
        first_line(&trained),
        "recipe: model mlp, data digits, epochs 1, lr 0.05, batch 128, optimizer sgd, \
         rule sgd, augmentation off, precision fp32"
    );
    // The base of `csam compare --data digits`, holding out its 20% as a fraction.
    let mut compare = default_base();
    compare.data.source = "digits".parse().unwrap();
    compare.data.val_size = ValSize::Fraction(DEFAULT_VAL_FRACTION);
    compare.epochs = 1;
    assert_eq!(saved_spec(&out), compare);
}

#[test]
fn settings_given_win_over_the_recipe_and_a_resumed_run_keeps_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("run.toml");
    // The earlier defaults of csam train, the paper's CIFAR recipe, but the model.
    let file = "data = \"digits\"\nepochs = 2\nlr = 0.1\naugment = true\nval_size = 0.1\n";
    std::fs::write(&config, file).unwrap();
    let out = dir.path().join("run");
    let run = out.to_str().unwrap();
    let args = ["--device", "cpu", "--threads", "1", "--quiet", "--out", run];
    let mut first = vec![
        "train",
        "--config",
        config.to_str().unwrap(),
        "--batch-size",
        "64",
    ];
    first.extend_from_slice(&args);
    first.extend_from_slice(&["--stop-after-epoch", "1"]);
    let stopped = csam(&first);
    assert!(stopped.status.success(), "{}", text(&stopped));
    let recipe = "recipe: model mlp, data digits, epochs 2, lr 0.1, batch 64, optimizer sgd, \
                  rule sgd, augmentation on, precision fp32";
    assert_eq!(first_line(&stopped), recipe);
    let spec = saved_spec(&out);
    assert_eq!(spec.data.val_size, ValSize::Fraction(0.1));
    assert_eq!(spec.optim.weight_decay, 5e-4);

    let mut again = vec!["train", "--resume"];
    again.extend_from_slice(&args);
    let resumed = csam(&again);
    assert!(resumed.status.success(), "{}", text(&resumed));
    assert_eq!(first_line(&resumed), recipe, "the run's own settings");
    assert_eq!(saved_spec(&out), spec);
    assert!(out.join("summary.json").exists());
}

#[test]
fn bad_settings_are_rejected_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--optimizer", "sam", "--rho", "0"], "rho"),
        (&["--lr=-0.1"], "lr"),
        (&["--batch-size", "0"], "batch_size"),
        (&["--epochs", "0"], "epochs"),
        (&["--model", "resnet7"], "resnet7"),
        (&["--optimizer", "lamb"], "lamb"),
        (&["--data", "nonsense-set"], "nonsense-set"),
        (&["--device", "tpu"], "tpu"),
    ];
    for (i, (flags, needle)) in cases.iter().enumerate() {
        let out = dir.path().join(format!("run{i}"));
        let output = train(&out, flags);
        assert!(!output.status.success(), "{flags:?} was accepted");
        let message = text(&output);
        assert!(message.contains(needle), "{flags:?}: {message}");
        assert!(!out.exists(), "{flags:?} created the run directory");
    }
}

#[test]
fn gamma_outside_the_papers_range_warns() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let trained = train(
        &out,
        &["--epochs", "1", "--optimizer", "csam", "--gamma", "3"],
    );
    let stderr = String::from_utf8_lossy(&trained.stderr);
    assert!(stderr.contains("warning: gamma = 3"), "{stderr}");
    assert!(trained.status.success(), "{stderr}");
    assert!(out.join("summary.json").exists());
}

#[test]
fn killed_run_resumes_from_its_own_config_to_identical_weights() {
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("whole");
    let flags = ["--epochs", "3", "--optimizer", "csam", "--dropout", "0.1"];
    let uninterrupted = train(&whole, &flags);
    assert!(uninterrupted.status.success(), "{}", text(&uninterrupted));

    let split = dir.path().join("split");
    let mut first = flags.to_vec();
    first.extend_from_slice(&["--stop-after-epoch", "1"]);
    let stopped = train(&split, &first);
    assert!(stopped.status.success(), "{}", text(&stopped));
    assert!(String::from_utf8_lossy(&stopped.stdout).contains("stopped after epoch 1"));

    // Settings restated in a file (as csam compare does) must be the run's own.
    let split_dir = split.to_str().unwrap();
    let saved = std::fs::read_to_string(split.join("config.toml")).unwrap();
    let other = dir.path().join("other.toml");
    let changed: String = saved
        .lines()
        .map(|line| match line.starts_with("lr = ") {
            true => "lr = 0.0123".to_string(),
            false => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert_ne!(changed.trim(), saved.trim());
    std::fs::write(&other, changed).unwrap();
    let other = other.to_str().unwrap();
    let refused = csam(&["train", "--out", split_dir, "--resume", "--config", other]);
    assert!(
        !refused.status.success()
            && text(&refused).contains("differ from")
            && text(&refused).contains("(lr)"),
        "{}",
        text(&refused)
    );
    let same = dir.path().join("same.toml");
    std::fs::write(&same, &saved).unwrap();
    let same = same.to_str().unwrap();
    let second = [
        "train",
        "--out",
        split_dir,
        "--resume",
        "--config",
        same,
        "--quiet",
        "--stop-after-epoch",
        "2",
    ];
    let resumed = csam(&second);
    assert!(resumed.status.success(), "{}", text(&resumed));

    // No settings on the command line: the run's config.toml supplies them.
    let resumed = csam(&["train", "--out", split_dir, "--resume", "--quiet"]);
    assert!(resumed.status.success(), "{}", text(&resumed));
    let stdout = String::from_utf8_lossy(&resumed.stdout);
    assert!(
        !stdout.contains("epoch 1/3") && stdout.contains("epoch 3/3"),
        "{stdout}"
    );
    for file in ["model-last.safetensors", "model.safetensors"] {
        let a = std::fs::read(whole.join(file)).unwrap();
        let b = std::fs::read(split.join(file)).unwrap();
        assert!(a == b, "{file} differs after resume");
    }
}

#[test]
fn bench_prints_one_row_per_case() {
    let output = csam(&[
        "bench",
        "--models",
        "mlp",
        "--input",
        "fmnist",
        "--batch-size",
        "4",
        "--warmup",
        "0",
        "--steps",
        "1",
        "--device",
        "cpu",
    ]);
    assert!(output.status.success(), "{}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let rows: Vec<&str> = stdout.lines().filter(|l| l.starts_with("mlp ")).collect();
    assert_eq!(rows.len(), 3, "{stdout}");
    assert!(
        rows[0].contains("sgd") && rows[2].contains("csam"),
        "{stdout}"
    );
}

#[test]
fn init_starts_from_saved_weights_and_refuses_foreign_ones() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first");
    let trained = train(&first, &["--epochs", "2"]);
    assert!(trained.status.success(), "{}", text(&trained));
    let weights = first.join("model.safetensors");
    let summary = |run: &Path| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(run.join("summary.json")).unwrap()).unwrap()
    };

    // With a learning rate too small to move the weights, a run initialised from
    // the first run's best weights predicts like it: same test accuracy, far
    // above what a freshly initialised MLP reaches in one such epoch.
    let second = dir.path().join("second");
    let init = weights.to_str().unwrap();
    let resumed = train(&second, &["--epochs", "1", "--lr", "1e-9", "--init", init]);
    assert!(resumed.status.success(), "{}", text(&resumed));
    // lr 1e-9 moves weights by ~1e-10 a step, mostly below their float32
    // rounding: only an example whose two best logits tie within ~1e-8 could
    // change its prediction (none expected among 355).
    assert_eq!(
        summary(&second)["test"]["accuracy"],
        summary(&first)["test"]["accuracy"]
    );
    let fresh = dir.path().join("fresh");
    let untrained = train(&fresh, &["--epochs", "1", "--lr", "1e-9"]);
    assert!(untrained.status.success(), "{}", text(&untrained));
    assert_ne!(
        summary(&fresh)["test"]["accuracy"],
        summary(&first)["test"]["accuracy"]
    );

    // Fine-tuning with a fresh classifier: the hidden layers start from the
    // file, the output layer from the seed, so the first run's predictions
    // are gone; a model with BalCAL's second classifier, refused as a start
    // from the plain file (it has no ETF head), takes it the same way.
    let new_classifier = dir.path().join("new-classifier");
    let flags = ["--epochs", "1", "--lr", "1e-9", "--init", init];
    let renewed = train(
        &new_classifier,
        &[&flags[..], &["--init-new-classifier"]].concat(),
    );
    assert!(renewed.status.success(), "{}", text(&renewed));
    assert_ne!(
        summary(&new_classifier)["test"]["accuracy"],
        summary(&first)["test"]["accuracy"]
    );
    // Tensor by tensor: the classifier's (10 rows, one per class) are the
    // fresh run's, initialised from the same seed; every other is the file's.
    // lr 1e-9 over one epoch's ~12 steps moves an entry by about 1e-8 (its
    // gradients stay below 10 on normalised 8x8 inputs): 1e-6 bounds both.
    let tensors = |run: &Path| -> std::collections::HashMap<String, tch::Tensor> {
        tch::Tensor::read_safetensors(run.join("model-last.safetensors"))
            .unwrap()
            .into_iter()
            .collect()
    };
    let (renewed, fresh_start) = (tensors(&new_classifier), tensors(&fresh));
    let file: Vec<(String, tch::Tensor)> = tch::Tensor::read_safetensors(&weights).unwrap();
    let largest_gap = |a: &tch::Tensor, b: &tch::Tensor| (a - b).abs().max().double_value(&[]);
    let mut classifier = 0;
    for (name, saved) in &file {
        let now = &renewed[name];
        let (expected, whose) = match saved.size()[0] {
            10 => (&fresh_start[name], "the fresh run's"),
            _ => (saved, "the file's"),
        };
        classifier += usize::from(saved.size()[0] == 10);
        let gap = largest_gap(now, expected);
        assert!(gap < 1e-6, "{name}: {gap} away from {whose}");
        assert!(largest_gap(saved, &fresh_start[name]) > 1e-3, "{name}");
    }
    assert_eq!(classifier, 2, "the output layer's weight and bias");
    let balcal = &[&flags[..], &["--head", "balcal"]].concat();
    let refused = train(&dir.path().join("balcal-refused"), balcal);
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("balcal."),
        "{}",
        text(&refused)
    );
    let balcal_run = dir.path().join("balcal");
    let renewed = train(
        &balcal_run,
        &[&balcal[..], &["--init-new-classifier"]].concat(),
    );
    assert!(renewed.status.success(), "{}", text(&renewed));

    // Weights of another architecture, or no file at all: a clear error, no run.
    let foreign = dir.path().join("foreign");
    let refused = train(
        &foreign,
        &["--epochs", "1", "--model", "cnn", "--init", init],
    );
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("initial weights"),
        "{}",
        text(&refused)
    );
    let missing = train(
        &dir.path().join("missing"),
        &[
            "--epochs",
            "1",
            "--init",
            "/nonexistent/weights.safetensors",
        ],
    );
    assert!(!missing.status.success());
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("init"),
        "{}",
        text(&missing)
    );
}

#[test]
fn resume_of_a_finished_run_says_so_and_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let trained = train(&out, &["--epochs", "1"]);
    assert!(trained.status.success(), "{}", text(&trained));
    let summary = std::fs::read(out.join("summary.json")).unwrap();

    // The same command again with --resume, and the bare form a script uses.
    let run = out.to_str().unwrap();
    for again in [
        train(&out, &["--epochs", "1", "--resume"]),
        csam(&["train", "--out", run, "--resume", "--quiet"]),
    ] {
        assert!(again.status.success(), "{}", text(&again));
        let stdout = String::from_utf8_lossy(&again.stdout);
        let expected = format!(
            "{run} holds a finished run; nothing to train (results: {})",
            out.join("summary.json").display()
        );
        assert!(stdout.contains(&expected), "{}", text(&again));
        assert!(!stdout.contains("epoch 1/1"), "retrained: {stdout}");
    }
    assert_eq!(std::fs::read(out.join("summary.json")).unwrap(), summary);
    // Other settings are still refused, not reported as finished.
    let changed = train(&out, &["--epochs", "1", "--resume", "--lr", "0.5"]);
    assert!(!changed.status.success(), "{}", text(&changed));
    assert!(text(&changed).contains("differ"), "{}", text(&changed));
}

#[test]
fn nothing_to_resume_and_a_batch_above_the_training_split_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("missing");
    let started = train(&out, &["--epochs", "1", "--resume", "--batch-size", "5000"]);
    assert!(started.status.success(), "{}", text(&started));
    let stderr = String::from_utf8_lossy(&started.stderr);
    let expected = format!(
        "warning: nothing to resume in {} (no such directory); starting a new run from epoch 1",
        out.display()
    );
    assert!(stderr.contains(&expected), "{stderr}");
    assert!(
        stderr.contains("warning: batch size 5000 is larger than the")
            && stderr.contains("training examples"),
        "{stderr}"
    );
    assert!(out.join("summary.json").is_file());

    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let started = train(&empty, &["--epochs", "1", "--resume"]);
    assert!(started.status.success(), "{}", text(&started));
    let stderr = String::from_utf8_lossy(&started.stderr);
    assert!(stderr.contains("(the directory is empty)"), "{stderr}");
    assert!(!stderr.contains("batch size"), "{stderr}");
}

/// Two processes training into one run directory: the second is refused
/// with the first's pid; once the first is killed, its lock file is taken
/// over by a resume.
#[test]
fn a_second_writer_is_refused_and_a_killed_writers_lock_is_taken_over() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let run = out.to_str().unwrap();
    // Batches of 4: a few hundred steps per epoch, so the first process is
    // still training while the second starts.
    let mut args = vec!["train", "--out", run];
    args.extend_from_slice(DIGITS_MLP);
    args.extend_from_slice(&["--epochs", "1000", "--batch-size", "4"]);
    let mut first = Command::new(env!("CARGO_BIN_EXE_csam"))
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(first.stdout.take().unwrap()).lines();
    let recipe = lines.next().unwrap().unwrap();
    assert!(recipe.starts_with("recipe: model mlp"), "{recipe}");
    let line = lines.next().unwrap().unwrap();
    assert!(line.contains("epoch 1/1000"), "{line}");

    let second = csam(&["train", "--out", run, "--resume", "--quiet"]);
    let pid = format!("pid {} on host", first.id());
    support::assert_one_line_error(&second, &[run, "is in use by another csam process", &pid]);

    first.kill().unwrap();
    first.wait().unwrap();
    let lock = std::fs::read_to_string(out.join(".lock")).unwrap();
    assert!(lock.contains(&format!("\"pid\":{}", first.id())), "{lock}");
    let done = String::from_utf8_lossy(&std::fs::read(out.join("checkpoint/state.json")).unwrap())
        .into_owned();
    let state: serde_json::Value = serde_json::from_str(&done).unwrap();
    let next = (state["epochs_done"].as_u64().unwrap() + 1).to_string();
    let resumed = csam(&[
        "train",
        "--out",
        run,
        "--resume",
        "--quiet",
        "--stop-after-epoch",
        &next,
    ]);
    assert!(resumed.status.success(), "{}", text(&resumed));
    assert!(
        String::from_utf8_lossy(&resumed.stdout).contains(&format!("epoch {next}/1000")),
        "{}",
        text(&resumed)
    );
    assert!(
        !out.join(".lock").exists(),
        "the lock file is removed when done"
    );
}

/// `DIR/<name>/...` copies of the 20 bundled CIFAR-10 sample images (eight
/// class folders), for each name.
fn cifar_sample_folder(dir: &Path, names: &[&str]) {
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/cifar10-samples");
    for class in std::fs::read_dir(&samples).unwrap().flatten() {
        for name in names {
            let target = dir.join(name).join(class.file_name());
            std::fs::create_dir_all(&target).unwrap();
            for image in std::fs::read_dir(class.path()).unwrap().flatten() {
                std::fs::copy(image.path(), target.join(image.file_name())).unwrap();
            }
        }
    }
}

fn train_folder(data: &Path, out: &Path) -> Output {
    let spec = format!("folder:{}", data.display());
    csam(&[
        "train",
        "--data",
        &spec,
        "--model",
        "mlp",
        "--epochs",
        "1",
        "--val-size",
        "2",
        "--batch-size",
        "4",
        "--device",
        "cpu",
        "--threads",
        "1",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ])
}

fn summary_sizes(run: &Path) -> [u64; 3] {
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    ["n_train", "n_val", "n_test"].map(|key| summary[key].as_u64().unwrap())
}

#[test]
fn folder_data_trains_from_the_flat_and_the_split_layout() {
    let dir = tempfile::tempdir().unwrap();
    // Flat: DIR/<class>/*.png, split 80/20 (4 of the 20 images are test).
    cifar_sample_folder(dir.path(), &["flat"]);
    let trained = train_folder(&dir.path().join("flat"), &dir.path().join("run-flat"));
    assert!(trained.status.success(), "{}", text(&trained));
    assert_eq!(summary_sizes(&dir.path().join("run-flat")), [14, 2, 4]);
    // Split: DIR/train/<class> and DIR/test/<class>.
    cifar_sample_folder(&dir.path().join("split"), &["train", "test"]);
    let trained = train_folder(&dir.path().join("split"), &dir.path().join("run-split"));
    assert!(trained.status.success(), "{}", text(&trained));
    assert_eq!(summary_sizes(&dir.path().join("run-split")), [18, 2, 20]);
    // train/ without test/: the error names the missing folder and both fixes.
    cifar_sample_folder(&dir.path().join("half"), &["train"]);
    let refused = train_folder(&dir.path().join("half"), &dir.path().join("run-half"));
    support::assert_one_line_error(
        &refused,
        &["half/test not found", "also needs test/", "80/20"],
    );
    // test/ alone is an evaluation set.
    cifar_sample_folder(&dir.path().join("eval-only"), &["test"]);
    let refused = train_folder(&dir.path().join("eval-only"), &dir.path().join("run-eval"));
    support::assert_one_line_error(&refused, &["has only a test part", "not trained on"]);
}

#[test]
fn mimo_trains_evaluates_and_refuses_a_model_it_does_not_build() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mimo");
    let trained = train(
        &out,
        &[
            "--epochs",
            "2",
            "--ensemble",
            "mimo",
            "--ensemble-size",
            "2",
            "--batch-repetitions",
            "2",
            "--input-repetition",
            "0.25",
        ],
    );
    assert!(trained.status.success(), "{}", text(&trained));
    let config = std::fs::read_to_string(out.join("config.toml")).unwrap();
    assert!(
        config.contains("[model.ensemble]\nkind = \"mimo\"\nsize = 2\ninput_repetition = 0.25\nbatch_repetitions = 2"),
        "{config}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    // Learning, well above the 10 classes' chance (two epochs leave MIMO
    // behind the plain network, whose heads each read their own image): chance
    // scores 0.10 +- 0.016 on 355 test digits, 0.3 is 12 standard errors above.
    assert!(
        summary["test"]["accuracy"].as_f64().unwrap() > 0.3,
        "{summary}"
    );
    // Two images in, two heads out: the MLP's first layer reads 2 x 64
    // features, its classifier (after two hidden layers) gives 2 x 10 logits.
    let weights = tch::Tensor::read_safetensors(out.join("model-last.safetensors")).unwrap();
    let shape = |name: &str| {
        weights
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.size())
    };
    assert_eq!(shape("1.weight").unwrap()[1], 128);
    assert_eq!(shape("5.weight").unwrap()[0], 20);
    let run = out.to_str().unwrap();
    let eval = csam(&["eval", "--run", run, "--data", "digits", "--device", "cpu"]);
    assert!(eval.status.success(), "{}", text(&eval));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("eval-digits.json")).unwrap())
            .unwrap();
    assert_eq!(report["metrics"]["accuracy"], summary["test"]["accuracy"]);

    let refused = dir.path().join("refused");
    let output = train(&refused, &["--model", "resnet18", "--ensemble", "mimo"]);
    assert!(!output.status.success());
    let message = text(&output);
    assert!(
        message.contains("ensemble")
            && message.contains("resnet20")
            && message.contains("resnet18"),
        "{message}"
    );
    assert_eq!(
        message.lines().filter(|l| l.starts_with("error")).count(),
        1,
        "{message}"
    );
    assert!(!refused.exists());
}

/// AE-SAM's second-pass share, as the run logs it per epoch, follows its
/// rule `G_t >= mu_t + c_t sigma_t` (G the squared gradient norm, mu and
/// sigma its moving mean and deviation with delta = 0.9). Since `sigma_t^2`
/// holds `(1 - delta) (G_t - mu_t)^2`, `sigma_t >= 0.316 |G_t - mu_t|`: with
/// `c` held at -1000 every step passes (share exactly 1), at +1000 none
/// does (exactly 0; `G_t = mu_t` would need `G_t` to equal the previous
/// mean to the last bit); the authors' schedule from lambda1 = 0 to 1 lies
/// between.
#[test]
fn an_efficient_sam_policy_trains_and_logs_its_second_pass_share() {
    let dir = tempfile::tempdir().unwrap();
    let shares = |name: &str, lambdas: (&str, &str)| -> Vec<f64> {
        let out = dir.path().join(name);
        let trained = train(
            &out,
            &[
                "--epochs",
                "2",
                "--optimizer",
                "csam",
                "--sam-policy",
                "aesam",
                "--aesam-lambda1",
                lambdas.0,
                "--aesam-lambda2",
                lambdas.1,
            ],
        );
        assert!(trained.status.success(), "{}", text(&trained));
        let config = std::fs::read_to_string(out.join("config.toml")).unwrap();
        assert!(config.contains("kind = \"aesam\""), "{config}");
        std::fs::read_to_string(out.join("metrics.jsonl"))
            .unwrap()
            .lines()
            .map(|line| {
                let record: serde_json::Value = serde_json::from_str(line).unwrap();
                record["train"]["second_pass"].as_f64().unwrap()
            })
            .collect()
    };
    assert_eq!(shares("every", ("-1000", "-1000")), [1.0, 1.0]);
    assert_eq!(shares("none", ("1000", "1000")), [0.0, 0.0]);
    let scheduled = shares("scheduled", ("0", "1"));
    assert_eq!(scheduled.len(), 2);
    assert!(
        scheduled.iter().all(|&s| 0.0 < s && s < 1.0),
        "{scheduled:?}"
    );
}
