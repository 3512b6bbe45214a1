//! `csam corrupt`: write a dataset's corrupted copies in the CIFAR-10-C layout.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};
use csam_data::corrupt::frost_textures::FROST_FILES;
use csam_data::corrupt::{Corruption, FrostTextures, Severity};
use csam_data::{load, DatasetSpec};
use csam_lab::shift::cifar_c::{write_corruption_set, CorruptionPlan};

use crate::progress::CountBar;

use super::choices::{self, Choices};

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
    #[arg(
        long,
        value_name = "SPEC",
        value_parser = Choices::of(choices::data_names()),
        hide_possible_values = true
    )]
    data: String,
    /// The part of the dataset to corrupt.
    #[arg(long, value_enum, default_value = "test")]
    split: Part,
    /// Output directory: DIR/CORRUPTION.npy, DIR/labels.npy, DIR/meta.json.
    #[arg(long, visible_alias = "output", value_name = "DIR")]
    out: PathBuf,
    /// Corruptions, comma-separated, CIFAR-10-C's 15 (default: all of them,
    /// frost only with --frost-images). Frost blends in photographs that
    /// csam does not bundle (their licence is not stated).
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
    /// A directory holding the frost photographs of Hendrycks & Dietterich
    /// (frost1.png ... frost5.jpg from ImageNet-C/create_c/ of their
    /// robustness repository); without it frost is left out, or refused when
    /// asked for.
    #[arg(long, value_name = "DIR")]
    frost_images: Option<PathBuf>,
    /// Replace existing files in DIR.
    #[arg(long)]
    force: bool,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

/// Runs `csam corrupt`.
pub fn run(args: CorruptArgs) -> anyhow::Result<()> {
    let frost = args
        .frost_images
        .as_deref()
        .map(FrostTextures::load)
        .transpose()
        .context("--frost-images")?;
    let corruptions = if args.corruptions.is_empty() {
        Corruption::ALL
            .into_iter()
            .filter(|c| frost.is_some() || !c.needs_frost_textures())
            .collect()
    } else {
        let chosen = args
            .corruptions
            .iter()
            .map(|name| name.parse::<Corruption>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow::anyhow!("--corruptions: {e}"))?;
        if frost.is_none() && chosen.iter().any(|c| c.needs_frost_textures()) {
            anyhow::bail!(
                "--corruptions: frost blends in the frost photographs of Hendrycks & Dietterich \
                 ({}, ImageNet-C/create_c/ of github.com/hendrycks/robustness), which csam \
                 does not bundle because their licence is not stated; download them into a \
                 directory and give it as --frost-images DIR",
                FROST_FILES.join(", ")
            );
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
        frost,
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
