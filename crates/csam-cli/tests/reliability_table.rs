//! docs/reliability.md, checked: every user-facing input of `csam` (each
//! flag of each subcommand, each config key, each kind of file read) with a
//! bad value, run through the binary, must end with a non-zero exit and one
//! `error:` line, never a panic; the table of those errors must equal the
//! committed doc. Regenerate it with
//! `CSAM_UPDATE_DOCS=1 cargo test -p csam-cli --test reliability_table`.
//!
//! Adding an input is one line in [`CASES`]; a flag of a covered command
//! that has no row fails [`every_flag_and_config_key_has_a_row`].

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use csam_train::train::lock::{LockOwner, RunLock};
use support::{copy_run, csam, flip_last_byte, text, DIGITS_MLP};

/// One bad input: the command, the input (a flag, `config: KEY`, or a file
/// kind), the bad value as the table shows it, and the arguments after
/// `csam`, with the placeholders of [`expand`].
struct Case {
    command: &'static str,
    input: &'static str,
    bad: &'static str,
    args: &'static [&'static str],
}

const fn case(
    command: &'static str,
    input: &'static str,
    bad: &'static str,
    args: &'static [&'static str],
) -> Case {
    Case {
        command,
        input,
        bad,
        args,
    }
}

/// The commands the table covers, in its order.
const COMMANDS: &[&str] = &[
    "train",
    "eval",
    "metrics",
    "bench",
    "compare",
    "sharpness",
    "corrupt",
    "sweep",
    "grid",
    "launch",
    "report",
    "completions",
    "man",
];

