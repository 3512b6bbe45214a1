//! The conventions of the command line, through the binary: shell
//! completions and manual pages generated from the same declarations as
//! `--help` (and so from the model registry and the methods), switches with
//! their `--no-` opposites, and timm's spellings writing the same run.

mod support;

use std::path::Path;

use csam_nn::model::ModelKind;
use support::{csam, text, DIGITS_MLP};

/// The subcommands `csam --help` lists.
fn subcommands() -> Vec<String> {
    let help = csam(&["--help"]);
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let names: Vec<String> = help
        .lines()
        .skip_while(|line| !line.starts_with("Commands:"))
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        // A subcommand's line is indented by two; wrapped text by more.
        .filter(|line| !line.starts_with("   "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(String::from)
        .collect();
    assert!(names.len() > 5, "{help}");
    names
}

#[test]
fn completions_offer_the_registrys_models_in_every_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let output = csam(&["completions", shell]);
        assert!(output.status.success(), "{shell}: {}", text(&output));
        let script = String::from_utf8_lossy(&output.stdout);
        for command in subcommands() {
            assert!(script.contains(&command), "{shell} lacks {command}");
        }
        if shell == "bash" {
            let models: Vec<&str> = ModelKind::all().map(|kind| kind.name()).collect();
            assert!(models.len() > 10);
            for model in models {
                assert!(script.contains(model), "bash lacks the model {model}");
            }
            for value in ["csam", "focal", "looksam", "cosine", "adaece", "mixup"] {
                assert!(script.contains(value), "bash lacks {value}");
            }
            for flag in ["--m-sharpness", "--no-augment", "--clip-grad", "--sched"] {
                assert!(script.contains(flag), "bash lacks {flag}");
            }
            // A data set's --data completes the bundled data sets, not file
            // names (bench's --data is a folder of images).
            let lines: Vec<&str> = script.lines().collect();
            let subcommand = |i: usize| {
                lines[..i]
                    .iter()
                    .rev()
                    .find_map(|line| line.trim().strip_prefix("csam__subcmd__"))
                    .unwrap_or_default()
            };
            let data: Vec<usize> = (0..lines.len())
                .filter(|&i| lines[i].trim() == "--data)" && subcommand(i) != "bench)")
                .collect();
            assert!(
                data.len() >= 6,
                "train, compare, sweep, grid, eval, corrupt: {data:?}"
            );
            for i in data {
                let case = lines[i + 1];
                assert!(
                    case.contains("compgen -W") && case.contains("fashion-mnist-full"),
                    "{}: {case}",
                    subcommand(i)
                );
            }
        }
    }
    let unknown = csam(&["completions", "tcsh"]);
    assert!(!unknown.status.success());
}

