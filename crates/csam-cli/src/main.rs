//! `csam`: train calibrated classifiers and measure calibration.

use clap::Parser;

#[derive(Parser)]
#[command(
    name = "csam",
    version,
    about = "Train neural classifiers that know how sure they are (SGD, SAM, CSAM) and measure their calibration."
)]
struct Cli {}

fn main() -> anyhow::Result<()> {
    let _cli = Cli::parse();
    println!("device: {:?}", csam_train::default_device());
    Ok(())
}