/// Placeholders (see [`expand`]): `{train}` a valid small training command
/// into the fresh directory `{run}`; `config:TOML` a config file of a valid
/// run plus the TOML given; `methods:TOML` a methods file of the TOML
/// given (`--methods-file`); `{eval}`, `{metrics}`, `{val}`, `{bench}`,
/// `{compare}`, `{sharpness}`, `{corrupt}`, `{sweep}`, `{grid}` valid base
/// arguments; `{dir}` the directory of prepared bad
/// files (see [`prepare`]); `{fx}` the CLI's fixtures, `{calib}` the
/// calibration crate's; `{trained}` a finished run.
#[rustfmt::skip]
const CASES: &[Case] = &[
    case("train", "--config", "missing file", &["{train}", "--config", "{dir}/missing.toml"]),
    case("train", "--config", "TOML syntax error", &["{train}", "--config", "{dir}/bad.toml"]),
    case("train", "--out", "path below a regular file", &["{train}", "--out", "{dir}/notes.txt/run"]),
    case("train", "--out", "finished run", &["{train}", "--out", "{trained}"]),
    case("train", "--out", "directory of foreign files", &["{train}", "--out", "{dir}/foreign"]),
    case("train", "--out", "unfinished run without --resume", &["{train}", "--out", "{dir}/corrupt-state"]),
    case("train", "--out", "another process trains into it", &["{train}", "--resume", "--out", "{dir}/busy"]),
    case("train", "--resume", "a value", &["{train}", "--resume=yes"]),
    case("train", "--resume", "corrupt checkpoint/state.json", &["{train}", "--resume", "--epochs", "2", "--out", "{dir}/corrupt-state"]),
    case("train", "--resume", "torn checkpoint weights", &["{train}", "--resume", "--epochs", "2", "--out", "{dir}/torn-weights"]),
    case("train", "--resume", "corrupt metrics.jsonl", &["{train}", "--resume", "--epochs", "2", "--out", "{dir}/corrupt-log"]),
    case("train", "--resume", "runtime.toml: tensorboard = \"maybe\"", &["{train}", "--resume", "--epochs", "2", "--out", "{dir}/bad-runtime"]),
    case("train", "--resume", "corrupt event file", &["{train}", "--resume", "--epochs", "2", "--out", "{dir}/corrupt-events"]),
    case("train", "--resume", "changed settings", &["{train}", "--resume", "--epochs", "2", "--out", "{dir}/resumable", "--lr", "0.5"]),
    case("train", "--resume", "metrics.jsonl emptied", &["{train}", "--resume", "--epochs", "3", "--out", "{dir}/log-emptied"]),
    case("train", "--resume", "metrics.jsonl deleted", &["{train}", "--resume", "--epochs", "3", "--out", "{dir}/log-deleted"]),
    case("train", "--resume", "metrics.jsonl: last line repeated", &["{train}", "--resume", "--epochs", "3", "--out", "{dir}/log-repeated"]),
    case("train", "--resume", "metrics.jsonl: an epoch renumbered", &["{train}", "--resume", "--epochs", "3", "--out", "{dir}/log-renumbered"]),
    case("train", "--resume", "config.toml: lr edited", &["{train}", "--resume", "--epochs", "3", "--out", "{dir}/config-lr"]),
    case("train", "--resume", "config.toml: fewer epochs than done", &["{train}", "--resume", "--epochs", "3", "--out", "{dir}/config-epochs"]),
    case("train", "--resume", "checkpoint weights: one flipped byte", &["{train}", "--resume", "--epochs", "3", "--out", "{dir}/flipped-weights"]),
    case("train", "--resume", "checkpoint/state.json deleted after 2 epochs", &["{train}", "--resume", "--epochs", "3", "--out", "{dir}/no-state"]),
    case("train", "--data", "unknown name", &["{train}", "--data", "nonsense"]),
    case("train", "--data", "idx: empty directory", &["{train}", "--data", "idx:{dir}/empty"]),
    case("train", "--data", "cifar10: empty directory", &["{train}", "--data", "cifar10:{dir}/empty"]),
    case("train", "--data", "npy: not .npy files", &["{train}", "--data", "npy:{dir}/garbage.npy,{dir}/garbage.npy"]),
    case("train", "--data", "folder: empty directory", &["{train}", "--data", "folder:{dir}/empty"]),
    case("train", "--data", "folder: train/ without test/", &["{train}", "--data", "folder:{dir}/half"]),
    case("train", "--data", "folder: test/ only", &["{train}", "--data", "folder:{dir}/evalset"]),
    case("train", "--data", "folder: one image", &["{train}", "--data", "folder:{dir}/one"]),
    case("train", "--val-size", "0", &["{train}", "--val-size", "0"]),
    case("train", "--val-size", "the whole training set", &["{train}", "--val-size", "100000"]),
    case("train", "--seed", "-1", &["{train}", "--seed", "-1"]),
    case("train", "--split-seed", "-1", &["{train}", "--split-seed", "-1"]),
    case("train", "--model", "resnet7", &["{train}", "--model", "resnet7"]),
    case("train", "--model", "vit-s16 on 8x8 images", &["{train}", "--model", "vit-s16"]),
    case("train", "--mlp-hidden", "0", &["{train}", "--mlp-hidden", "64,0"]),
    case("train", "--mlp-hidden", "weights beyond the memory", &["{train}", "--mlp-hidden", "100000000000,256"]),
    case("train", "--dropout", "1", &["{train}", "--dropout", "1"]),
    case("train", "--precision", "fp64", &["{train}", "--precision", "fp64"]),
    case("train", "--precision", "fp16 (bSAM)", &["{train}", "--precision", "fp16", "--optimizer", "bsam"]),
    case("train", "--memory-format", "nhwc", &["{train}", "--model", "cnn", "--memory-format", "nhwc"]),
    case("train", "--memory-format", "channels_last with mlp (no convolutions)", &["{train}", "--memory-format", "channels_last"]),
    case("train", "--sync-batch-norm", "with mlp (no BatchNorm)", &["{train}", "--sync-batch-norm"]),
    case("train", "--sync-batch-norm", "one process (not data-parallel)", &["{train}", "--model", "cnn", "--sync-batch-norm"]),
    case("train", "--no-sync-batch-norm", "a value", &["{train}", "--no-sync-batch-norm=yes"]),
    case("train", "--drop-path", "1 (vit-ti16)", &["{train}", "--model", "vit-ti16", "--drop-path", "1"]),
    case("train", "--drop-path", "with mlp (not read)", &["{train}", "--drop-path", "0.1"]),
    case("train", "--shakedrop", "1 (pyramidnet110-a48)", &["{train}", "--model", "pyramidnet110-a48", "--shakedrop", "1"]),
    case("train", "--shakedrop", "with mlp (not read)", &["{train}", "--shakedrop", "0.5"]),
    case("train", "--epochs", "0", &["{train}", "--epochs", "0"]),
    case("train", "--batch-size", "0", &["{train}", "--batch-size", "0"]),
    case("train", "--lr", "-0.1", &["{train}", "--lr", "-0.1"]),
    case("train", "--lr", "NaN", &["{train}", "--lr", "NaN"]),
    case("train", "--momentum", "1", &["{train}", "--momentum", "1"]),
    case("train", "--nesterov", "without momentum", &["{train}", "--nesterov", "--momentum", "0"]),
    case("train", "--no-nesterov", "a value", &["{train}", "--no-nesterov=yes"]),
    case("train", "--weight-decay", "-1", &["{train}", "--weight-decay", "-1"]),
    case("train", "--base-optimizer", "lamb", &["{train}", "--base-optimizer", "lamb"]),
    case("train", "--schedule", "linear", &["{train}", "--schedule", "linear"]),
    case("train", "--warmup-epochs", "= --epochs", &["{train}", "--warmup-epochs", "1"]),
    case("train", "--min-lr", "above --lr", &["{train}", "--min-lr", "1"]),
    case("train", "--step-size", "0", &["{train}", "--schedule", "step", "--step-size", "0"]),
    case("train", "--decay-factor", "2", &["{train}", "--schedule", "step", "--decay-factor", "2"]),
    case("train", "--optimizer", "lamb", &["{train}", "--optimizer", "lamb"]),
    case("train", "--rho", "0 with SAM", &["{train}", "--optimizer", "sam", "--rho", "0"]),
    case("train", "--eta", "-1 with ASAM", &["{train}", "--optimizer", "asam", "--eta", "-1"]),
    case("train", "--gamma", "-1 with CSAM", &["{train}", "--optimizer", "csam", "--gamma", "-1"]),
    case("train", "--csam-detach", "a value (false)", &["{train}", "--csam-detach", "false"]),
    case("train", "--no-csam-detach", "a value", &["{train}", "--no-csam-detach=yes"]),
    case("train", "--asam-scale-all", "with SAM (not read)", &["{train}", "--optimizer", "sam", "--asam-scale-all"]),
    case("train", "--no-asam-scale-all", "a value", &["{train}", "--no-asam-scale-all=yes"]),
    case("train", "--m-sharpness", "0", &["{train}", "--optimizer", "sam", "--m-sharpness", "0"]),
    case("train", "--m", "0 (the old name of --m-sharpness)", &["{train}", "--optimizer", "sam", "--m", "0"]),
    case("train", "--sam-every", "0", &["{train}", "--optimizer", "sam", "--sam-every", "0"]),
    case("train", "--global-ascent", "with SGD (not read)", &["{train}", "--global-ascent"]),
    case("train", "--no-global-ascent", "a value", &["{train}", "--no-global-ascent=yes"]),
    case("train", "--sam-policy", "lookahead (SAM)", &["{train}", "--optimizer", "sam", "--sam-policy", "lookahead"]),
    case("train", "--rst-p", "1.5 (RST)", &["{train}", "--optimizer", "sam", "--sam-policy", "rst", "--rst-p", "1.5"]),
    case("train", "--rst-p-end", "2 (RST)", &["{train}", "--optimizer", "sam", "--sam-policy", "rst", "--rst-p-end", "2"]),
    case("train", "--looksam-k", "0 (LookSAM)", &["{train}", "--optimizer", "csam", "--sam-policy", "looksam", "--looksam-k", "0"]),
    case("train", "--looksam-alpha", "-1 (LookSAM)", &["{train}", "--optimizer", "csam", "--sam-policy", "looksam", "--looksam-alpha=-1"]),
    case("train", "--aesam-delta", "1 (AE-SAM)", &["{train}", "--optimizer", "sam", "--sam-policy", "aesam", "--aesam-delta", "1"]),
    case("train", "--aesam-lambda1", "inf (AE-SAM)", &["{train}", "--optimizer", "sam", "--sam-policy", "aesam", "--aesam-lambda1", "inf"]),
    case("train", "--aesam-lambda2", "a (AE-SAM)", &["{train}", "--optimizer", "sam", "--sam-policy", "aesam", "--aesam-lambda2", "a"]),
    case("train", "--esam-beta", "0 (ESAM)", &["{train}", "--optimizer", "csam", "--sam-policy", "esam", "--esam-beta", "0"]),
    case("train", "--esam-gamma", "1.5 (ESAM)", &["{train}", "--optimizer", "sam", "--sam-policy", "esam", "--esam-gamma", "1.5"]),
    case("train", "--subbatch-fraction", "0 (sub-batch ascent)", &["{train}", "--optimizer", "csam", "--sam-policy", "subbatch", "--subbatch-fraction", "0"]),
    case("train", "--sam-policy", "subbatch with --loss crl", &["{train}", "--optimizer", "csam", "--sam-policy", "subbatch", "--loss", "crl"]),
    case("train", "--sam-policy", "msam with --loss crl", &["{train}", "--optimizer", "csam", "--sam-policy", "msam", "--loss", "crl"]),
    case("train", "--sam-policy", "msam with --optimizer asam", &["{train}", "--optimizer", "asam", "--sam-policy", "msam"]),
    case("train", "--sam-policy", "msam with --momentum 0", &["{train}", "--optimizer", "csam", "--sam-policy", "msam", "--momentum", "0"]),
    case("train", "--sam-policy", "msam with --nesterov", &["{train}", "--optimizer", "sam", "--sam-policy", "msam", "--nesterov"]),
    case("train", "--sam-policy", "msam with --base-optimizer adamw", &["{train}", "--optimizer", "csam", "--sam-policy", "msam", "--base-optimizer", "adamw"]),
    case("train", "--msam-direction", "sideways (Momentum-SAM)", &["{train}", "--optimizer", "csam", "--sam-policy", "msam", "--msam-direction", "sideways"]),
    case("train", "--msam-direction", "without Momentum-SAM (not read)", &["{train}", "--optimizer", "csam", "--msam-direction", "ascent"]),
    case("train", "--esam-beta", "without ESAM (not read)", &["{train}", "--optimizer", "sam", "--esam-beta", "0.5"]),
    case("train", "--mixing", "mixup with ESAM's selection", &["{train}", "--optimizer", "sam", "--sam-policy", "esam", "--mixing", "mixup"]),
    case("train", "--ensemble", "mimo with ESAM's selection", &["{train}", "--optimizer", "csam", "--sam-policy", "esam", "--ensemble", "mimo"]),
    case("train", "--rho", "with SGD (not read)", &["{train}", "--rho", "0.1"]),
    case("train", "--gamma", "with SAM (not read)", &["{train}", "--optimizer", "sam", "--gamma", "2"]),
    case("train", "--step-size", "with cosine (not read)", &["{train}", "--step-size", "30"]),
    case("train", "--mlp-hidden", "with resnet20 (not read)", &["{train}", "--model", "resnet20", "--mlp-hidden", "64"]),
    case("train", "--loss", "unknown", &["{train}", "--loss", "hinge"]),
    case("train", "--focal-gamma", "-1 (focal)", &["{train}", "--loss", "focal", "--focal-gamma", "-1"]),
    case("train", "--focal-gamma", "with cross entropy (not read)", &["{train}", "--focal-gamma", "2"]),
    case("train", "--smoothing", "1 (label smoothing)", &["{train}", "--loss", "label-smoothing", "--smoothing", "1"]),
    case("train", "--vasso-theta", "0 (VASSO)", &["{train}", "--optimizer", "vasso", "--vasso-theta", "0"]),
    case("train", "--bsam-beta2", "1 (bSAM)", &["{train}", "--optimizer", "bsam", "--bsam-beta2", "1"]),
    case("train", "--bsam-damping", "0 (bSAM)", &["{train}", "--optimizer", "bsam", "--bsam-damping", "0"]),
    case("train", "--bsam-init-precision", "0 (bSAM)", &["{train}", "--optimizer", "bsam", "--bsam-init-precision", "0"]),
    case("train", "--bsam-data-factor", "-1 (bSAM)", &["{train}", "--optimizer", "bsam", "--bsam-data-factor", "-1"]),
    case("train", "--base-optimizer", "adamw with bSAM", &["{train}", "--optimizer", "bsam", "--base-optimizer", "adamw"]),
    case("train", "--m-sharpness", "with bSAM (not read)", &["{train}", "--optimizer", "bsam", "--m-sharpness", "16"]),
    case("train", "--margin", "0 (MbLS)", &["{train}", "--loss", "mbls", "--margin", "0"]),
    case("train", "--margin-weight", "-1 (MbLS)", &["{train}", "--loss", "mbls", "--margin-weight", "-1"]),
    case("train", "--margin", "-1 (ACLS)", &["{train}", "--loss", "acls", "--margin", "-1"]),
    case("train", "--acls-pos-lambda", "-1 (ACLS)", &["{train}", "--loss", "acls", "--acls-pos-lambda", "-1"]),
    case("train", "--acls-neg-lambda", "-1 (ACLS)", &["{train}", "--loss", "acls", "--acls-neg-lambda", "-1"]),
    case("train", "--cpc-bdc-weight", "-1 (CPC)", &["{train}", "--loss", "cpc", "--cpc-bdc-weight", "-1"]),
    case("train", "--cpc-bec-weight", "-1 (CPC)", &["{train}", "--loss", "cpc", "--cpc-bec-weight", "-1"]),
    case("train", "--loss", "cpc on 2 classes", &["{train}", "--loss", "cpc", "--data", "folder:{dir}/two-classes", "--val-size", "1"]),
    case("train", "--mmce-lambda", "-2 (MMCE)", &["{train}", "--loss", "mmce", "--mmce-lambda", "-2"]),
    case("train", "--mdca-beta", "-1 (MDCA)", &["{train}", "--loss", "mdca", "--mdca-beta", "-1"]),
    case("train", "--adafocal-lambda", "0 (AdaFocal)", &["{train}", "--loss", "adafocal", "--adafocal-lambda", "0"]),
    case("train", "--adafocal-initial-gamma", "30 (above its max 20)", &["{train}", "--loss", "adafocal", "--adafocal-initial-gamma", "30"]),
    case("train", "--adafocal-gamma-max", "0.1 (below the switch 0.2)", &["{train}", "--loss", "adafocal", "--adafocal-gamma-max", "0.1"]),
    case("train", "--adafocal-gamma-min", "0.5 (above -switch)", &["{train}", "--loss", "adafocal", "--adafocal-gamma-min", "0.5"]),
    case("train", "--adafocal-switch", "0", &["{train}", "--loss", "adafocal", "--adafocal-switch", "0"]),
    case("train", "--adafocal-bins", "0", &["{train}", "--loss", "adafocal", "--adafocal-bins", "0"]),
    case("train", "--crl-weight", "-1 (CRL)", &["{train}", "--loss", "crl", "--crl-weight", "-1"]),
    case("train", "--mixing", "mixup with CRL", &["{train}", "--loss", "crl", "--mixing", "mixup"]),
    case("train", "--mixing", "unknown", &["{train}", "--mixing", "cutmix"]),
    case("train", "--mixup-alpha", "-1 (mixup)", &["{train}", "--mixing", "mixup", "--mixup-alpha", "-1"]),
    case("train", "--mixup-alpha", "0 (MIT-L)", &["{train}", "--mixing", "mit-l", "--mixup-alpha", "0"]),
    case("train", "--mit-margin", "1 (MIT-L)", &["{train}", "--mixing", "mit-l", "--mit-margin", "1"]),
    case("train", "--mixup-alpha", "without mixing (not read)", &["{train}", "--mixup-alpha", "0.4"]),
    case("train", "--head", "unknown", &["{train}", "--head", "cosine"]),
    case("train", "--head", "balcal with mixup", &["{train}", "--head", "balcal", "--mixing", "mixup"]),
    case("train", "--head", "balcal on features narrower than the classes", &["{train}", "--head", "balcal", "--model", "mlp", "--mlp-hidden", "4"]),
    case("train", "--balcal-lambda", "1.5 (BalCAL)", &["{train}", "--head", "balcal", "--balcal-lambda", "1.5"]),
    case("train", "--balcal-delta", "0 (BalCAL)", &["{train}", "--head", "balcal", "--balcal-delta", "0"]),
    case("train", "--balcal-delta", "with the linear head (not read)", &["{train}", "--balcal-delta", "0.9"]),
    case("train", "--ensemble", "unknown", &["{train}", "--ensemble", "deep"]),
    case("train", "--ensemble", "batch-ensemble on vit-ti16 (not read)", &["{train}", "--model", "vit-ti16", "--ensemble", "batch-ensemble"]),
    case("train", "--ensemble", "batch-ensemble with mixup", &["{train}", "--ensemble", "batch-ensemble", "--mixing", "mixup"]),
    case("train", "--ensemble", "batch-ensemble with balcal", &["{train}", "--ensemble", "batch-ensemble", "--head", "balcal"]),
    case("train", "--ensemble-size", "0 (BatchEnsemble)", &["{train}", "--ensemble", "batch-ensemble", "--ensemble-size", "0"]),
    case("train", "--ensemble-size", "with one network (not read)", &["{train}", "--ensemble-size", "4"]),
    case("train", "--ensemble-size", "weights beyond the memory", &["{train}", "--ensemble", "batch-ensemble", "--ensemble-size", "100000000000"]),
    case("train", "--random-sign-init", "1.5 (BatchEnsemble)", &["{train}", "--ensemble", "batch-ensemble", "--random-sign-init", "1.5"]),
    case("train", "--ensemble", "mimo on resnet18 (not read)", &["{train}", "--model", "resnet18", "--ensemble", "mimo"]),
    case("train", "--ensemble", "mimo with crl", &["{train}", "--ensemble", "mimo", "--loss", "crl"]),
    case("train", "--ensemble-size", "0 (MIMO)", &["{train}", "--ensemble", "mimo", "--ensemble-size", "0"]),
    case("train", "--input-repetition", "1.5 (MIMO)", &["{train}", "--ensemble", "mimo", "--input-repetition", "1.5"]),
    case("train", "--input-repetition", "with batch-ensemble (not read)", &["{train}", "--ensemble", "batch-ensemble", "--input-repetition", "0.5"]),
    case("train", "--batch-repetitions", "0 (MIMO)", &["{train}", "--ensemble", "mimo", "--batch-repetitions", "0"]),
    case("train", "--bayesian", "unknown", &["{train}", "--bayesian", "laplace"]),
    case("train", "--bayesian", "mean-field on vit-ti16 (not read)", &["{train}", "--model", "vit-ti16", "--bayesian", "mean-field"]),
    case("train", "--bayesian", "mean-field with the default weight decay", &["{train}", "--bayesian", "mean-field"]),
    case("train", "--bayesian", "mean-field with batch-ensemble", &["{train}", "--bayesian", "mean-field", "--weight-decay", "0", "--ensemble", "batch-ensemble"]),
    case("train", "--bayesian", "mean-field with mixup", &["{train}", "--bayesian", "mean-field", "--weight-decay", "0", "--mixing", "mixup"]),
    case("train", "--bayesian", "mean-field with bsam", &["{train}", "--bayesian", "mean-field", "--weight-decay", "0", "--optimizer", "bsam"]),
    case("train", "--bayesian", "rank1 without members", &["{train}", "--bayesian", "rank1", "--weight-decay", "0"]),
    case("train", "--bayesian", "rank1 with mimo", &["{train}", "--bayesian", "rank1", "--weight-decay", "0", "--ensemble", "mimo"]),
    case("train", "--bayesian", "rank1 with the default weight decay", &["{train}", "--bayesian", "rank1", "--ensemble", "batch-ensemble"]),
    case("train", "--prior-std", "0 (mean-field)", &["{train}", "--bayesian", "mean-field", "--weight-decay", "0", "--prior-std", "0"]),
    case("train", "--prior-std", "-0.1 (rank1)", &["{train}", "--bayesian", "rank1", "--ensemble", "batch-ensemble", "--weight-decay", "0", "--prior-std=-0.1"]),
    case("train", "--prior-std", "with point estimates (not read)", &["{train}", "--prior-std", "0.1"]),
    case("train", "--posterior-samples", "0 (mean-field)", &["{train}", "--bayesian", "mean-field", "--weight-decay", "0", "--posterior-samples", "0"]),
    case("train", "--stddev-init", "0 (mean-field)", &["{train}", "--bayesian", "mean-field", "--weight-decay", "0", "--stddev-init", "0"]),
    case("train", "--stddev-init", "1000 (mean-field)", &["{train}", "--bayesian", "mean-field", "--weight-decay", "0", "--stddev-init", "1000"]),
    case("train", "--tied-prior-mean", "with rank1 (not read)", &["{train}", "--bayesian", "rank1", "--ensemble", "batch-ensemble", "--weight-decay", "0", "--tied-prior-mean"]),
    case("train", "--no-tied-prior-mean", "a value", &["{train}", "--bayesian", "mean-field", "--weight-decay", "0", "--no-tied-prior-mean=yes"]),
    case("train", "--kl-annealing-epochs", "-1 (mean-field)", &["{train}", "--bayesian", "mean-field", "--weight-decay", "0", "--kl-annealing-epochs", "-1"]),
    case("train", "--shuffle", "a value (false)", &["{train}", "--shuffle", "false"]),
    case("train", "--bins", "0", &["{train}", "--bins", "0"]),
    case("train", "--edges", "unknown", &["{train}", "--edges", "open"]),
    case("train", "--adaptive", "unknown", &["{train}", "--adaptive", "quantile"]),
    case("train", "--clip", "0", &["{train}", "--clip", "0"]),
    case("train", "--augment", "a value (false)", &["{train}", "--augment", "false"]),
    case("train", "--no-augment", "a value", &["{train}", "--no-augment=yes"]),
    case("train", "--no-shuffle", "a value", &["{train}", "--no-shuffle=yes"]),
    case("train", "--tensorboard", "a value (false)", &["{train}", "--tensorboard", "false"]),
    case("train", "--no-tensorboard", "a value", &["{train}", "--no-tensorboard=yes"]),
    case("train", "--log-every-n-steps", "-1", &["{train}", "--log-every-n-steps", "-1"]),
    case("train", "--resident-data", "a value (false)", &["{train}", "--resident-data", "false"]),
    case("train", "--resident-data", "with an imagenet: source", &["train", "--out", "{run}", "--epochs", "1", "--model", "mlp", "--data", "imagenet:{dir}/empty", "--resident-data"]),
    case("train", "--no-resident-data", "a value", &["{train}", "--no-resident-data=yes"]),
    case("train", "--device", "tpu", &["{train}", "--device", "tpu"]),
    case("train", "--best-metric", "f1", &["{train}", "--best-metric", "f1"]),
    case("train", "--threads", "0", &["{train}", "--threads", "0"]),
    case("train", "--workers", "0", &["{train}", "--workers", "0"]),
    case("train", "--dist-timeout", "0", &["{train}", "--dist-timeout", "0"]),
    case("train", "--init", "missing file", &["{train}", "--init", "{dir}/missing.safetensors"]),
    case("train", "--init-new-classifier", "without --init", &["{train}", "--init-new-classifier"]),
    case("train", "--no-init-new-classifier", "a value", &["{train}", "--no-init-new-classifier=yes"]),
    case("train", "--init", "not safetensors", &["{train}", "--init", "{dir}/garbage.safetensors"]),
    case("train", "--model", "torchscript without its file", &["{train}", "--model", "torchscript"]),
    case("train", "--model", "torchscript:FILE, missing file", &["{train}", "--model", "torchscript:{dir}/missing.pt"]),
    case("train", "--model", "torchscript:FILE, not TorchScript", &["{train}", "--model", "torchscript:{dir}/garbage.safetensors"]),
    case("train", "--script", "with a csam architecture", &["{train}", "--script", "{dir}/garbage.safetensors"]),
    case("train", "--script", "besides torchscript:FILE", &["{train}", "--model", "torchscript:{dir}/garbage.safetensors", "--script", "{dir}/garbage.safetensors"]),
    case("train", "--quiet", "a value", &["{train}", "--quiet=yes"]),
    case("train", "--track-theory", "with SGD", &["{train}", "--track-theory"]),
    case("train", "--no-track-theory", "a value", &["{train}", "--no-track-theory=yes"]),
    case("train", "config: (file)", "unknown key", &["{train}", "config:lrr = 0.1"]),
    case("train", "config: data", "3", &["{train}", "config:data = 3"]),
    case("train", "config: val_size", "0", &["{train}", "config:val_size = 0"]),
    case("train", "config: seed", "-1", &["{train}", "config:seed = -1"]),
    case("train", "config: model", "\"resnet7\"", &["{train}", "config:model = \"resnet7\""]),
    case("train", "config: mlp_hidden", "[0]", &["{train}", "config:mlp_hidden = [0]"]),
    case("train", "config: dropout", "1.0", &["{train}", "config:dropout = 1.0"]),
    case("train", "config: precision", "\"half\"", &["{train}", "config:precision = \"half\""]),
    case("train", "config: memory_format", "\"channels_last\" with vit-ti16", &["{train}", "config:model = \"vit-ti16\"\nmemory_format = \"channels_last\""]),
    case("train", "config: sync_batch_norm", "\"yes\"", &["{train}", "config:model = \"cnn\"\nsync_batch_norm = \"yes\""]),
    case("train", "config: drop_path", "-0.1 (vit-s16)", &["{train}", "config:model = \"vit-s16\"\ndrop_path = -0.1"]),
    case("train", "config: shakedrop", "0.5 with resnet20 (not read)", &["{train}", "config:model = \"resnet20\"\nshakedrop = 0.5"]),
    case("train", "config: epochs", "0", &["{train}", "config:epochs = 0"]),
    case("train", "config: epochs", "\"two\"", &["{train}", "config:epochs = \"two\""]),
    case("train", "config: epochs", "-3", &["{train}", "config:epochs = -3"]),
    case("train", "config: batch_size", "0", &["{train}", "config:batch_size = 0"]),
    case("train", "config: lr", "-0.1", &["{train}", "config:lr = -0.1"]),
    case("train", "config: momentum", "1.0", &["{train}", "config:momentum = 1.0"]),
    case("train", "config: nesterov", "\"yes\"", &["{train}", "config:nesterov = \"yes\""]),
    case("train", "config: weight_decay", "-1.0", &["{train}", "config:weight_decay = -1.0"]),
    case("train", "config: base_optimizer", "\"lamb\"", &["{train}", "config:base_optimizer = \"lamb\""]),
    case("train", "config: schedule", "\"linear\"", &["{train}", "config:schedule = \"linear\""]),
    case("train", "config: warmup_epochs", "5 (epochs 1)", &["{train}", "config:warmup_epochs = 5"]),
    case("train", "config: min_lr", "1.0 (lr 0.05)", &["{train}", "config:min_lr = 1.0"]),
    case("train", "config: step_size", "0", &["{train}", "config:schedule = \"step\"\nstep_size = 0"]),
    case("train", "config: decay_factor", "2.0", &["{train}", "config:schedule = \"step\"\ndecay_factor = 2.0"]),
    case("train", "config: optimizer", "\"lamb\"", &["{train}", "config:optimizer = \"lamb\""]),
    case("train", "config: rho", "0.0 (SAM)", &["{train}", "config:optimizer = \"sam\"\nrho = 0.0"]),
    case("train", "config: eta", "-1.0 (ASAM)", &["{train}", "config:optimizer = \"asam\"\neta = -1.0"]),
    case("train", "config: gamma", "-1.0 (CSAM)", &["{train}", "config:optimizer = \"csam\"\ngamma = -1.0"]),
    case("train", "config: csam_detach", "1", &["{train}", "config:csam_detach = 1"]),
    case("train", "config: asam_scale_all", "\"yes\" (ASAM)", &["{train}", "config:optimizer = \"asam\"\nasam_scale_all = \"yes\""]),
    case("train", "config: m", "0 (SAM)", &["{train}", "config:optimizer = \"sam\"\nm = 0"]),
    case("train", "config: sam_every", "0", &["{train}", "config:sam_every = 0"]),
    case("train", "config: global_ascent", "\"yes\"", &["{train}", "config:optimizer = \"sam\"\nglobal_ascent = \"yes\""]),
    case("train", "config: sam_policy", "\"lookahead\"", &["{train}", "config:optimizer = \"sam\"\nsam_policy = \"lookahead\""]),
    case("train", "config: sam_policy", "\"rst\" (SGD)", &["{train}", "config:sam_policy = \"rst\""]),
    case("train", "config: sam_every", "2 with LookSAM", &["{train}", "config:optimizer = \"csam\"\nsam_policy = \"looksam\"\nsam_every = 2"]),
    case("train", "config: m", "16 with AE-SAM", &["{train}", "config:optimizer = \"sam\"\nsam_policy = \"aesam\"\nm = 16"]),
    case("train", "config: m", "16 with ESAM", &["{train}", "config:optimizer = \"sam\"\nsam_policy = \"esam\"\nm = 16"]),
    case("train", "config: m", "16 with Momentum-SAM", &["{train}", "config:optimizer = \"csam\"\nsam_policy = \"msam\"\nm = 16"]),
    case("train", "config: sam_every", "2 with ESAM", &["{train}", "config:optimizer = \"csam\"\nsam_policy = \"esam\"\nsam_every = 2"]),
    case("train", "config: rst_p", "1.5 (RST)", &["{train}", "config:optimizer = \"sam\"\nsam_policy = \"rst\"\nrst_p = 1.5"]),
    case("train", "config: rst_p_end", "-0.5 (RST)", &["{train}", "config:optimizer = \"sam\"\nsam_policy = \"rst\"\nrst_p_end = -0.5"]),
    case("train", "config: looksam_k", "0 (LookSAM)", &["{train}", "config:optimizer = \"sam\"\nsam_policy = \"looksam\"\nlooksam_k = 0"]),
    case("train", "config: looksam_alpha", "-0.7 (LookSAM)", &["{train}", "config:optimizer = \"sam\"\nsam_policy = \"looksam\"\nlooksam_alpha = -0.7"]),
    case("train", "config: aesam_delta", "1.0 (AE-SAM)", &["{train}", "config:optimizer = \"sam\"\nsam_policy = \"aesam\"\naesam_delta = 1.0"]),
    case("train", "config: aesam_lambda1", "nan (AE-SAM)", &["{train}", "config:optimizer = \"sam\"\nsam_policy = \"aesam\"\naesam_lambda1 = nan"]),
    case("train", "config: aesam_lambda2", "inf (AE-SAM)", &["{train}", "config:optimizer = \"sam\"\nsam_policy = \"aesam\"\naesam_lambda2 = inf"]),
    case("train", "config: esam_beta", "1.5 (ESAM)", &["{train}", "config:optimizer = \"sam\"\nsam_policy = \"esam\"\nesam_beta = 1.5"]),
    case("train", "config: esam_gamma", "0.0 (ESAM)", &["{train}", "config:optimizer = \"sam\"\nsam_policy = \"esam\"\nesam_gamma = 0.0"]),
    case("train", "config: msam_direction", "up (Momentum-SAM)", &["{train}", "config:optimizer = \"csam\"\nsam_policy = \"msam\"\nmsam_direction = \"up\""]),
    case("train", "config: subbatch_fraction", "1.5 (sub-batch ascent)", &["{train}", "config:optimizer = \"sam\"\nsam_policy = \"subbatch\"\nsubbatch_fraction = 1.5"]),
    case("train", "config: track_theory", "true (SGD)", &["{train}", "config:track_theory = true"]),
    case("train", "config: clip", "-1.0", &["{train}", "config:clip = -1.0"]),
    case("train", "config: augment", "\"no\"", &["{train}", "config:augment = \"no\""]),
    case("train", "config: shuffle", "\"no\"", &["{train}", "config:shuffle = \"no\""]),
    case("train", "config: split_seed", "-3", &["{train}", "config:split_seed = -3"]),
    case("train", "config: device", "\"tpu\"", &["{train}", "config:device = \"tpu\""]),
    case("train", "config: best_metric", "\"f1\"", &["{train}", "config:best_metric = \"f1\""]),
    case("train", "config: threads", "0", &["{train}", "config:threads = 0"]),
    case("train", "config: workers", "0", &["{train}", "config:workers = 0"]),
    case("train", "config: tensorboard", "\"no\"", &["{train}", "config:tensorboard = \"no\""]),
    case("train", "config: log_every_n_steps", "0.5", &["{train}", "config:log_every_n_steps = 0.5"]),
    case("train", "config: resident_data", "\"no\"", &["{train}", "config:resident_data = \"no\""]),
    case("train", "config: init", "missing file", &["{train}", "config:init = \"/nonexistent/w.safetensors\""]),
    case("train", "config: script", "missing file (torchscript)", &["{train}", "config:model = \"torchscript\"\nscript = \"/nonexistent/net.pt\""]),
    case("train", "config: init_new_classifier", "without init", &["{train}", "config:init_new_classifier = true"]),
    case("train", "config: loss", "\"hinge\"", &["{train}", "config:loss = \"hinge\""]),
    case("train", "config: focal_gamma", "-1.0 (focal)", &["{train}", "config:loss = \"focal\"\nfocal_gamma = -1.0"]),
    case("train", "config: smoothing", "1.0 (label smoothing)", &["{train}", "config:loss = \"label-smoothing\"\nsmoothing = 1.0"]),
    case("train", "config: vasso_theta", "1.5 (VASSO)", &["{train}", "config:optimizer = \"vasso\"\nvasso_theta = 1.5"]),
    case("train", "config: bsam_beta2", "1.0 (bSAM)", &["{train}", "config:optimizer = \"bsam\"\nbsam_beta2 = 1.0"]),
    case("train", "config: bsam_damping", "-0.1 (bSAM)", &["{train}", "config:optimizer = \"bsam\"\nbsam_damping = -0.1"]),
    case("train", "config: bsam_init_precision", "0.0 (bSAM)", &["{train}", "config:optimizer = \"bsam\"\nbsam_init_precision = 0.0"]),
    case("train", "config: bsam_data_factor", "0.0 (bSAM)", &["{train}", "config:optimizer = \"bsam\"\nbsam_data_factor = 0.0"]),
    case("train", "config: clip", "1.0 with bSAM", &["{train}", "config:optimizer = \"bsam\"\nclip = 1.0"]),
    case("train", "config: margin", "0.0 (MbLS)", &["{train}", "config:loss = \"mbls\"\nmargin = 0.0"]),
    case("train", "config: margin_weight", "-1.0 (MbLS)", &["{train}", "config:loss = \"mbls\"\nmargin_weight = -1.0"]),
    case("train", "config: acls_pos_lambda", "-1.0 (ACLS)", &["{train}", "config:loss = \"acls\"\nacls_pos_lambda = -1.0"]),
    case("train", "config: acls_neg_lambda", "-1.0 (ACLS)", &["{train}", "config:loss = \"acls\"\nacls_neg_lambda = -1.0"]),
    case("train", "config: cpc_bdc_weight", "-1.0 (CPC)", &["{train}", "config:loss = \"cpc\"\ncpc_bdc_weight = -1.0"]),
    case("train", "config: cpc_bec_weight", "-1.0 (CPC)", &["{train}", "config:loss = \"cpc\"\ncpc_bec_weight = -1.0"]),
    case("train", "config: mmce_lambda", "-2.0 (MMCE)", &["{train}", "config:loss = \"mmce\"\nmmce_lambda = -2.0"]),
    case("train", "config: mdca_beta", "-1.0 (MDCA)", &["{train}", "config:loss = \"mdca\"\nmdca_beta = -1.0"]),
    case("train", "config: adafocal_lambda", "0.0 (AdaFocal)", &["{train}", "config:loss = \"adafocal\"\nadafocal_lambda = 0.0"]),
    case("train", "config: adafocal_initial_gamma", "30.0 (AdaFocal)", &["{train}", "config:loss = \"adafocal\"\nadafocal_initial_gamma = 30.0"]),
    case("train", "config: adafocal_gamma_max", "0.1 (AdaFocal)", &["{train}", "config:loss = \"adafocal\"\nadafocal_gamma_max = 0.1"]),
    case("train", "config: adafocal_gamma_min", "0.5 (AdaFocal)", &["{train}", "config:loss = \"adafocal\"\nadafocal_gamma_min = 0.5"]),
    case("train", "config: adafocal_switch", "0.0 (AdaFocal)", &["{train}", "config:loss = \"adafocal\"\nadafocal_switch = 0.0"]),
    case("train", "config: adafocal_bins", "0 (AdaFocal)", &["{train}", "config:loss = \"adafocal\"\nadafocal_bins = 0"]),
    case("train", "config: crl_weight", "-1.0 (CRL)", &["{train}", "config:loss = \"crl\"\ncrl_weight = -1.0"]),
    case("train", "config: mixing", "\"cutmix\"", &["{train}", "config:mixing = \"cutmix\""]),
    case("train", "config: head", "\"cosine\"", &["{train}", "config:head = \"cosine\""]),
    case("train", "config: balcal_lambda", "-0.5 (BalCAL)", &["{train}", "config:head = \"balcal\"\nbalcal_lambda = -0.5"]),
    case("train", "config: balcal_delta", "-1.0 (BalCAL)", &["{train}", "config:head = \"balcal\"\nbalcal_delta = -1.0"]),
    case("train", "config: ensemble", "\"deep\"", &["{train}", "config:ensemble = \"deep\""]),
    case("train", "config: ensemble_size", "0 (BatchEnsemble)", &["{train}", "config:ensemble = \"batch-ensemble\"\nensemble_size = 0"]),
    case("train", "config: random_sign_init", "nan (BatchEnsemble)", &["{train}", "config:ensemble = \"batch-ensemble\"\nrandom_sign_init = nan"]),
    case("train", "config: input_repetition", "-0.5 (MIMO)", &["{train}", "config:ensemble = \"mimo\"\ninput_repetition = -0.5"]),
    case("train", "config: batch_repetitions", "0 (MIMO)", &["{train}", "config:ensemble = \"mimo\"\nbatch_repetitions = 0"]),
    case("train", "config: bayesian", "\"laplace\"", &["{train}", "config:bayesian = \"laplace\""]),
    case("train", "config: prior_std", "-1.0 (mean-field)", &["{train}", "config:bayesian = \"mean-field\"\nweight_decay = 0.0\nprior_std = -1.0"]),
    case("train", "config: posterior_samples", "0 (mean-field)", &["{train}", "config:bayesian = \"mean-field\"\nweight_decay = 0.0\nposterior_samples = 0"]),
    case("train", "config: stddev_init", "-0.001 (mean-field)", &["{train}", "config:bayesian = \"mean-field\"\nweight_decay = 0.0\nstddev_init = -0.001"]),
    case("train", "config: tied_prior_mean", "a number (mean-field)", &["{train}", "config:bayesian = \"mean-field\"\nweight_decay = 0.0\ntied_prior_mean = 1"]),
    case("train", "config: kl_annealing_epochs", "\"two\" (mean-field)", &["{train}", "config:bayesian = \"mean-field\"\nweight_decay = 0.0\nkl_annealing_epochs = \"two\""]),
    case("train", "config: mixup_alpha", "-1.0 (mixup)", &["{train}", "config:mixing = \"mixup\"\nmixup_alpha = -1.0"]),
    case("train", "config: mit_margin", "1.0 (MIT-L)", &["{train}", "config:mixing = \"mit-l\"\nmit_margin = 1.0"]),
    case("train", "config: track_theory", "with mixup", &["{train}", "config:mixing = \"mixup\"\noptimizer = \"sam\"\ntrack_theory = true"]),
    case("train", "config: bins", "0", &["{train}", "config:bins = 0"]),
    case("train", "config: edges", "\"open\"", &["{train}", "config:edges = \"open\""]),
    case("train", "config: adaptive", "\"quantile\"", &["{train}", "config:adaptive = \"quantile\""]),
    case("train", "config: (file)", "schema 99", &["{train}", "config:schema = 99"]),
    case("train", "config: (file)", "nested tables without schema", &["{train}", "config:[data]\nsource = \"digits\"\n[optim]\nlr = 0.1"]),
    case("train", "config: (file)", "nested: gamma under optimizer sam", &["{train}", "config:schema = 2\n[data]\nsource = \"digits\"\n[optim.rule]\nkind = \"sam\"\ngamma = 1.0"]),
    case("eval", "--run", "missing directory", &["{eval}", "--run", "{dir}/missing-run"]),
    case("eval", "--run", "run without a model", &["{eval}", "--run", "{dir}/no-model"]),
    case("eval", "--run", "truncated model.safetensors", &["{eval}", "--run", "{dir}/truncated-model"]),
    case("eval", "--data", "unknown name", &["{eval}", "--data", "nonsense"]),
    case("eval", "--data", "idx: empty directory", &["{eval}", "--data", "idx:{dir}/empty"]),
    case("eval", "--data", "images of another size", &["{eval}", "--data", "fashion-mnist"]),
    case("eval", "--data", "npy: a label of 10^9", &["{eval}", "--data", "npy:{dir}/images8x8.npy,{dir}/label-billion.npy"]),
    case("eval", "--name", "../x", &["{eval}", "--name", "../x"]),
    case("eval", "--force", "a value", &["{eval}", "--force=yes"]),
    case("eval", "--device", "tpu", &["{eval}", "--device", "tpu"]),
    case("eval", "--workers", "0", &["{eval}", "--workers", "0"]),
    case("eval", "--threads", "0", &["{eval}", "--threads", "0"]),
    case("eval", "--batch-size", "0", &["{eval}", "--batch-size", "0"]),
    case("eval", "--corruptions", "missing directory", &["{eval}", "--corruptions", "{dir}/missing"]),
    case("eval", "--corruptions", "directory without .npy files", &["{eval}", "--corruptions", "{dir}/empty"]),
    case("eval", "--ood", "unknown name", &["{eval}", "--ood", "nonsense"]),
    case("eval", "--mc-dropout", "0", &["{eval}", "--mc-dropout", "0"]),
    case("eval", "--mc-dropout", "run without dropout", &["{eval}", "--mc-dropout", "5"]),
    case("eval", "--seed", "-1", &["{eval}", "--seed", "-1"]),
    case("eval", "--json", "a value", &["{eval}", "--json=yes"]),
    case("metrics", "PREDS", "not a .npy file", &["metrics", "{dir}/garbage.npy", "--labels", "{fx}/test_labels.npy", "--logits"]),
    case("metrics", "PREDS", "unknown extension", &["metrics", "{dir}/preds.xyz", "--labels", "{fx}/test_labels.npy", "--logits"]),
    case("metrics", "PREDS", "missing file", &["metrics", "{dir}/missing.npy", "--labels", "{fx}/test_labels.npy", "--logits"]),
    case("metrics", "PREDS", "CSV with a NaN logit", &["metrics", "{dir}/nan.csv", "--labels", "{dir}/labels2.npy", "--logits"]),
    case("metrics", "PREDS", "ragged CSV", &["metrics", "{dir}/ragged.csv", "--labels", "{dir}/labels2.npy", "--logits"]),
    case("metrics", "PREDS", "empty CSV", &["metrics", "{dir}/empty.csv", "--labels", "{dir}/labels2.npy", "--logits"]),
    case("metrics", "PREDS", "not a .npz archive", &["metrics", "{dir}/garbage.npz", "--labels", "{fx}/test_labels.npy", "--logits"]),
    case("metrics", "PREDS", "not a .safetensors file", &["metrics", "{dir}/garbage.safetensors", "--logits"]),
    case("metrics", "PREDS", "float8 .safetensors", &["metrics", "{dir}/float8.safetensors", "--logits"]),
    case("metrics", "--preds", "and PREDS", &["{metrics}", "--preds", "{fx}/test_logits.npy"]),
    case("metrics", "--labels", "left out with a .npy PREDS", &["metrics", "{fx}/test_logits.npy", "--logits"]),
    case("metrics", "--labels", "left out, .safetensors of logits only", &["metrics", "{dir}/logits-only.safetensors", "--logits"]),
    case("metrics", "--labels", "not a .npy file", &["metrics", "{fx}/test_logits.npy", "--labels", "{dir}/garbage.npy", "--logits"]),
    case("metrics", "--labels", "label 99 of 10 classes", &["metrics", "{fx}/test_logits.npy", "--labels", "{dir}/labels99.npy", "--logits"]),
    case("metrics", "--labels", "label -1", &["metrics", "{fx}/test_logits.npy", "--labels", "{dir}/labels-negative.npy", "--logits"]),
    case("metrics", "--labels", "fewer labels than rows", &["metrics", "{fx}/test_logits.npy", "--labels", "{fx}/val_labels.npy", "--logits"]),
    case("metrics", "--logits", "with --probs", &["{metrics}", "--probs"]),
    case("metrics", "--probs", "logits given", &["metrics", "{fx}/test_logits.npy", "--labels", "{fx}/test_labels.npy", "--probs"]),
    case("metrics", "--logits", "probabilities given", &["metrics", "{dir}/probs.csv", "--labels", "{dir}/labels2.npy", "--logits"]),
    case("metrics", "--probs", "rows summing to 1.2", &["metrics", "{dir}/probs-sum.csv", "--labels", "{dir}/labels2.npy", "--probs"]),
    case("metrics", "--array", "on a .npy file", &["{metrics}", "--array", "logits"]),
    case("metrics", "--array", "no such array", &["metrics", "{calib}/predictions.npz", "--labels", "{calib}/predictions.npz", "--logits", "--array", "nope"]),
    case("metrics", "--labels-array", "no such array", &["metrics", "{calib}/predictions.npz", "--labels", "{calib}/predictions.npz", "--logits", "--array", "logits", "--labels-array", "nope"]),
    case("metrics", "--val-preds", "without --val-labels", &["{metrics}", "--val-preds", "{fx}/val_logits.npy"]),
    case("metrics", "--val-preds", "another class count", &["{metrics}", "--val-preds", "{dir}/nan.csv", "--val-labels", "{dir}/labels2.npy"]),
    case("metrics", "--val-labels", "not a .npy file", &["{metrics}", "--val-preds", "{fx}/val_logits.npy", "--val-labels", "{dir}/garbage.npy"]),
    case("metrics", "--calibrate", "foo", &["{metrics}", "{val}", "--calibrate", "foo"]),
    case("metrics", "--calibrate", "without validation data", &["{metrics}", "--calibrate", "temperature"]),
    case("metrics", "--bins", "0", &["{metrics}", "--bins", "0"]),
    case("metrics", "--edges", "middle", &["{metrics}", "--edges", "middle"]),
    case("metrics", "--adaptive", "none", &["{metrics}", "--adaptive", "none"]),
    case("metrics", "--tce-objective", "auc", &["{metrics}", "--tce-objective", "auc"]),
    case("metrics", "--tolerance", "NaN", &["{metrics}", "--tolerance", "NaN"]),
    case("metrics", "--tolerance", "-1", &["{metrics}", "--tolerance", "-1"]),
    case("metrics", "--bootstrap", "1", &["{metrics}", "--bootstrap", "1"]),
    case("metrics", "--bootstrap", "many", &["{metrics}", "--bootstrap", "many"]),
    case("metrics", "--confidence", "1", &["{metrics}", "--bootstrap", "10", "--confidence", "1"]),
    case("metrics", "--confidence", "without --bootstrap", &["{metrics}", "--confidence", "0.9"]),
    case("metrics", "--seed", "-1", &["{metrics}", "--bootstrap", "10", "--seed", "-1"]),
    case("metrics", "--threads", "0", &["{metrics}", "--threads", "0"]),
    case("metrics", "--json", "a value", &["{metrics}", "--json=yes"]),
    case("metrics", "--plot", "path below a regular file", &["{metrics}", "--plot", "{dir}/notes.txt/plots"]),
    case("metrics", "--save-calibrators", "path below a regular file", &["{metrics}", "{val}", "--save-calibrators", "{dir}/notes.txt/cal"]),
    case("bench", "--models", "foo", &["{bench}", "--models", "foo"]),
    case("bench", "--optimizers", "lamb", &["{bench}", "--optimizers", "lamb"]),
    case("bench", "--input", "svhn", &["{bench}", "--input", "svhn"]),
    case("bench", "--batch-size", "0", &["{bench}", "--batch-size", "0"]),
    case("bench", "--warmup", "-1", &["{bench}", "--warmup", "-1"]),
    case("bench", "--steps", "0", &["{bench}", "--steps", "0"]),
    case("bench", "--device", "tpu", &["{bench}", "--device", "tpu"]),
    case("bench", "--threads", "0", &["{bench}", "--threads", "0"]),
    case("bench", "--precision", "fp64", &["{bench}", "--precision", "fp64"]),
    case("bench", "--memory-format", "nhwc", &["{bench}", "--memory-format", "nhwc"]),
    case("bench", "--memory-format", "channels_last with mlp", &["{bench}", "--memory-format", "channels_last"]),
    case("bench", "--json", "a value", &["{bench}", "--json=yes"]),
    case("bench", "--data", "missing directory", &["bench", "--data", "{dir}/missing"]),
    case("bench", "--data", "with --models", &["{bench}", "--data", "{dir}/empty"]),
    case("bench", "--workers", "0", &["bench", "--data", "{dir}/empty", "--workers", "0"]),
    case("bench", "--workers", "without --data", &["bench", "--workers", "2"]),
    case("bench", "--images", "0", &["bench", "--data", "{dir}/empty", "--images", "0"]),
    case("bench", "--size", "0", &["bench", "--data", "{dir}/empty", "--size", "0"]),
    case("compare", "--methods", "lamb", &["{compare}", "--methods", "sgd,lamb"]),
    case("compare", "--methods", "an ensemble of 0", &["{compare}", "--methods", "csam-ensemble0"]),
    case("compare", "--methods", "a policy before SGD", &["{compare}", "--methods", "looksam+sgd"]),
    case("compare", "--methods-file", "a policy's bad value", &["{compare}", "--methods", "looksam+csam", "methods:[\"looksam+csam\"]\nlooksam_k = 0"]),
    case("compare", "--methods-file", "MC-Dropout without dropout", &["{compare}", "--methods", "mc-dropout5", "methods:[mc-dropout5]\ndropout = 0.0"]),
    case("compare", "--methods-file", "two methods of one run, settings apart", &["{compare}", "--methods", "csam,csam-ensemble5", "methods:[csam-ensemble5]\ngamma = 0.5"]),
    case("compare", "--corruptions", "missing directory", &["{compare}", "--corruptions", "{dir}/missing"]),
    case("compare", "--ood", "unknown name", &["{compare}", "--ood", "nonsense"]),
    case("compare", "--seeds", "a", &["{compare}", "--seeds", "0,a"]),
    case("compare", "--methods-file", "missing file", &["{compare}", "--methods-file", "{dir}/missing.toml"]),
    case("compare", "--methods-file", "a shared key (lr)", &["{compare}", "methods:[sgd]\nlr = 0.1"]),
    case("compare", "--methods-file", "an unknown method", &["{compare}", "methods:[hinge]\nrho = 0.1"]),
    case("compare", "--methods-file", "a key its method does not read", &["{compare}", "--methods", "sgd,sam", "methods:[sgd]\nrho = 0.1"]),
    case("compare", "--methods-file", "a bad value", &["{compare}", "--methods", "sgd,focal", "methods:[focal]\nfocal_gamma = -1.0"]),
    case("compare", "--methods-file", "rho = 1e30: every run diverges", &["{compare}", "--methods", "sam", "methods:[sam]\nrho = 1e30"]),
    case("compare", "--n-seeds", "0", &["compare", "--n-seeds", "0", "--data", "digits", "--out", "{run}"]),
    case("compare", "--n-seeds", "with --seeds", &["{compare}", "--n-seeds", "2"]),
    case("compare", "--data", "unknown name", &["{compare}", "--data", "nonsense"]),
    case("compare", "--full", "with --data", &["{compare}", "--full"]),
    case("compare", "--model", "resnet7", &["{compare}", "--model", "resnet7"]),
    case("compare", "--epochs", "0", &["{compare}", "--epochs", "0"]),
    case("compare", "--lr", "-1", &["{compare}", "--lr", "-1"]),
    case("compare", "--weight-decay", "-1", &["{compare}", "--weight-decay", "-1"]),
    case("compare", "--rho", "0", &["{compare}", "--rho", "0"]),
    case("compare", "--gamma", "-1", &["{compare}", "--gamma", "-1"]),
    case("compare", "--rho", "with SGD only (not read)", &["{compare}", "--methods", "sgd", "--rho", "0.1"]),
    case("compare", "--gamma", "without CSAM (not read)", &["{compare}", "--methods", "sgd,sam", "--gamma", "2"]),
    case("compare", "--batch-size", "0", &["{compare}", "--batch-size", "0"]),
    case("compare", "--val-size", "0", &["{compare}", "--val-size", "0"]),
    case("compare", "--augment", "a value (false)", &["{compare}", "--augment", "false"]),
    case("compare", "--no-augment", "a value", &["{compare}", "--no-augment=yes"]),
    case("compare", "--device", "tpu", &["{compare}", "--device", "tpu"]),
    case("compare", "--precision", "fp64", &["{compare}", "--precision", "fp64"]),
    case("compare", "--threads", "0", &["{compare}", "--threads", "0"]),
    case("compare", "--jobs", "0", &["{compare}", "--jobs", "0"]),
    case("compare", "--out", "path below a regular file", &["{compare}", "--out", "{dir}/notes.txt/cmp"]),
    case("compare", "--quiet", "a value", &["{compare}", "--quiet=yes"]),
    case("compare", "--track-theory", "a value", &["{compare}", "--track-theory=yes"]),
    case("compare", "--track-theory", "a value (false)", &["{compare}", "--track-theory", "false"]),
    case("compare", "--no-tensorboard", "a value", &["{compare}", "--no-tensorboard=yes"]),
    case("compare", "--plan", "with --worker", &["{compare}", "--plan", "--worker"]),
    case("compare", "--plan", "another process writing the plan", &["{compare}", "--plan", "--out", "{dir}/planning"]),
    case("compare", "--worker", "no plan written", &["{compare}", "--worker"]),
    case("compare", "--collect", "nothing trained yet", &["{compare}", "--collect"]),
    case("sharpness", "--run", "missing directory", &["sharpness", "--run", "{dir}/missing"]),
    case("sharpness", "--run", "not a run", &["sharpness", "--run", "{dir}/empty"]),
    case("sharpness", "--checkpoint", "middle", &["{sharpness}", "--checkpoint", "middle"]),
    case("sharpness", "--examples", "0", &["{sharpness}", "--examples", "0"]),
    case("sharpness", "--batch-size", "0", &["{sharpness}", "--batch-size", "0"]),
    case("sharpness", "--max-iterations", "0", &["{sharpness}", "--max-iterations", "0"]),
    case("sharpness", "--tolerance", "0", &["{sharpness}", "--tolerance", "0"]),
    case("sharpness", "--segment-points", "-1", &["{sharpness}", "--segment-points", "-1"]),
    case("sharpness", "--seed", "-1", &["{sharpness}", "--seed", "-1"]),
    case("sharpness", "--rho", "-1", &["{sharpness}", "--rho", "-1"]),
    case("sharpness", "--device", "tpu", &["{sharpness}", "--device", "tpu"]),
    case("sharpness", "--force", "a value", &["{sharpness}", "--force=yes"]),
    case("sharpness", "--quiet", "a value", &["{sharpness}", "--quiet=yes"]),
    case("corrupt", "--data", "unknown name", &["{corrupt}", "--data", "nonsense"]),
    case("corrupt", "--split", "val", &["{corrupt}", "--split", "val"]),
    case("corrupt", "--out", "path below a regular file", &["{corrupt}", "--out", "{dir}/notes.txt/c"]),
    case("corrupt", "--corruptions", "spatter", &["{corrupt}", "--corruptions", "spatter"]),
    case("corrupt", "--corruptions", "frost (photographs not bundled)", &["{corrupt}", "--corruptions", "snow,frost"]),
    case("corrupt", "--frost-images", "missing directory", &["{corrupt}", "--frost-images", "{dir}/missing"]),
    case("corrupt", "--severities", "6", &["{corrupt}", "--severities", "6"]),
    case("corrupt", "--severities", "3-1", &["{corrupt}", "--severities", "3-1"]),
    case("corrupt", "--seed", "-1", &["{corrupt}", "--seed", "-1"]),
    case("corrupt", "--force", "a value", &["{corrupt}", "--force=yes"]),
    case("corrupt", "--quiet", "a value", &["{corrupt}", "--quiet=yes"]),
    case("sweep", "--rho", "0", &["{sweep}", "--rho", "0"]),
    case("sweep", "--rho", "a", &["{sweep}", "--rho", "0.05,a"]),
    case("sweep", "--rho", "1e30: every run diverges", &["{sweep}", "--rho", "1e30"]),
    case("sweep", "--gamma", "-1", &["{sweep}", "--gamma", "-1"]),
    case("sweep", "--sam-policy", "lookahead", &["{sweep}", "--sam-policy", "lookahead"]),
    case("sweep", "--seeds", "a", &["{sweep}", "--seeds", "0,a"]),
    case("sweep", "--n-seeds", "0", &["sweep", "--n-seeds", "0", "--data", "digits", "--out", "{run}"]),
    case("sweep", "--data", "unknown name", &["{sweep}", "--data", "nonsense"]),
    case("sweep", "--full", "with --data", &["{sweep}", "--full"]),
    case("sweep", "--model", "resnet7", &["{sweep}", "--model", "resnet7"]),
    case("sweep", "--epochs", "0", &["{sweep}", "--epochs", "0"]),
    case("sweep", "--lr", "-1", &["{sweep}", "--lr", "-1"]),
    case("sweep", "--weight-decay", "-1", &["{sweep}", "--weight-decay", "-1"]),
    case("sweep", "--batch-size", "0", &["{sweep}", "--batch-size", "0"]),
    case("sweep", "--val-size", "0", &["{sweep}", "--val-size", "0"]),
    case("sweep", "--augment", "a value (false)", &["{sweep}", "--augment", "false"]),
    case("sweep", "--no-augment", "a value", &["{sweep}", "--no-augment=yes"]),
    case("sweep", "--device", "tpu", &["{sweep}", "--device", "tpu"]),
    case("sweep", "--precision", "fp64", &["{sweep}", "--precision", "fp64"]),
    case("sweep", "--threads", "0", &["{sweep}", "--threads", "0"]),
    case("sweep", "--jobs", "0", &["{sweep}", "--jobs", "0"]),
    case("sweep", "--out", "path below a regular file", &["{sweep}", "--out", "{dir}/notes.txt/sweep"]),
    case("sweep", "--track-theory", "a value", &["{sweep}", "--track-theory=yes"]),
    case("sweep", "--no-tensorboard", "a value", &["{sweep}", "--no-tensorboard=yes"]),
    case("sweep", "--quiet", "a value", &["{sweep}", "--quiet=yes"]),
    case("sweep", "--plan", "with --worker", &["{sweep}", "--plan", "--worker"]),
    case("sweep", "--worker", "no plan written", &["{sweep}", "--worker"]),
    case("sweep", "--collect", "nothing trained yet", &["{sweep}", "--collect"]),
    case("grid", "--lrs", "0", &["{grid}", "--lrs", "0"]),
    case("grid", "--lrs", "-1", &["{grid}", "--lrs", "-1"]),
    case("grid", "--lrs", "empty list", &["{grid}", "--lrs="]),
    case("grid", "--lrs", "a", &["{grid}", "--lrs", "0.05,a"]),
    case("grid", "--lrs", "1e30: every run diverges", &["{grid}", "--lrs", "1e30"]),
    case("grid", "--weight-decays", "-1", &["{grid}", "--weight-decays", "-1"]),
    case("grid", "--weight-decays", "listed twice", &["{grid}", "--weight-decays", "1e-4,1e-4"]),
    case("grid", "--method", "hinge", &["{grid}", "--method", "hinge"]),
    case("grid", "--method", "an ensemble", &["{grid}", "--method", "ensemble5"]),
    case("grid", "--seeds", "a", &["{grid}", "--seeds", "0,a"]),
    case("grid", "--n-seeds", "0", &["grid", "--n-seeds", "0", "--data", "digits", "--out", "{run}"]),
    case("grid", "--data", "unknown name", &["{grid}", "--data", "nonsense"]),
    case("grid", "--model", "resnet7", &["{grid}", "--model", "resnet7"]),
    case("grid", "--epochs", "0", &["{grid}", "--epochs", "0"]),
    case("grid", "--batch-size", "0", &["{grid}", "--batch-size", "0"]),
    case("grid", "--val-size", "0", &["{grid}", "--val-size", "0"]),
    case("grid", "--augment", "a value (false)", &["{grid}", "--augment", "false"]),
    case("grid", "--no-augment", "a value", &["{grid}", "--no-augment=yes"]),
    case("grid", "--device", "tpu", &["{grid}", "--device", "tpu"]),
    case("grid", "--precision", "fp64", &["{grid}", "--precision", "fp64"]),
    case("grid", "--threads", "0", &["{grid}", "--threads", "0"]),
    case("grid", "--jobs", "0", &["{grid}", "--jobs", "0"]),
    case("grid", "--plan", "with --worker", &["{grid}", "--plan", "--worker"]),
    case("grid", "--worker", "no plan written", &["{grid}", "--worker"]),
    case("grid", "--collect", "nothing trained yet", &["{grid}", "--collect"]),
    case("grid", "--out", "path below a regular file", &["{grid}", "--out", "{dir}/notes.txt/grid"]),
    case("grid", "--quiet", "a value", &["{grid}", "--quiet=yes"]),
    case("grid", "--no-tensorboard", "a value", &["{grid}", "--no-tensorboard=yes"]),
    case("launch", "--nproc", "0", &["launch", "--nproc", "0", "--", "train", "--out", "{run}"]),
    case("launch", "--master-port", "0", &["launch", "--nproc", "2", "--master-port", "0", "--", "train", "--out", "{run}"]),
    case("launch", "COMMAND", "missing", &["launch", "--nproc", "2"]),
    case("report", "DIR", "missing directory", &["report", "{dir}/missing"]),
    case("completions", "SHELL", "unknown", &["completions", "tcsh"]),
    case("man", "--out", "path below a regular file", &["man", "--out", "{dir}/notes.txt/man"]),
    case("report", "DIR", "directory without an experiment", &["report", "{dir}/empty"]),
    case("report", "--tensorboard", "directory without runs", &["report", "--tensorboard", "{dir}/empty"]),
    case("report", "--tensorboard", "run with an event file", &["report", "--tensorboard", "{trained}"]),
    case("report", "--tensorboard", "run without metrics.jsonl", &["report", "--tensorboard", "{dir}/no-model"]),
    case("report", "--force", "without --tensorboard", &["report", "--force", "{trained}"]),
];

