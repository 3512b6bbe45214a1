//! `csam grid` end to end through the binary on 2 lrs x 1 weight decay, the
//! bundled digits, an MLP, 1 epoch and one seed: the table, the chosen pair
//! and the `csam compare` line, a rerun that retrains nothing, a different
//! grid refused, and bad lists refused before anything is written.

mod support;

use std::path::Path;
use std::process::Output;

use support::{assert_one_line_error, assert_rerun_reuses, csam, text};

/// The grid's base: digits, an MLP, 1 epoch, one weight decay, the CPU.
const BASE: &str =
    "grid --data digits --model mlp --epochs 1 --weight-decays 5e-4 --device cpu --quiet";

fn grid(out: &Path, lrs: &str, extra: &[&str]) -> Output {
    // `--lrs=-1`, not `--lrs -1`: a value may start with a minus sign.
    let lrs = format!("--lrs={lrs}");
    let out = out.to_str().unwrap();
    let mut args: Vec<&str> = BASE.split_whitespace().collect();
    args.extend([lrs.as_str(), "--out", out]);
    args.extend_from_slice(extra);
    csam(&args)
}

fn results(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap()
}

#[test]
fn grid_chooses_the_most_accurate_pair_and_reuses_its_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("grid");
    let first = grid(&out, "0.01,0.1", &[]);
    assert!(first.status.success(), "{}", text(&first));
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert!(
        stdout.contains("[1/2] lr 0.01 wd 5e-4 seed 0: training into"),
        "{stdout}"
    );

    let json = results(&out);
    assert_eq!(json["schema"], "csam-grid/1");
    let optim = &json["settings"]["base"]["optim"];
    assert!(
        optim.get("lr").is_none() && optim.get("weight_decay").is_none(),
        "{json}"
    );
    let runs = json["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for (run, lr) in runs.iter().zip(["0.01", "0.1"]) {
        assert_eq!(run["lr"].to_string(), lr);
        assert_eq!(run["seed"], 0);
        let config = std::fs::read_to_string(
            out.join(run["run_dir"].as_str().unwrap())
                .join("config.toml"),
        )
        .unwrap();
        assert!(config.contains(&format!("lr = {lr}")), "{config}");
        assert!(config.contains("weight_decay = 0.0005"), "{config}");
    }

    // The chosen pair is the run with the higher validation accuracy (one
    // seed: its mean), the lower NLL on a tie.
    let score = |run: &serde_json::Value| {
        let val = &run["val"];
        (
            val["accuracy"].as_f64().unwrap(),
            -val["nll"].as_f64().unwrap(),
        )
    };
    let winner = if score(&runs[1]) > score(&runs[0]) {
        &runs[1]
    } else {
        &runs[0]
    };
    let lr = winner["lr"].to_string();
    assert_eq!(json["best"]["lr"], winner["lr"]);
    assert_eq!(json["best"]["weight_decay"], 5e-4);
    assert!(
        stdout.contains(&format!(
            "chosen: lr {lr}, weight decay 5e-4 (validation accuracy"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "use it: csam compare --lr {lr} --weight-decay 5e-4 --data digits --epochs 1\n"
        )),
        "{stdout}"
    );

    // The table: a row per lr, the chosen one in bold, and the same in table.md.
    let table = std::fs::read_to_string(out.join("table.md")).unwrap();
    assert!(stdout.contains(&table), "{stdout}");
    let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("| ")).collect();
    assert_eq!(
        rows[0],
        "| lr | weight decay | val accuracy (%) | val NLL | val ECE (%) | best epoch | seconds |"
    );
    assert_eq!(rows.len(), 3, "{table}");
    for (row, run) in rows[1..].iter().zip(runs) {
        let accuracy = format!("{:.2}", 100.0 * run["val"]["accuracy"].as_f64().unwrap());
        let chosen = run["lr"] == winner["lr"];
        let expected = match chosen {
            true => format!("| **{0}** | **5e-4** | **{accuracy}** | ", run["lr"]),
            false => format!("| {0} | 5e-4 | {accuracy} | ", run["lr"]),
        };
        assert!(row.starts_with(&expected), "{row} vs {expected}");
    }

    // A rerun trains nothing and gives the same results.
    let model = out.join("runs/lr0.1-wd5e-4-seed0/model.safetensors");
    assert_rerun_reuses(&model, 2, || grid(&out, "0.01,0.1", &[]));
    let rerun = results(&out);
    assert_eq!(
        (&rerun["cells"], &rerun["best"]),
        (&json["cells"], &json["best"])
    );

    // Another grid in the same directory is refused.
    let different = grid(&out, "0.01", &[]);
    assert_one_line_error(&different, &["different grid", "lrs", "--out"]);
}

#[test]
fn bad_lists_are_refused_in_one_line_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("grid");
    for (lrs, extra, needles) in [
        ("0", &[][..], &["lr = \"0\"", "> 0"][..]),
        ("-1", &[], &["lr = \"-1\"", "> 0"]),
        ("", &[], &["lrs", "name at least one value"]),
        (
            "0.1",
            &["--weight-decays="],
            &["weight_decays", "name at least one value"],
        ),
        ("0.1,0.1", &[], &["lrs", "listed twice"]),
        ("0.1", &["--weight-decays=-1"], &["weight_decay = \"-1\""]),
    ] {
        let output = grid(&out, lrs, extra);
        assert_one_line_error(&output, needles);
        assert!(!out.exists(), "nothing written for --lrs {lrs:?} {extra:?}");
    }
    // A value that is not a number is clap's refusal.
    let output = grid(&out, "0.1,a", &[]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output));
    assert!(text(&output).contains("\"a\" is not a number"));
    assert!(!out.exists());
}
