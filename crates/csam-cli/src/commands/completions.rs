//! `csam completions SHELL`: the shell completion script of `csam`, printed
//! to standard output (clap_complete). It completes subcommands, flags and
//! every closed set of values from the same declarations as `--help`.

use clap::Args;
use clap_complete::Shell;

use super::print_stdout;

/// Flags of `csam completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell whose completion script to print.
    #[arg(value_enum, value_name = "SHELL")]
    shell: Shell,
}

/// Runs `csam completions` on the command line `cli` describes.
pub fn run(args: &CompletionsArgs, mut cli: clap::Command) -> anyhow::Result<()> {
    let mut script = Vec::new();
    let name = cli.get_name().to_string();
    clap_complete::generate(args.shell, &mut cli, name, &mut script);
    print_stdout(&String::from_utf8_lossy(&script))
}
