//! `csam completions SHELL`: the shell completion script of `csam`, printed
//! to standard output (clap_complete). It completes subcommands, flags and
//! every closed set of values from the same declarations as `--help`.

use clap::Args;
use clap_complete::Shell;

use super::choices::method_parts;
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
    let script = String::from_utf8_lossy(&script).into_owned();
    let script = match args.shell {
        Shell::Bash => with_composed_methods(&script),
        _ => script,
    };
    print_stdout(&script)
}

/// A bash function that completes a comparison's method part by part (see
/// [`with_composed_methods`]): the word up to its last `+` or `,` is kept and
/// the part after it completed from the parts given as `$1`. No space
/// follows, since another `+PART` or `,METHOD` may.
const BASH_METHOD_PARTS: &str = r#"# A comparison's method is composed of parts (focal+csam) and listed with
# commas (sgd,sam,focal+csam): complete the part after the last '+' or ','.
_csam_method_parts() {
    local head="${cur%"${cur##*[+,]}"}"
    COMPREPLY=($(compgen -P "${head}" -W "$1" -- "${cur#"${head}"}"))
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        compopt -o nospace
    fi
}

"#;

/// `script`, bash's completion of csam, with the flags that take methods
/// (`--methods sgd,focal+csam`, `--method`) completing each part: clap's
/// script offers whole words of a fixed list, and no part is a whole
/// composed method, so `focal+<TAB>` offered nothing.
fn with_composed_methods(script: &str) -> String {
    let parts = method_parts().join(" ");
    let whole_word = format!(r#"COMPREPLY=($(compgen -W "{parts}" -- "${{cur}}"))"#);
    let by_part = format!(r#"_csam_method_parts "{parts}""#);
    format!(
        "{BASH_METHOD_PARTS}{}",
        script.replace(&whole_word, &by_part)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_method_flags_complete_by_part() {
        let parts = method_parts().join(" ");
        let generated = format!(
            "    --methods)\n        COMPREPLY=($(compgen -W \"{parts}\" -- \"${{cur}}\"))\n"
        );
        let script = with_composed_methods(&generated);
        assert!(script.starts_with(BASH_METHOD_PARTS));
        assert!(
            script.ends_with(&format!(
                "    --methods)\n        _csam_method_parts \"{parts}\"\n"
            )),
            "{script}"
        );
    }
}
