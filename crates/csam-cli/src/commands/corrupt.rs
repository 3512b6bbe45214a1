//! `csam corrupt`: write a dataset's corrupted copies in the CIFAR-10-C layout.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};
use csam_data::corrupt::{Corruption, Severity};
use csam_data::{load, DatasetSpec};
use csam_lab::shift::cifar_c::{write_corruption_set, CorruptionPlan};

use crate::progress::CountBar;

use super::choices::Choices;

/// Which part of the dataset to corrupt.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Part {
    Test,
    Train,
}

/// Flags of `csam corrupt`.
#[derive(Debug, Args)]
#[command(args_override_self = true)]
pub struct CorruptArgs {
    /// Dataset spec (same forms as `csam train --data`).
    #[arg(long, value_name = "SPEC")]
    data: String,
    /// The part of the dataset to corrupt.
    #[arg(long, value_enum, default_value = "test")]
    split: Part,
    /// Output directory: DIR/CORRUPTION.npy, DIR/labels.npy, DIR/meta.json.
    #[arg(long, visible_alias = "output", value_name = "DIR")]
    out: PathBuf,
    /// Corruptions, comma-separated, CIFAR-10-C's 15 (default: all of them
    /// but frost). Frost is refused: it blends in photographs that csam does
    /// not bundle (their licence is not stated) and cannot be given here yet.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "LIST",
        value_parser = Choices::of(Corruption::ALL.map(Corruption::name).to_vec()),
        action = clap::ArgAction::Set
    )]
    corruptions: Vec<String>,
    /// Severities stacked in each file, in order: a range (1-5), a level or a comma list.
    #[arg(long, default_value = "1-5", value_name = "LEVELS")]
    severities: String,
    /// Seed of every random draw (noise, streak angles, shuffles, warps, fog).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Replace existing files in DIR.
    #[arg(long)]
    force: bool,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

/// Why `csam corrupt` refuses frost, and what to do instead.
const NO_FROST: &str = "frost blends in the frost photographs of Hendrycks & Dietterich \
(frost1.png ... frost5.jpg, ImageNet-C/create_c/ of github.com/hendrycks/robustness), which csam \
does not bundle because their licence is not stated, and csam corrupt cannot be given them yet \
(the library can: csam_data::corrupt::FrostTextures::load on a directory holding them); leave \
frost out of --corruptions";

/// Runs `csam corrupt`.
pub fn run(args: CorruptArgs) -> anyhow::Result<()> {
    let corruptions = if args.corruptions.is_empty() {
        Corruption::ALL
            .into_iter()
            .filter(|c| !c.needs_frost_textures())
            .collect()
    } else {
        let chosen = args
            .corruptions
            .iter()
            .map(|name| name.parse::<Corruption>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow::anyhow!("--corruptions: {e}"))?;
        if chosen.iter().any(|c| c.needs_frost_textures()) {
            anyhow::bail!("--corruptions: {NO_FROST}");
        }
        chosen
    };
    let severities =
        Severity::parse_list(&args.severities).map_err(|e| anyhow::anyhow!("--severities: {e}"))?;
    let spec: DatasetSpec = args.data.parse().context("--data")?;
    let source = load(&spec).with_context(|| format!("loading {}", args.data))?;
    let (dataset, part) = match args.split {
        Part::Test => (source.test, "test"),
        Part::Train => (
            source
                .train
                .with_context(|| format!("--split train: {} has no training part", args.data))?,
            "train",
        ),
    };
    let plan = CorruptionPlan {
        corruptions,
        severities,
        seed: args.seed,
    };
    let source_name = format!("{}/{part}", args.data);
    let written = write_corruption_set(
        &args.out,
        &dataset,
        &source_name,
        &plan,
        args.force,
        &mut CountBar::corruptions(!args.quiet),
    )?;
    println!(
        "{} images of {source_name} x {} severities; wrote {} files to {}",
        dataset.n,
        plan.severities.len(),
        written.len(),
        args.out.display()
    );
    Ok(())
}
