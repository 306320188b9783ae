//! The `dynafold` command: argument parsing only; each subcommand lives in `src/cli/`.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use dynafold_core::cli;
use dynafold_core::cli::setting::{self, Checked, OptionalPath, Resolved, Source};
use dynafold_core::config;
use dynafold_core::cuda::CudaVersion;

#[derive(Parser)]
#[command(
    name = "dynafold",
    version,
    about = "Lets torch.compile(fullgraph=True) trace FlashInfer FP4, and reports what still breaks Dynamo"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run COMMAND with dynafold active in every Python process it starts.
    Run(Box<RunArgs>),
    /// Check that `dynafold run` will work here: Python, torch, FlashInfer, CUDA version
    /// sources, the rules, and a live start with the preload. Exits 0 only when all is well.
    Doctor {
        /// The Python the server runs with (default: python3 on PATH).
        #[arg(long, value_name = "PATH")]
        python: Option<PathBuf>,
        /// The preload library to check (default: beside this binary).
        #[arg(long, env = "DYNAFOLD_LIB", value_name = "PATH", value_parser = setting::path)]
        lib: Option<OptionalPath>,
        /// Also print the installed FlashInfer release's public-API table: each public tensor
        /// op's status under torch.compile(fullgraph=True), grouped by status.
        #[arg(long)]
        ops: bool,
        /// With --ops: only the ops with this status.
        #[arg(long, requires = "ops", value_parser = clap::builder::PossibleValuesParser::new(cli::api_table::statuses()))]
        status: Option<String>,
        /// Print the problems (and with --ops the table) as JSON instead of the report.
        #[arg(long)]
        json: bool,
    },
    /// Merge the graph-break reports of a run into one table.
    Report {
        /// The report folder (DYNAFOLD_REPORT_DIR of the run).
        dir: PathBuf,
        /// Machine-readable JSON instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Show what dynafold would change in a FlashInfer source file, running nothing from it:
    /// the unified diff, the folded values and where they came from.
    Rewrite {
        /// The FlashInfer source file, e.g. .../site-packages/flashinfer/jit/cpp_ext.py.
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// The older spelling, `rewrite --diff FILE`: accepted, and changes nothing (the diff
        /// is what `rewrite` prints). A flag, not an option taking FILE, so that FILE stays
        /// the one required argument `--help` shows.
        #[arg(long, hide = true)]
        diff: bool,
        /// The file's dotted module name, e.g. flashinfer.jit.cpp_ext (default: from the path,
        /// from its last `flashinfer` folder on).
        #[arg(long)]
        module: Option<String>,
        /// Fold to this CUDA version (MAJOR.MINOR) instead of resolving it.
        #[arg(long, env = "DYNAFOLD_CUDA_VERSION", value_name = "MAJOR.MINOR", value_parser = setting::cuda_version)]
        cuda_version: Option<Checked<CudaVersion>>,
        /// Folders searched for torch (to read torch.version.cuda without importing it).
        #[arg(long = "site-dir")]
        site_dirs: Vec<PathBuf>,
    },
    /// Time the rewriter alone (for scripts/bench): MODULE=FILE pairs.
    #[command(hide = true)]
    BenchRewrite {
        #[arg(long, default_value_t = 200)]
        iterations: u32,
        #[arg(required = true, value_name = "MODULE=FILE", value_parser = parse_target)]
        targets: Vec<(String, PathBuf)>,
    },
}