/// What bash offers for the word `word` after `csam SUBCOMMAND FLAG`, from
/// the script `csam completions bash` prints, driven as bash's programmable
/// completion calls it.
fn bash_completes(script: &Path, subcommand: &str, flag: &str, word: &str) -> Vec<String> {
    let program = format!(
        "source {script:?}; COMP_WORDS=(csam {subcommand} {flag} {word:?}); COMP_CWORD=3; \
         _csam csam {word:?} {flag} 2>/dev/null; printf '%s\\n' \"${{COMPREPLY[@]}}\""
    );
    let output = std::process::Command::new("bash")
        .args(["-c", &program])
        .output()
        .expect("bash runs");
    assert!(output.status.success(), "{}", text(&output));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn bash_completes_a_composed_method_part_by_part() {
    let output = csam(&["completions", "bash"]);
    assert!(output.status.success(), "{}", text(&output));
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("csam.bash");
    std::fs::write(&script, &output.stdout).unwrap();
    // The part after the last '+' or ',' is completed; the rest is kept.
    let offered = bash_completes(&script, "compare", "--methods", "sgd,focal+cs");
    assert_eq!(offered, ["sgd,focal+csam"]);
    let offered = bash_completes(&script, "grid", "--method", "focal+");
    assert!(
        offered.len() > 10 && offered.iter().all(|word| word.starts_with("focal+")),
        "{offered:?}"
    );
    assert!(
        offered.iter().any(|word| word == "focal+csam"),
        "{offered:?}"
    );
    // A first part is completed as before.
    let offered = bash_completes(&script, "compare", "--methods", "foc");
    assert_eq!(offered, ["focal"]);
}

#[test]
fn the_man_pages_render_and_name_every_subcommand() {
    let page = csam(&["man"]);
    assert!(page.status.success(), "{}", text(&page));
    let page = String::from_utf8_lossy(&page.stdout);
    assert!(
        page.starts_with(".ie") || page.contains(".TH csam"),
        "{page}"
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man1");
    let written = csam(&["man", "--out", out.to_str().unwrap()]);
    assert!(written.status.success(), "{}", text(&written));
    let top = std::fs::read_to_string(out.join("csam.1")).unwrap();
    for command in subcommands() {
        assert!(
            top.contains(&format!("csam\\-{command}(1)")),
            "csam.1 lacks {command}"
        );
        let page = std::fs::read_to_string(out.join(format!("csam-{command}.1")))
            .unwrap_or_else(|e| panic!("csam-{command}.1: {e}"));
        assert!(
            page.contains(&format!(".TH csam-{command} 1")),
            "csam-{command}.1"
        );
    }
    // Where groff is installed, every page renders without a warning.
    for entry in std::fs::read_dir(&out).unwrap() {
        let path = entry.unwrap().path();
        let args = ["-man", "-Tutf8", "-ww", "-z"];
        if let Ok(rendered) = std::process::Command::new("groff")
            .args(args)
            .arg(&path)
            .output()
        {
            assert!(
                rendered.status.success() && rendered.stderr.is_empty(),
                "{path:?}: {}",
                text(&rendered)
            );
        }
    }
    let train = std::fs::read_to_string(out.join("csam-train.1")).unwrap();
    assert!(train.contains("m\\-sharpness") && train.contains("no\\-augment"));
}

/// The config.toml a one-epoch run of `args` writes into `dir/name`.
fn spec_of(dir: &Path, name: &str, args: &[&str]) -> String {
    let out = dir.join(name);
    let mut all = vec!["train", "--epochs", "1", "--optimizer", "sam"];
    all.extend_from_slice(DIGITS_MLP);
    all.extend_from_slice(args);
    all.extend_from_slice(&["--out", out.to_str().unwrap()]);
    let output = csam(&all);
    assert!(output.status.success(), "{args:?}: {}", text(&output));
    std::fs::read_to_string(out.join("config.toml")).unwrap()
}

#[test]
fn timms_spellings_and_the_old_m_write_the_same_run() {
    let dir = tempfile::tempdir().unwrap();
    let long = [
        "--batch-size",
        "32",
        "--schedule",
        "step",
        "--clip",
        "1.5",
        "--dropout",
        "0.2",
        "--m-sharpness",
        "8",
        "--no-augment",
    ];
    let spec = spec_of(dir.path(), "long", &long);
    for setting in [
        "batch_size = 32",
        "kind = \"step\"",
        "clip = 1.5",
        "dropout = 0.2",
        "m = 8",
        "augment = false",
    ] {
        assert!(spec.contains(setting), "{setting}: {spec}");
    }
    let aliases = [
        "-b",
        "32",
        "--sched",
        "step",
        "--clip-grad",
        "1.5",
        "--drop",
        "0.2",
        "--m",
        "8",
        "--augment",
        "--no-augment",
    ];
    assert_eq!(spec_of(dir.path(), "aliases", &aliases), spec);
    // --output is --out (the directory the run is written into).
    let output = dir.path().join("output");
    let mut all = vec!["train", "--epochs", "1", "--optimizer", "sam"];
    all.extend_from_slice(DIGITS_MLP);
    all.extend_from_slice(&long);
    all.extend_from_slice(&["--output", output.to_str().unwrap()]);
    let trained = csam(&all);
    assert!(trained.status.success(), "{}", text(&trained));
    assert_eq!(
        std::fs::read_to_string(output.join("config.toml")).unwrap(),
        spec
    );
    // --augment last: the same run but for its augmentation.
    let augmented = spec_of(dir.path(), "augment", &[&long[..], &["--augment"]].concat());
    assert!(augmented.contains("augment = true"), "{augmented}");
    assert_eq!(augmented.replace("augment = true", "augment = false"), spec);
}

#[test]
fn a_switch_given_a_value_says_what_to_write() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let output = csam(&[
        "train",
        "--out",
        out.to_str().unwrap(),
        "--augment",
        "false",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output);
    assert!(stderr.contains("--no-augment for false"), "{stderr}");
    let output = csam(&["compare", "--quiet", "true"]);
    assert!(
        text(&output).contains("--quiet takes no value"),
        "{}",
        text(&output)
    );
}

/// The help of `csam COMMAND FLAG`, its words joined by single spaces (so
/// that text wrapped to the terminal's width reads as written).
fn help_words(command: &str, flag: &str) -> (String, String) {
    let output = csam(&[command, flag]);
    assert!(
        output.status.success(),
        "{command} {flag}: {}",
        text(&output)
    );
    let help = String::from_utf8_lossy(&output.stdout).into_owned();
    let words = help.split_whitespace().collect::<Vec<_>>().join(" ");
    (help, words)
}

/// `-h` gives every run-spec key its one-line summary, `--help` adds its
/// details and sources, and no line of either is wider than 200 characters.
#[test]
fn help_is_short_with_h_and_carries_the_sources_with_help() {
    for command in subcommands() {
        for flag in ["-h", "--help"] {
            let (help, _) = help_words(&command, flag);
            for line in help.lines() {
                assert!(
                    line.chars().count() <= 200,
                    "csam {command} {flag}: {} characters: {line}",
                    line.chars().count()
                );
            }
        }
    }
    let (_, short) = help_words("train", "-h");
    let (_, long) = help_words("train", "--help");
    let keys = csam_train::spec::keys::KEYS;
    for key in keys {
        assert!(short.contains(key.summary()), "-h lacks {}", key.name);
        assert!(long.contains(key.summary()), "--help lacks {}", key.name);
        if let Some(details) = key.details() {
            assert!(!short.contains(details), "-h shows {}'s details", key.name);
            assert!(
                long.contains(details),
                "--help lacks {}'s details",
                key.name
            );
        }
    }
    assert!(keys.iter().filter(|key| key.details().is_some()).count() > 30);
}