/// A valid small training run (flags after it override these).
fn train_base() -> Vec<&'static str> {
    let mut args = vec!["train", "--out", "{run}", "--epochs", "1"];
    args.extend_from_slice(DIGITS_MLP);
    args
}
/// The valid small training run into `out`.
fn train_into(out: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_csam"));
    command.args(
        train_base()
            .iter()
            .map(|a| a.replace("{run}", &out.to_string_lossy())),
    );
    command
}

/// The base of the `config:` rows: the run comes from the file.
const TRAIN_BY_FILE: &[&str] = &["train", "--out", "{run}", "--quiet"];
/// The same run as a config file (for the `config:` rows).
const TRAIN_TOML: &str = "data = \"digits\"\nmodel = \"mlp\"\nepochs = 1\nval_size = 300\n\
                          batch_size = 64\nlr = 0.05\ndevice = \"cpu\"\nthreads = 1\n";
#[rustfmt::skip]
const EVAL: &[&str] = &[
    "eval", "--run", "{trained}", "--data", "digits", "--device", "cpu",
];
#[rustfmt::skip]
const METRICS: &[&str] = &[
    "metrics", "{fx}/test_logits.npy", "--labels", "{fx}/test_labels.npy", "--logits",
];
#[rustfmt::skip]
const VAL: &[&str] = &[
    "--val-preds", "{fx}/val_logits.npy", "--val-labels", "{fx}/val_labels.npy",
];
#[rustfmt::skip]
const BENCH: &[&str] = &[
    "bench", "--models", "mlp", "--input", "fmnist", "--batch-size", "2", "--warmup", "0",
    "--steps", "1", "--device", "cpu",
];
#[rustfmt::skip]
const SHARPNESS: &[&str] = &[
    "sharpness", "--run", "{trained}", "--examples", "50", "--max-iterations", "3",
    "--device", "cpu", "--quiet",
];
#[rustfmt::skip]
const SWEEP: &[&str] = &[
    "sweep", "--data", "digits", "--model", "mlp", "--epochs", "1", "--seeds", "0", "--rho",
    "0.05", "--gamma", "0", "--device", "cpu", "--quiet", "--out", "{run}",
];
#[rustfmt::skip]
const GRID: &[&str] = &[
    "grid", "--data", "digits", "--model", "mlp", "--epochs", "1", "--lrs", "0.05",
    "--weight-decays", "5e-4", "--device", "cpu", "--quiet", "--out", "{run}",
];
#[rustfmt::skip]
const CORRUPT: &[&str] = &["corrupt", "--data", "digits", "--out", "{run}", "--quiet"];
#[rustfmt::skip]
const COMPARE: &[&str] = &[
    "compare", "--data", "digits", "--model", "mlp", "--epochs", "1", "--seeds", "0",
    "--device", "cpu", "--quiet", "--out", "{run}",
];