/// Every option has an environment-variable twin; the child inherits the variables. The
/// checked ones never fail in clap (`cli::setting`): a bad variable is one warning and the
/// default, as in every process, not a usage error naming an option nobody passed.
#[derive(Args)]
struct RunArgs {
    /// Log filter for dynafold in the child processes (env_logger syntax).
    #[arg(long, env = "DYNAFOLD_LOG", value_name = "FILTER", value_parser = setting::log_filter)]
    log: Option<Checked<String>>,
    /// Use this CUDA version (MAJOR.MINOR) instead of running nvcc.
    #[arg(long, env = "DYNAFOLD_CUDA_VERSION", value_name = "MAJOR.MINOR", value_parser = setting::cuda_version)]
    cuda_version: Option<Checked<CudaVersion>>,
    /// Seconds the nvcc probe may take (1-600).
    #[arg(long, env = "DYNAFOLD_NVCC_TIMEOUT", value_name = "SECONDS", value_parser = setting::nvcc_timeout)]
    nvcc_timeout: Option<Checked<u64>>,
    /// Write per-process graph-break reports into a fresh run folder here and print the
    /// merged summary at the end.
    #[arg(long, env = "DYNAFOLD_REPORT_DIR", value_name = "DIR", value_parser = setting::path)]
    report_dir: Option<OptionalPath>,
    /// Folder for dynafold's own bytecode cache (made absolute for the children).
    #[arg(long, env = "DYNAFOLD_CACHE_DIR", value_name = "DIR", value_parser = setting::path)]
    cache_dir: Option<OptionalPath>,
    /// Make flashinfer.fp4_quantize's kernel traceable (=false: leave it as shipped).
    #[arg(long, env = "DYNAFOLD_FP4_OPAQUE", value_name = "YES/NO", num_args = 0..=1,
          require_equals = true, default_missing_value = "1", value_parser = setting::yes_no)]
    fp4_opaque: Option<Checked<bool>>,
    /// Wake FlashInfer's dormant op declarations for torch.compile (=false: leave them off).
    #[arg(long, env = "DYNAFOLD_OPS", value_name = "YES/NO", num_args = 0..=1,
          require_equals = true, default_missing_value = "1", value_parser = setting::yes_no)]
    ops: Option<Checked<bool>>,
    /// Survey: a compile that asks for fullgraph=True carries on past its graph breaks, so the
    /// run reports every one of them (a diagnosis; default no).
    #[arg(long, env = "DYNAFOLD_SURVEY", value_name = "YES/NO", num_args = 0..=1,
          require_equals = true, default_missing_value = "1", value_parser = setting::yes_no)]
    survey: Option<Checked<bool>>,
    /// Turn dynafold off in the child processes (the command still runs).
    #[arg(long, env = "DYNAFOLD_DISABLE", value_name = "YES/NO", num_args = 0..=1,
          require_equals = true, default_missing_value = "1", value_parser = setting::yes_no)]
    disable: Option<Checked<bool>>,
    /// The preload library to use (default: beside this binary).
    #[arg(long, env = "DYNAFOLD_LIB", value_name = "PATH", value_parser = setting::path)]
    lib: Option<OptionalPath>,
    /// The command and its arguments (`--` before it is optional).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    command: Vec<OsString>,
}

/// The yes/no options, which take their value after `=` only.
const YES_NO_OPTIONS: [&str; 4] = ["--fp4-opaque", "--ops", "--survey", "--disable"];

fn parse_target(s: &str) -> Result<(String, PathBuf), String> {
    s.split_once('=')
        .map(|(m, f)| (m.to_owned(), PathBuf::from(f)))
        .ok_or_else(|| format!("{s:?}: expected MODULE=FILE"))
}

fn main() {
    let usage = |e: clap::Error| -> ! {
        // Help and version go to stdout with 0; a usage error is one of dynafold's own.
        let _ = e.print();
        std::process::exit(if e.use_stderr() {
            cli::run::EXIT_OWN_ERROR
        } else {
            0
        });
    };
    let matches = Cli::command()
        .try_get_matches()
        .unwrap_or_else(|e| usage(e));
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| usage(e));
    let result = match cli.command {
        Command::Run(args) => match matches.subcommand_matches("run") {
            Some(m) => run(args, m),
            None => Err("internal: no matches for run".into()),
        },
        Command::Doctor {
            python,
            lib,
            ops,
            status,
            json,
        } => {
            use std::io::IsTerminal;
            let (out, code) = cli::doctor::run(&cli::doctor::DoctorOptions {
                python,
                lib: lib.and_then(|l| l.0),
                ops,
                status,
                json,
                progress: std::io::stderr().is_terminal(),
                nvcc_timeout: dynafold_core::config::nvcc_timeout(),
            });
            print!("{out}");
            Ok(code)
        }
        Command::Report { dir, json } => cli::report::run(&dir, json).map(|out| {
            print!("{}", out.stdout);
            eprint!("{}", out.stderr);
            out.code
        }),
        Command::Rewrite {
            file,
            diff: _,
            module,
            cuda_version,
            site_dirs,
        } => match matches.subcommand_matches("rewrite") {
            Some(m) => rewrite_override(cuda_version, m).and_then(|version| {
                cli::rewrite::run(
                    &file,
                    module.as_deref(),
                    version,
                    &site_dirs,
                    dynafold_core::config::nvcc_timeout(),
                )
                .map(|out| {
                    print!("{out}");
                    0
                })
            }),
            None => Err("internal: no matches for rewrite".into()),
        },
        Command::BenchRewrite {
            iterations,
            targets,
        } => cli::bench_rewrite::run(&targets, iterations).map(|out| {
            print!("{out}");
            0
        }),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(msg) => {
            eprintln!("dynafold: {msg}");
            std::process::exit(cli::run::EXIT_OWN_ERROR);
        }
    }
}

