//! `csam`: train calibrated classifiers and measure calibration.
//!
//! A thin dispatcher: argument parsing lives in [`commands`], the work in the
//! `csam_calib` / `csam_train` libraries. Every failure is printed as one line
//! (`error: ...`, naming the file and the problem) with exit status 1.

mod commands;
mod progress;
mod table;

use std::process::ExitCode;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Command, CommandFactory, FromArgMatches, Parser};
use csam_lab::error::LabError;
use csam_nn::torch_message::without_backtrace;
use csam_train::train::{Remedy, TrainError};

#[derive(Parser)]
#[command(
    name = "csam",
    version,
    about = "Train neural classifiers that know how sure they are (SGD, SAM, CSAM) and measure their calibration."
)]
struct Cli {
    #[command(subcommand)]
    command: commands::Command,
}

fn main() -> ExitCode {
    // Before libtorch allocates anything (see the function's doc).
    csam_train::train::allocator::tune_allocator();
    let command = with_negative_numbers(Cli::command());
    let args: Vec<String> = std::env::args_os()
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    let matches = command
        .clone()
        .try_get_matches_from(&args)
        .unwrap_or_else(|e| with_switch_tip(e, &args, &command).exit());
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    match commands::run(cli.command, Cli::command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {}", one_line(&error));
            ExitCode::FAILURE
        }
    }
}

/// Every flag and positional argument that takes a value accepts a negative
/// number written as its own word (`--lr -1`, not only `--lr=-1`), so that
/// the value reaches the check that explains why it is wrong instead of
/// clap's "unexpected argument '-1' found". Set here once for every
/// subcommand's values.
fn with_negative_numbers(command: Command) -> Command {
    command.mut_subcommands(|sub| {
        sub.mut_args(|arg| {
            let takes_values = arg.get_action().takes_values();
            arg.allow_negative_numbers(takes_values)
        })
    })
}

/// clap's "unexpected argument 'false'" after a switch, with what to write
/// instead: switches took a value in earlier releases (`--augment false`),
/// and now are bare flags with a `--no-` opposite where one is useful.
fn with_switch_tip(mut error: clap::Error, args: &[String], command: &Command) -> clap::Error {
    let Some(ContextValue::String(value)) = error.get(ContextKind::InvalidArg).cloned() else {
        return error;
    };
    let switch = args
        .windows(2)
        .find(|pair| pair[1] == value && pair[0].starts_with("--"))
        .map(|pair| pair[0].trim_start_matches("--").to_string());
    let Some(switch) = switch.filter(|_| error.kind() == ErrorKind::UnknownArgument) else {
        return error;
    };
    if value != "true" && value != "false" {
        return error;
    }
    let name = switch.strip_prefix("no-").unwrap_or(&switch);
    let off = format!("no-{name}");
    let has_off = command
        .get_subcommands()
        .flat_map(Command::get_arguments)
        .any(|arg| arg.get_long() == Some(off.as_str()));
    let tip = match has_off {
        true => format!("--{switch} takes no value: write --{name} for true, --{off} for false"),
        false => {
            format!("--{switch} takes no value: write --{name} for true, leave it out for false")
        }
    };
    error.insert(
        ContextKind::Suggested,
        ContextValue::StyledStrs(vec![tip.into()]),
    );
    error
}

/// The error and its causes joined by ": " on one line ("test labels: l.npy: ..."),
/// skipping a cause whose text its parent already ends with (library errors
/// such as `CalibError::Io` print their source themselves). A libtorch error
/// among the causes loses its C++ stack trace here, whichever path it took,
/// and a refusal says which flag gets past it.
fn one_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let train_error = cause
            .downcast_ref::<TrainError>()
            .or_else(|| cause.downcast_ref::<LabError>()?.as_train());
        let text = match train_error {
            Some(TrainError::Refused { message, remedy }) => {
                format!("{message}; {}", remedy_in_flags(*remedy))
            }
            _ => cause.to_string(),
        };
        let text = without_backtrace(&text).replace('\n', " ");
        if line.ends_with(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// A library [`Remedy`] in the flags of the command line.
fn remedy_in_flags(remedy: Remedy) -> &'static str {
    match remedy {
        Remedy::Replace => "pass --force to replace it",
        Remedy::ResumeOrMove => "pass --resume to continue it, or choose another --out",
        Remedy::MoveOrDelete => "choose another --out, or delete the directory",
        Remedy::Move => "choose another --out",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_numbers_are_values_for_every_subcommand() {
        for args in [
            vec!["csam", "compare", "--lr", "-1"],
            vec!["csam", "sweep", "--gamma", "-0.5"],
            vec!["csam", "grid", "--lrs", "-1"],
            vec!["csam", "sharpness", "--run", "r", "--rho", "-1"],
        ] {
            assert!(
                Cli::command().try_get_matches_from(&args).is_err(),
                "{args:?}"
            );
            let matches = with_negative_numbers(Cli::command()).try_get_matches_from(&args);
            assert!(matches.is_ok(), "{args:?}: {matches:?}");
        }
        // train's settings flags, built from the key table, take negative
        // numbers themselves.
        let train = ["csam", "train", "--out", "r", "--gamma", "-1"];
        assert!(Cli::command().try_get_matches_from(train).is_ok());
        // A flag that takes no value still refuses one.
        let quiet = ["csam", "compare", "--quiet", "-1"];
        assert!(with_negative_numbers(Cli::command())
            .try_get_matches_from(quiet)
            .is_err());
    }

    #[test]
    fn one_line_joins_context_and_drops_repeated_sources() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        let calib = csam_calib::CalibError::Io {
            path: "p.npy".into(),
            source: io,
        };
        let error = anyhow::Error::new(calib).context("test predictions");
        assert_eq!(one_line(&error), "test predictions: p.npy: gone");
        let multi = anyhow::anyhow!("first\nsecond").context("outer");
        assert_eq!(one_line(&multi), "outer: first second");
        let torch = anyhow::anyhow!(
            "shape mismatch\nException raised from f at a.cpp:1 (most recent call first):\n\
             frame #0: c10::Error::Error() + 0x9d"
        )
        .context("eval");
        assert_eq!(one_line(&torch), "eval: shape mismatch");
    }
}