/// Where the prepared inputs live.
struct Places {
    dir: PathBuf,
    fixtures: PathBuf,
    calib: PathBuf,
    trained: PathBuf,
}

impl Places {
    /// Path placeholders replaced in one argument (longest first, so that
    /// `{trained}` inside `{dir}` is shown as itself).
    fn substitutions(&self) -> [(&'static str, &'static str, &Path); 4] {
        [
            ("{trained}", "$RUN", &self.trained),
            ("{dir}", "$TMP", &self.dir),
            ("{fx}", "$FIXTURES", &self.fixtures),
            ("{calib}", "$CALIB_FIXTURES", &self.calib),
        ]
    }

    /// `text` with the real paths written as their short names, this
    /// process, which holds the lock of `{dir}/busy`, as `$PID` / `$HOST`,
    /// and event files as `events.out.tfevents.$STAMP`.
    fn shorten(&self, text: &str) -> String {
        let text = self
            .substitutions()
            .iter()
            .fold(text.to_string(), |t, (_, short, path)| {
                t.replace(&*path.to_string_lossy(), short)
            })
            .replace(&LockOwner::current().to_string(), "pid $PID on host $HOST");
        unstamped(&without_memory(&text))
    }
}

/// `text` with the end of each event file's name, the time, host and pid
/// that wrote it, written `$STAMP`.
fn unstamped(text: &str) -> String {
    const PREFIX: &str = csam_train::tensorboard::FILE_PREFIX;
    let (mut out, mut rest) = (String::new(), text);
    while let Some(at) = rest.find(PREFIX) {
        out.push_str(&rest[..at + PREFIX.len()]);
        out.push_str("$STAMP");
        rest = &rest[at + PREFIX.len()..];
        rest = &rest[rest.find([':', ' ']).unwrap_or(rest.len())..];
    }
    out + rest
}

