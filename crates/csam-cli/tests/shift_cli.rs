//! `csam corrupt` and `csam eval --corruptions / --ood / --run ... / --mc-dropout`
//! end to end through the binary: digits with an MLP, and the bundled
//! Fashion-MNIST against the bundled MNIST (seconds on a CPU).

mod support;

use std::path::Path;
use std::process::{Command, Output};

use csam_data::corrupt::Corruption;
use csam_data::{self as data, DatasetSpec};
use csam_lab::shift::predictor::{Predictor, Sampling};
use csam_train::train::TrainedRun;
use ndarray::Array2;
use support::probabilities::mean_softmax_of_test_logits;
use support::text;

fn csam(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_csam"))
        .args(args)
        .output()
        .expect("the csam binary runs")
}

fn ok(args: &[&str]) -> String {
    let output = csam(args);
    assert!(output.status.success(), "{args:?}\n{}", text(&output));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn fails(args: &[&str]) -> String {
    let output = csam(args);
    assert!(
        !output.status.success(),
        "{args:?} should fail\n{}",
        text(&output)
    );
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn train(out: &Path, data: &str, seed: &str, dropout: &str) {
    ok(&[
        "train",
        "--out",
        out.to_str().unwrap(),
        "--data",
        data,
        "--model",
        "mlp",
        "--epochs",
        "1",
        "--val-size",
        "300",
        "--batch-size",
        "64",
        "--lr",
        "0.05",
        "--seed",
        seed,
        "--dropout",
        dropout,
        "--device",
        "cpu",
        "--threads",
        "1",
        "--quiet",
    ]);
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The shape in a `.npy` header, as text (`(1775, 8, 8, 1)`).
fn npy_shape(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap();
    let header = String::from_utf8_lossy(&bytes[10..128]).into_owned();
    let start = header.find("'shape': ").unwrap() + 9;
    header[start..start + header[start..].find(')').unwrap() + 1].to_string()
}

#[test]
fn corrupt_makes_frost_only_from_given_photographs() {
    let dir = tempfile::tempdir().unwrap();
    let (set, other) = (dir.path().join("digits-c"), dir.path().join("frost-c"));
    let set_s = set.to_str().unwrap();
    ok(&[
        "corrupt",
        "--data",
        "digits",
        "--out",
        set_s,
        "--severities",
        "2",
        "--quiet",
    ]);
    let meta = json(&set.join("meta.json"));
    let written: Vec<&str> = meta["corruptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let expected: Vec<&str> = Corruption::ALL
        .into_iter()
        .filter(|&c| c != Corruption::Frost)
        .map(Corruption::name)
        .collect();
    assert_eq!(written, expected);
    assert_eq!(written.len(), 14);
    for name in written {
        assert_eq!(
            npy_shape(&set.join(format!("{name}.npy"))),
            "(355, 8, 8, 1)"
        );
    }
    // Asked for, frost is refused with the reason, before anything is written.
    let refused = fails(&[
        "corrupt",
        "--data",
        "digits",
        "--out",
        other.to_str().unwrap(),
        "--corruptions",
        "snow,frost",
    ]);
    assert!(
        refused.contains("does not bundle") && refused.contains("--frost-images"),
        "{refused}"
    );
    assert!(!other.exists());

    // Given the photographs, frost is made like any other corruption.
    let textures = dir.path().join("frost-photos");
    std::fs::create_dir_all(&textures).unwrap();
    for (k, name) in csam_data::corrupt::frost_textures::FROST_FILES
        .iter()
        .enumerate()
    {
        let photo = image::RgbImage::from_fn(120, 100, |x, y| {
            image::Rgb([(x * 2) as u8, (y * 2) as u8, 200 + k as u8])
        });
        photo.save(textures.join(name)).unwrap();
    }
    ok(&[
        "corrupt",
        "--data",
        "digits",
        "--out",
        other.to_str().unwrap(),
        "--corruptions",
        "frost",
        "--frost-images",
        textures.to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(npy_shape(&other.join("frost.npy")), "(1775, 8, 8, 1)");
}

#[test]
fn corrupt_writes_what_eval_reads_back_per_corruption_and_severity() {
    let dir = tempfile::tempdir().unwrap();
    let (run, set) = (dir.path().join("run"), dir.path().join("digits-c"));
    train(&run, "digits", "0", "0.2");
    let (run_s, set_s) = (run.to_str().unwrap(), set.to_str().unwrap());
    let corrupt = [
        "corrupt",
        "--data",
        "digits",
        "--out",
        set_s,
        "--corruptions",
        "gaussian_noise,contrast",
        "--quiet",
    ];
    ok(&corrupt);
    assert_eq!(
        npy_shape(&set.join("gaussian_noise.npy")),
        "(1775, 8, 8, 1)"
    );
    assert_eq!(npy_shape(&set.join("labels.npy")), "(1775,)");
    assert!(fails(&corrupt).contains("--force"));

    let eval_corruptions = |extra: &[&str]| {
        let mut args = vec![
            "eval",
            "--run",
            run_s,
            "--corruptions",
            set_s,
            "--device",
            "cpu",
        ];
        args.extend_from_slice(extra);
        ok(&args)
    };
    let table = eval_corruptions(&[]);
    assert!(
        table.contains("gaussian_noise") && table.contains("acc s5"),
        "{table}"
    );
    let report = json(&run.join("eval-digits-corrupt-digits-c.json"));
    let c = &report["corruptions"];
    let names: Vec<&str> = c["corruptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["contrast", "gaussian_noise"]);
    for r in c["corruptions"].as_array().unwrap() {
        let severities = r["severities"].as_array().unwrap();
        let levels: Vec<u64> = severities
            .iter()
            .map(|s| s["severity"].as_u64().unwrap())
            .collect();
        assert_eq!(levels, [1, 2, 3, 4, 5]);
        assert!(severities.iter().all(|s| s["n"] == 355));
        let mean_acc = severities
            .iter()
            .map(|s| s["accuracy"].as_f64().unwrap())
            .sum::<f64>()
            / 5.0;
        // Pure-Rust f64: a mean of 5 accuracies <= 1 in possibly another order,
        // a few ulps (~1e-15); 1e-12 leaves 1000x.
        assert!((mean_acc - r["mean"]["accuracy"].as_f64().unwrap()).abs() < 1e-12);
    }
    assert_eq!(c["per_severity"][0]["n"], 710);

    // A set without meta.json (as the real CIFAR-10-C ships) is read as severities 1..5:
    // the same numbers come back.
    std::fs::remove_file(set.join("meta.json")).unwrap();
    let bare: serde_json::Value =
        serde_json::from_str(&eval_corruptions(&["--json", "--name", "bare"])).unwrap();
    assert_eq!(bare["corruptions"]["corruptions"], c["corruptions"]);

    // Corrupted images of another size are refused with the sizes named.
    let fashion_set = dir.path().join("fashion-c");
    let f = fashion_set.to_str().unwrap();
    ok(&[
        "corrupt",
        "--data",
        "fashion-mnist",
        "--out",
        f,
        "--corruptions",
        "contrast",
        "--severities",
        "1",
        "--quiet",
    ]);
    let error = fails(&[
        "eval",
        "--run",
        run_s,
        "--corruptions",
        f,
        "--device",
        "cpu",
    ]);
    assert!(
        error.contains("1x28x28") && error.contains("1x8x8"),
        "{error}"
    );

    // MC-Dropout and OOD against itself: the AUROC of a set against itself is 0.5.
    let out = ok(&[
        "eval",
        "--run",
        run_s,
        "--mc-dropout",
        "3",
        "--ood",
        "digits",
        "--device",
        "cpu",
        "--threads",
        "1",
        "--json",
    ]);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["method"], "mc-dropout");
    assert_eq!(report["passes"], 3);
    assert_eq!(report["ood"]["auroc_max_probability"], 0.5);
    assert_eq!(report["ood"]["auroc_entropy"], 0.5);
}

/// The ensemble's probabilities on the test split of `ood`, from the runs'
/// best weights; checked first to reproduce `in_probs` on `data`'s test split.
fn ensemble_probabilities_on(
    runs: &[&Path],
    data: &str,
    ood: &str,
    in_probs: &Array2<f64>,
) -> Array2<f64> {
    let test_split = |spec: &str| {
        data::load(&spec.parse::<DatasetSpec>().unwrap())
            .unwrap()
            .test
    };
    let reference = test_split(data);
    let loaded = runs
        .iter()
        .map(|run| TrainedRun::open(run).unwrap())
        .collect();
    let predictor = Predictor::new(
        loaded,
        &reference,
        data,
        Sampling::Deterministic,
        256,
        tch::Device::Cpu,
    )
    .unwrap();
    let again = predictor.probabilities(&reference).unwrap();
    let drift = (&again - in_probs)
        .mapv(f64::abs)
        .fold(0.0, |m: f64, &d| m.max(d));
    // Float32 logits of a 784-256-256-10 MLP, written at batch 64 on one
    // thread and recomputed here at batch 256: kernels may sum the 784, 256
    // and 256 terms in other orders, K * 1.19e-7 each, 1.5e-4 relative on
    // logits up to ~10, so probabilities (slope <= 1/4) may move by ~4e-4.
    // Wrong weights or normalisation move them by O(0.1).
    assert!(
        drift <= 1e-3,
        "the models give other test probabilities than test_logits.npy: {drift}"
    );
    predictor.probabilities(&test_split(ood)).unwrap()
}

fn max_probability(row: &[f64]) -> f64 {
    row.iter().copied().fold(0.0, f64::max)
}

/// `sum_k p_k ln p_k` with `0 ln 0 = 0`.
fn negative_entropy(row: &[f64]) -> f64 {
    row.iter().filter(|&&p| p > 0.0).map(|&p| p * p.ln()).sum()
}

fn scores(probs: &Array2<f64>, score: fn(&[f64]) -> f64) -> Vec<f64> {
    probs
        .rows()
        .into_iter()
        .map(|row| score(row.as_slice().unwrap()))
        .collect()
}

/// `P(s_in > s_ood) + P(s_in = s_ood) / 2` over every in-distribution / OOD pair,
/// counted pair by pair (in-distribution is the positive class).
fn pairwise_auroc(in_scores: &[f64], ood_scores: &[f64]) -> f64 {
    let mut wins = 0.0;
    for &s_in in in_scores {
        for &s_ood in ood_scores {
            wins += match s_in.partial_cmp(&s_ood) {
                Some(std::cmp::Ordering::Greater) => 1.0,
                Some(std::cmp::Ordering::Equal) => 0.5,
                _ => 0.0,
            };
        }
    }
    wins / (in_scores.len() * ood_scores.len()) as f64
}

#[test]
fn fashion_mnist_against_bundled_mnist_and_ensembles_of_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, digits) = (
        dir.path().join("a"),
        dir.path().join("b"),
        dir.path().join("digits"),
    );
    train(&a, "fashion-mnist", "0", "0");
    train(&b, "fashion-mnist", "1", "0");
    let (a_s, b_s) = (a.to_str().unwrap(), b.to_str().unwrap());
    let out = ok(&[
        "eval", "--run", a_s, "--run", b_s, "--ood", "mnist", "--device", "cpu", "--json",
    ]);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["method"], "ensemble");
    assert_eq!(report["weights"].as_array().unwrap().len(), 2);
    assert_eq!(report["data"], "fashion-mnist");
    assert_eq!(
        (&report["ood"]["n_in"], &report["ood"]["n_ood"]),
        (&2000.into(), &2000.into())
    );
    // The AUROCs recomputed here: in-distribution probabilities from the
    // logits `csam train` wrote for each run's test split, OOD probabilities
    // from the runs' models on MNIST through csam_train's Predictor (which must first
    // reproduce those test probabilities), each pair of scores counted by hand.
    // (Measured on a CPU: max probability 0.8687, entropy 0.9297.)
    let in_probs = mean_softmax_of_test_logits(&[&a, &b]);
    let ood_probs = ensemble_probabilities_on(&[&a, &b], "fashion-mnist", "mnist", &in_probs);
    for (score, f) in [
        (
            "auroc_max_probability",
            max_probability as fn(&[f64]) -> f64,
        ),
        ("auroc_entropy", negative_entropy),
    ] {
        let want = pairwise_auroc(&scores(&in_probs, f), &scores(&ood_probs, f));
        let got = report["ood"][score].as_f64().unwrap();
        // Pure-Rust f64 counts of 2000 x 2000 pairs (halves, exact) and one
        // division: ~1e-16 apart on equal probabilities. csam scores the test
        // split with its Predictor, this test with test_logits.npy: equal only
        // while the drift above is 0; else near-tied pairs may flip, 2.5e-7 each.
        assert!(
            (got - want).abs() <= 1e-12,
            "{score}: csam {got}, by hand {want}"
        );
    }
    assert!(a
        .join("eval-fashion-mnist-ensemble2-ood-mnist.json")
        .exists());

    let error = fails(&["eval", "--run", a_s, "--mc-dropout", "5", "--device", "cpu"]);
    assert!(error.contains("trained without dropout"), "{error}");
    train(&digits, "digits", "0", "0");
    let error = fails(&[
        "eval",
        "--run",
        a_s,
        "--run",
        digits.to_str().unwrap(),
        "--device",
        "cpu",
    ]);
    assert!(error.contains("must share data and model"), "{error}");
}

#[test]
fn eval_on_data_of_another_shape_is_one_short_line() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("digits");
    train(&run, "digits", "0", "0");
    let run_s = run.to_str().unwrap();
    // 28x28 images against a run trained on 8x8 ones (both one channel).
    let output = csam(&[
        "eval",
        "--run",
        run_s,
        "--data",
        "fashion-mnist",
        "--device",
        "cpu",
    ]);
    let line = support::assert_one_line_error(
        &output,
        &[
            "fashion-mnist (1x28x28 images, 10 classes) does not fit the run",
            "trained on digits",
            "shape",
        ],
    );
    assert!(line.len() < 600 && !line.contains("frame #"), "{line}");
    // 8x8 images labelled with 3 of the run's 10 classes: a subset of its
    // classes, evaluated with the run's 10 outputs.
    let (images, labels) = (dir.path().join("x.npy"), dir.path().join("y.npy"));
    csam_calib::io::npy::write_u8(&images, &[6, 8, 8, 1], &[7; 6 * 64]).unwrap();
    csam_calib::io::npy::write_i64(&labels, &[0, 1, 2, 0, 1, 2]).unwrap();
    let spec = format!("npy:{},{}", images.display(), labels.display());
    let report = ok(&[
        "eval", "--run", run_s, "--data", &spec, "--name", "subset", "--json",
    ]);
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["n"], 6, "{report}");
    // A label beyond the run's classes is refused before a classifier of
    // its size is built (10^9 rows would not fit in memory).
    csam_calib::io::npy::write_i64(&labels, &[0, 1, 2, 0, 1, 1_000_000_000]).unwrap();
    let output = csam(&["eval", "--run", run_s, "--data", &spec, "--device", "cpu"]);
    let line = support::assert_one_line_error(
        &output,
        &[
            "has labels up to 1000000000 but the run",
            "outputs 10 classes (labels 0..=9, digits)",
        ],
    );
    assert!(line.len() < 600 && !line.contains("frame #"), "{line}");
}