/// `rewrite`'s CUDA version, read as `run` reads it: a bad `--cuda-version` is refused, a bad
/// `DYNAFOLD_CUDA_VERSION` is one warning and the default (what every process does with it),
/// an empty one is unset. The folded values name where the version was given.
fn rewrite_override(
    checked: Option<Checked<CudaVersion>>,
    m: &ArgMatches,
) -> Result<Option<cli::rewrite::Override>, String> {
    let Some(checked) = checked else {
        return Ok(None);
    };
    let given_as = source(m, "cuda_version");
    let Resolved { value, warning } =
        setting::resolve(checked, "DYNAFOLD_CUDA_VERSION", "cuda-version", given_as)?;
    if let Some(w) = warning {
        eprintln!("dynafold: {w}");
    }
    Ok(value.map(|version| cli::rewrite::Override {
        version,
        given_as: match given_as {
            Source::CommandLine => "--cuda-version",
            Source::Variable => "DYNAFOLD_CUDA_VERSION",
        },
    }))
}

/// Where clap found the option `id`.
fn source(m: &ArgMatches, id: &str) -> Source {
    match m.value_source(id) {
        Some(ValueSource::EnvVariable) => Source::Variable,
        _ => Source::CommandLine,
    }
}

/// What clap took for the command, checked against two misreadings. A word starting with `-`
/// not after `--` is a mistyped option (`--bogus`, `--report_dir`), not a program: clap takes
/// it for the command (trailing_var_arg), which would fail as "cannot run --bogus" with 127,
/// or run something. A yes/no word right after a yes/no option is that option's old spelling
/// (`--disable true`), not a command to run: `true` and `false` would run and exit 0, doing
/// nothing.
fn check_command_start(command: &[OsString]) -> Result<(), String> {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let Some(before) = argv
        .len()
        .checked_sub(command.len() + 1)
        .and_then(|i| argv.get(i))
    else {
        return Ok(());
    };
    let first = command.first().and_then(|c| c.to_str()).unwrap_or_default();
    let option = before.to_str().unwrap_or_default();
    if option != "--" && first.starts_with('-') {
        let name = first.split_once('=').map_or(first, |(n, _)| n);
        return Err(format!(
            "unknown option {name} for dynafold run; its options are {} (put -- before a command that starts with -)",
            run_options().join(", ")
        ));
    }
    if YES_NO_OPTIONS.contains(&option) && matches!(dynafold_values::yes_no(first), Ok(Some(_))) {
        return Err(format!(
            "{option} takes its value after '=': write {option}={first} (or put -- before the command)"
        ));
    }
    Ok(())
}

/// `dynafold run`'s options, as typed (`--log`, ..., `--help`).
fn run_options() -> Vec<String> {
    let cli = Cli::command();
    let mut names: Vec<String> = cli
        .find_subcommand("run")
        .map(|c| {
            c.get_arguments()
                .filter_map(|a| a.get_long())
                .map(|l| format!("--{l}"))
                .collect()
        })
        .unwrap_or_default();
    names.push("--help".into());
    names
}