/// `text` with the machine's memory, which a refusal of a model too large
/// for it names, as `$MEMORY`.
fn without_memory(text: &str) -> String {
    const BEFORE: &str = "more than this machine's ";
    const AFTER: &str = " of memory";
    let Some((head, tail)) = text.split_once(BEFORE) else {
        return text.to_string();
    };
    match tail.split_once(AFTER) {
        Some((_, rest)) => format!("{head}{BEFORE}$MEMORY{AFTER}{rest}"),
        None => text.to_string(),
    }
}

/// The arguments of case number `index`, placeholders replaced.
fn expand(case: &Case, index: usize, places: &Places) -> Vec<String> {
    // A config file sets the run, so no flag may override its keys.
    let by_file = case.args.iter().any(|a| a.starts_with("config:"));
    let train = train_base();
    let bases: [(&str, &[&str]); 10] = [
        ("{train}", if by_file { TRAIN_BY_FILE } else { &train }),
        ("{eval}", EVAL),
        ("{metrics}", METRICS),
        ("{val}", VAL),
        ("{bench}", BENCH),
        ("{compare}", COMPARE),
        ("{sharpness}", SHARPNESS),
        ("{corrupt}", CORRUPT),
        ("{sweep}", SWEEP),
        ("{grid}", GRID),
    ];
    let mut args = Vec::new();
    for &arg in case.args {
        if let Some(toml) = arg.strip_prefix("config:") {
            let file = places.dir.join(format!("case-{index}.toml"));
            std::fs::write(&file, merged_toml(toml)).unwrap();
            args.extend(["--config".to_string(), file.display().to_string()]);
            continue;
        }
        if let Some(toml) = arg.strip_prefix("methods:") {
            let file = places.dir.join(format!("case-{index}.toml"));
            std::fs::write(&file, toml).unwrap();
            args.extend(["--methods-file".to_string(), file.display().to_string()]);
            continue;
        }
        let single = [arg];
        let base = bases.iter().find(|(name, _)| *name == arg);
        let expanded = base.map_or(&single[..], |(_, b)| b);
        args.extend(expanded.iter().map(|a| a.to_string()));
    }
    let run = places.dir.join(format!("run-{index}"));
    args.into_iter()
        .map(|a| {
            let a = a.replace("{run}", &run.to_string_lossy());
            places.substitutions().iter().fold(a, |a, (name, _, path)| {
                a.replace(name, &path.to_string_lossy())
            })
        })
        .collect()
}

