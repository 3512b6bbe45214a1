//! `csam man`: the manual pages of `csam` (clap_mangen), from the same
//! declarations as `--help`: the page of `csam` on standard output, or with
//! `--out DIR` one page per subcommand (`csam.1`, `csam-train.1`, ...).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::print_stdout;

/// Flags of `csam man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write csam.1 and one page per subcommand (csam-train.1, ...) into this
    /// directory (created if missing) instead of printing csam.1.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// Runs `csam man` on the command line `cli` describes.
pub fn run(args: &ManArgs, cli: clap::Command) -> anyhow::Result<()> {
    match &args.out {
        Some(dir) => {
            let context = || format!("writing the manual pages into {}", dir.display());
            std::fs::create_dir_all(dir).with_context(context)?;
            clap_mangen::generate_to(cli, dir).with_context(context)?;
            println!("wrote the manual pages into {}", dir.display());
            Ok(())
        }
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(cli)
                .render(&mut page)
                .context("rendering the manual page")?;
            print_stdout(&String::from_utf8_lossy(&page))
        }
    }
}