fn run(args: Box<RunArgs>, m: &ArgMatches) -> Result<i32, String> {
    check_command_start(&args.command)?;
    // Said in the summary: a disabled run watched nothing, which is not "no graph breaks".
    let disabled = matches!(
        args.disable.as_ref().map(|c| &c.parsed),
        Some(Ok(Some(true)))
    );
    let mut env: Vec<(&'static str, OsString)> = Vec::new();
    let mut unset: Vec<&'static str> = Vec::new();
    // One checked option: its value to pass on, or its bad variable taken out, said once.
    let mut take = |id: &str, var: &'static str, flag: &str, checked: Option<Checked<String>>| {
        let Some(checked) = checked else {
            return Ok(());
        };
        let Resolved { value, warning } = setting::resolve(checked, var, flag, source(m, id))?;
        if let Some(w) = warning {
            eprintln!("dynafold: {w}");
            unset.push(var);
        }
        if let Some(v) = value {
            env.push((var, v.into()));
        }
        Ok::<(), String>(())
    };
    let as_text = |c: Checked<bool>| Checked {
        raw: c.raw,
        parsed: c
            .parsed
            .map(|v| v.map(|b| if b { "1" } else { "0" }.to_owned())),
    };
    take("log", "DYNAFOLD_LOG", "log", args.log)?;
    take(
        "cuda_version",
        "DYNAFOLD_CUDA_VERSION",
        "cuda-version",
        args.cuda_version.map(|c| Checked {
            raw: c.raw,
            parsed: c.parsed.map(|v| v.map(|v| v.as_str().to_owned())),
        }),
    )?;
    take(
        "nvcc_timeout",
        "DYNAFOLD_NVCC_TIMEOUT",
        "nvcc-timeout",
        args.nvcc_timeout.map(|c| Checked {
            raw: c.raw,
            parsed: c.parsed.map(|v| v.map(|s| s.to_string())),
        }),
    )?;
    take(
        "fp4_opaque",
        "DYNAFOLD_FP4_OPAQUE",
        "fp4-opaque",
        args.fp4_opaque.map(as_text),
    )?;
    take("ops", "DYNAFOLD_OPS", "ops", args.ops.map(as_text))?;
    take(
        "survey",
        "DYNAFOLD_SURVEY",
        "survey",
        args.survey.map(as_text),
    )?;
    take(
        "disable",
        "DYNAFOLD_DISABLE",
        "disable",
        args.disable.map(as_text),
    )?;
    // The libraries ignore relative folders (they would move with chdir): resolve them here.
    let report_dir = match args.report_dir.and_then(|d| d.0) {
        Some(d) => Some(std::path::absolute(&d).map_err(|e| format!("report folder: {e}"))?),
        None => None,
    };
    if let Some(d) = args.cache_dir.and_then(|d| d.0) {
        let d = std::path::absolute(&d).map_err(|e| format!("cache folder: {e}"))?;
        // A file there would make every process warn and cache nothing: said once, dropped.
        match config::warning("DYNAFOLD_CACHE_DIR", &d.to_string_lossy()) {
            Some(w) => {
                let w = match source(m, "cache_dir") {
                    Source::Variable => w,
                    Source::CommandLine => format!(
                        "--cache-dir={:?} is not a folder; ignored",
                        d.display().to_string()
                    ),
                };
                eprintln!("dynafold: {w}");
                unset.push("DYNAFOLD_CACHE_DIR");
            }
            None => env.push(("DYNAFOLD_CACHE_DIR", d.into())),
        }
    }
    let opts = cli::run::RunOptions {
        env,
        unset,
        report_dir,
        lib: args.lib.and_then(|l| l.0),
        disabled,
    };
    cli::run::run(&args.command, &opts)
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// Every variable the libraries read is settable, and shown, as a `dynafold run` option.
    #[test]
    fn every_variable_has_a_run_option() {
        let cli = Cli::command();
        let run = cli.find_subcommand("run").map(|c| {
            c.get_arguments()
                .filter_map(|a| a.get_env())
                .map(|e| e.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        });
        let envs = run.unwrap_or_default();
        for dynafold_core::config::Variable { name, .. } in dynafold_core::config::VARIABLES {
            assert!(envs.iter().any(|e| e == name), "{name} has no run option");
        }
        assert!(envs.iter().any(|e| e == "DYNAFOLD_LIB"));
    }
}