/// The valid run's TOML with the case's keys replacing or added to it.
fn merged_toml(case: &str) -> String {
    let mut table: toml::Table = TRAIN_TOML.parse().unwrap();
    let extra: toml::Table = case.parse().expect("a case's TOML parses");
    table.extend(extra);
    table.to_string()
}

/// Writes the bad files and directories the cases name. Returns the locks
/// of `busy`, a directory another process (this test) trains into, and of
/// `planning/plan`, a comparison's plan another process writes.
fn prepare(dir: &Path, trained: &Path) -> [RunLock; 2] {
    let write = |name: &str, content: &str| std::fs::write(dir.join(name), content).unwrap();
    write("garbage.npy", "not a numpy file");
    write("garbage.npz", "not a zip archive");
    write("garbage.safetensors", "not safetensors");
    let safetensors = |name: &str, dtype: &str, bytes: &[u8]| {
        let header = format!(
            r#"{{"logits":{{"dtype":"{dtype}","shape":[2,2],"data_offsets":[0,{}]}}}}"#,
            bytes.len()
        );
        let mut file = (header.len() as u64).to_le_bytes().to_vec();
        file.extend_from_slice(header.as_bytes());
        file.extend_from_slice(bytes);
        std::fs::write(dir.join(name), file).unwrap();
    };
    let logits: Vec<u8> = [0.5f32, -1.0, 2.0, 0.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    safetensors("logits-only.safetensors", "F32", &logits);
    safetensors("float8.safetensors", "F8_E4M3", &[0x38, 0x40, 0x30, 0x00]);
    write("preds.xyz", "1,2\n");
    write("nan.csv", "NaN,1\n0,1\n");
    write("ragged.csv", "0.1,0.2\n0.3\n");
    write("empty.csv", "");
    write("probs-sum.csv", "0.5,0.7\n0.2,0.8\n");
    write("probs.csv", "0.25,0.75\n0.6,0.4\n");
    write("bad.toml", "lr = = 0.1\n");
    write("notes.txt", "mine");
    let npy_labels = |name: &str, labels: &[i64]| {
        csam_calib::io::npy::write_i64(&dir.join(name), labels).unwrap();
    };
    npy_labels("labels2.npy", &[0, 1]);
    npy_labels("labels99.npy", &[99; 450]);
    npy_labels("labels-negative.npy", &[-1; 450]);
    // Two 8x8 digits-shaped images, one labelled far beyond the run's classes.
    csam_calib::io::npy::write_u8(&dir.join("images8x8.npy"), &[2, 8, 8, 1], &[0; 128]).unwrap();
    npy_labels("label-billion.npy", &[0, 1_000_000_000]);
    for empty in ["empty", "foreign", "no-model"] {
        std::fs::create_dir(dir.join(empty)).unwrap();
    }
    write("foreign/notes.txt", "mine");
    // Image folders in layouts that cannot be trained on: one real PNG each.
    let png = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../data/cifar10-samples/cat/cifar10_00_3.png");
    for folder in ["half/train/cat", "evalset/test/cat", "one/cat"] {
        std::fs::create_dir_all(dir.join(folder)).unwrap();
        std::fs::copy(&png, dir.join(folder).join("0.png")).unwrap();
    }
    // A trainable folder of 2 classes (the same image twice per class).
    for split in ["train", "test"] {
        for (class, index) in [("cat", 0), ("dog", 1)] {
            let folder = dir.join("two-classes").join(split).join(class);
            std::fs::create_dir_all(&folder).unwrap();
            for copy in 0..2 {
                std::fs::copy(&png, folder.join(format!("{index}{copy}.png"))).unwrap();
            }
        }
    }
    std::fs::copy(
        trained.join("config.toml"),
        dir.join("no-model/config.toml"),
    )
    .unwrap();
    // A trained run whose model.safetensors was cut in half (a full disk, a
    // torn copy): the file is to blame, not the data.
    let truncated = dir.join("truncated-model");
    std::fs::create_dir(&truncated).unwrap();
    for entry in std::fs::read_dir(trained).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            std::fs::copy(&path, truncated.join(path.file_name().unwrap())).unwrap();
        }
    }
    let model = std::fs::read(trained.join("model.safetensors")).unwrap();
    std::fs::write(
        truncated.join("model.safetensors"),
        &model[..model.len() / 2],
    )
    .unwrap();
    // Interrupted runs (checkpoint of epoch 1 of 2), each damaged one way.
    let stopped = dir.join("resumable");
    let output = train_into(&stopped)
        .args(["--epochs", "2", "--stop-after-epoch", "1"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let damaged: [(&str, &str, &[u8]); 4] = [
        ("bad-runtime", "runtime.toml", b"tensorboard = \"maybe\"\n"),
        (
            "corrupt-state",
            "checkpoint/state.json",
            b"{\"epochs_done\": ",
        ),
        (
            "torn-weights",
            "checkpoint/weights-1.safetensors",
            b"\x10\0\0\0\0\0\0\0{\"w\":",
        ),
        (
            "corrupt-log",
            "metrics.jsonl",
            b"{\"epoch\": 1}\nnot json\n",
        ),
    ];
    for (name, file, content) in damaged {
        copy_run(&stopped, &dir.join(name));
        std::fs::write(dir.join(name).join(file), content).unwrap();
    }
    // Runs stopped after epoch 2 of 3 whose files no longer agree with their
    // checkpoint: edited, emptied, deleted, a flipped byte.
    let two = dir.join("two-done");
    let output = train_into(&two)
        .args(["--epochs", "3", "--stop-after-epoch", "2"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let log = std::fs::read_to_string(two.join("metrics.jsonl")).unwrap();
    let last = log.lines().last().unwrap();
    let config = std::fs::read_to_string(two.join("config.toml")).unwrap();
    let edited: [(&str, &str, Option<String>); 7] = [
        ("log-emptied", "metrics.jsonl", Some(String::new())),
        ("log-deleted", "metrics.jsonl", None),
        (
            "log-repeated",
            "metrics.jsonl",
            Some(format!("{log}{last}\n")),
        ),
        (
            "log-renumbered",
            "metrics.jsonl",
            Some(log.replacen("{\"epoch\":2,", "{\"epoch\":5,", 1)),
        ),
        (
            "config-lr",
            "config.toml",
            Some(config.replacen("\nlr = 0.05\n", "\nlr = 0.1\n", 1)),
        ),
        (
            "config-epochs",
            "config.toml",
            Some(config.replacen("\nepochs = 3\n", "\nepochs = 1\n", 1)),
        ),
        ("no-state", "checkpoint/state.json", None),
    ];
    for (name, file, content) in edited {
        copy_run(&two, &dir.join(name));
        let path = dir.join(name).join(file);
        match content {
            Some(content) => std::fs::write(path, content).unwrap(),
            None => std::fs::remove_file(path).unwrap(),
        }
    }
    copy_run(&two, &dir.join("flipped-weights"));
    flip_last_byte(&dir.join("flipped-weights/checkpoint/weights-2.safetensors"));
    // An event file whose last record fails its checksum.
    copy_run(&stopped, &dir.join("corrupt-events"));
    let events = csam_train::tensorboard::event_files(&dir.join("corrupt-events")).unwrap();
    flip_last_byte(&events[0]);
    copy_run(&stopped, &dir.join("busy"));
    [
        RunLock::acquire(&dir.join("busy")).unwrap(),
        planning(&dir.join("planning")),
    ]
}

/// The comparison of [`COMPARE`] in `out` with its plan being written: the
/// plan folder, without `plan.json`, locked by this process.
fn planning(out: &Path) -> RunLock {
    let out = out.display().to_string();
    let args = COMPARE
        .iter()
        .map(|&arg| if arg == "{run}" { &out } else { arg });
    let planned = csam(&args.chain(["--plan"]).collect::<Vec<_>>());
    assert!(planned.status.success(), "{}", text(&planned));
    let plan = Path::new(&out).join("plan");
    std::fs::remove_file(plan.join("plan.json")).unwrap();
    RunLock::acquire(&plan).unwrap()
}

/// Runs one case; returns its table row, or why it is not a clean refusal.
fn run_case(case: &Case, index: usize, places: &Places) -> Result<String, String> {
    let args = expand(case, index, places);
    let output = Command::new(env!("CARGO_BIN_EXE_csam"))
        .args(&args)
        .output()
        .unwrap();
    let why = |problem: &str| {
        Err(format!(
            "{} {} {:?}: {problem}\nargs: {args:?}\n{}",
            case.command,
            case.input,
            case.bad,
            text(&output)
        ))
    };
    let code = output.status.code();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    match code {
        Some(0) => return why("accepted"),
        Some(1) | Some(2) => {}
        _ => return why("not exit status 1 (csam) or 2 (argument parsing)"),
    }
    if stderr.contains("panicked") || errors.len() != 1 {
        return why("not one error line, or a panic");
    }
    let extra = stderr
        .lines()
        .filter(|l| !l.starts_with("error:") && !l.starts_with("warning:"));
    if code == Some(1) && extra.count() > 0 {
        return why("more than the error line");
    }
    // clap continues an error on indented lines ("required arguments were
    // not provided:\n  --val-labels <FILE>"): they belong to it.
    let continued = stderr
        .lines()
        .skip_while(|l| !l.starts_with("error:"))
        .skip(1)
        .take_while(|l| l.starts_with(' '))
        .map(str::trim);
    let error = std::iter::once(errors[0].trim_end())
        .chain(continued)
        .collect::<Vec<_>>()
        .join(" ");
    let run = places.dir.join(format!("run-{index}"));
    let config = places.dir.join(format!("case-{index}.toml"));
    let error = places
        .shorten(
            &error
                .replace(&*run.to_string_lossy(), "$OUT")
                .replace(&*config.to_string_lossy(), "$CONFIG"),
        )
        .replace('|', "\\|");
    Ok(format!(
        "| `{}` | {} | {} | `{}` |",
        case.input,
        case.bad.replace('|', "\\|"),
        code.unwrap_or(-1),
        error.replace('`', "'")
    ))
}

const HEADER: &str = "\
# Reliability: every input, a bad value, the error it gets

Generated by `crates/csam-cli/tests/reliability_table.rs`, which runs each row through the
`csam` binary and fails when a bad value is accepted, panics, or gives more than one `error:`
line, or when this file differs from what it generates. Regenerate after changing a message:

    CSAM_UPDATE_DOCS=1 cargo test -p csam-cli --test reliability_table

Exit status 2 is an argument clap refused (only its first line is shown), 1 any other error.
A negative value is typed as its own word (`--lr -1`), as the rows run it; `--lr=-1` gets the
same error. Paths: `$TMP` the test's directory of bad files, `$OUT` a fresh run directory,
`$CONFIG` the row's config file (a valid small run plus the key shown) or methods file, `$RUN` a finished run,
`$FIXTURES` `crates/csam-cli/tests/fixtures`, `$CALIB_FIXTURES` `crates/csam-calib/fixtures/io`.
`$PID` / `$HOST`: the process (the test) that holds the lock of a run directory.
`$STAMP`: the time, host and pid in the name of an event file. `$MEMORY`: the machine's memory.

Crash safety is tested separately (`crates/csam-cli/tests/crash_safety.rs`): SIGKILL at seeded
random moments and inside every kind of checkpoint write, then `--resume`, ends bit-identical to
an uninterrupted run with every file whole; a disk that fills up mid-run (`CSAM_FAULT=enospc:...`)
keeps the previous checkpoint; an unwritable run directory is refused before training; a
diverging run names its epoch and step and keeps its last good checkpoint.
";

fn document(rows: &[(usize, String)]) -> String {
    let mut doc = HEADER.to_string();
    for command in COMMANDS {
        doc.push_str(&format!(
            "\n## csam {command}\n\n| Input | Bad value | Exit | Error |\n|---|---|---|---|\n"
        ));
        for (index, row) in rows {
            if CASES[*index].command == *command {
                doc.push_str(row);
                doc.push('\n');
            }
        }
    }
    doc
}

fn doc_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/reliability.md")
}

#[test]
fn every_bad_input_gets_one_clear_error_and_the_doc_is_current() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let places = Places {
        dir: dir.path().to_path_buf(),
        fixtures: manifest.join("tests/fixtures"),
        calib: manifest.join("../csam-calib/fixtures/io"),
        trained: dir.path().join("trained"),
    };
    let trained = train_into(&places.trained).output().unwrap();
    assert!(trained.status.success(), "{}", text(&trained));
    let _busy = prepare(&places.dir, &places.trained);

    // The binary mostly waits on loading libtorch: run cases side by side.
    let workers = 8;
    let results: Vec<(usize, Result<String, String>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|worker| {
                let places = &places;
                scope.spawn(move || {
                    (worker..CASES.len())
                        .step_by(workers)
                        .map(|i| (i, run_case(&CASES[i], i, places)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for (index, result) in results {
        match result {
            Ok(row) => rows.push((index, row)),
            Err(why) => failures.push(why),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    rows.sort_by_key(|(index, _)| *index);
    let generated = document(&rows);
    let path = doc_path();
    if std::env::var_os("CSAM_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "docs/reliability.md is stale; regenerate it with CSAM_UPDATE_DOCS=1 cargo test -p \
         csam-cli --test reliability_table"
    );
}

/// The long flags that `csam COMMAND --help` lists.
fn flags_of(command: &str) -> BTreeSet<String> {
    let output = Command::new(env!("CARGO_BIN_EXE_csam"))
        .args([command, "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&output.stdout).into_owned();
    help.lines()
        // A flag's line is indented by at most six (two, or two and a short
        // name); the lines of its help text, wrapped or long, by more.
        .filter(|line| line.len() - line.trim_start().len() <= 6)
        .map(str::trim_start)
        .filter_map(|line| {
            // A short name first ("-h, --help", "-b, --batch-size").
            let line = match line.split_once(", --") {
                Some((short, _)) if short.len() == 2 && short.starts_with('-') => &line[4..],
                _ => line,
            };
            let flag = line.strip_prefix("--")?;
            let name: String = flag
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            Some(format!("--{name}"))
        })
        .filter(|flag| flag != "--help")
        .collect()
}

#[test]
fn every_flag_and_config_key_has_a_row() {
    let mut missing = Vec::new();
    for command in COMMANDS {
        let covered: BTreeSet<&str> = CASES
            .iter()
            .filter(|c| c.command == *command)
            .map(|c| c.input)
            .collect();
        for flag in flags_of(command) {
            if !covered.contains(flag.as_str()) {
                missing.push(format!("csam {command} {flag}"));
            }
        }
    }
    for key in csam_train::spec::keys::KEYS.iter().map(|k| k.name) {
        let input = format!("config: {key}");
        if !CASES.iter().any(|c| c.input == input) {
            missing.push(input);
        }
    }
    assert!(missing.is_empty(), "inputs without a row: {missing:?}");
}
