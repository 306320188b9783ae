//! The `dynafold` command: argument parsing only; each subcommand lives in `src/cli/`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use dynafold_core::cli;
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
    Run(RunArgs),
    /// Check that `dynafold run` will work here: Python, torch, FlashInfer, CUDA version
    /// sources, the rules, and a live start with the preload. Exits 0 only when all is well.
    Doctor {
        /// The Python the server runs with (default: python3 on PATH).
        #[arg(long, value_name = "PATH")]
        python: Option<PathBuf>,
        /// The preload library to check (default: beside this binary).
        #[arg(long, env = "DYNAFOLD_LIB", value_name = "PATH")]
        lib: Option<PathBuf>,
    },
    /// Merge the graph-break reports of a run into one table.
    Report {
        /// The report folder (DYNAFOLD_REPORT_DIR of the run).
        dir: PathBuf,
        /// Machine-readable JSON instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Show what dynafold would change in a FlashInfer source file, running nothing from it.
    Rewrite {
        /// Print the unified diff and the folded values (the only mode).
        #[arg(long, value_name = "FILE")]
        diff: PathBuf,
        /// The file's dotted module name, e.g. flashinfer.jit.cpp_ext.
        #[arg(long)]
        module: String,
        /// Fold to this CUDA version instead of resolving it.
        #[arg(long, env = "DYNAFOLD_CUDA_VERSION", value_parser = parse_version)]
        cuda_version: Option<CudaVersion>,
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

/// Every option has an environment-variable twin; the child inherits the variables.
#[derive(Args)]
struct RunArgs {
    /// Log filter for dynafold in the child processes (env_logger syntax).
    #[arg(long, env = "DYNAFOLD_LOG", value_name = "FILTER")]
    log: Option<String>,
    /// Use this CUDA version (MAJOR.MINOR) instead of running nvcc.
    #[arg(long, env = "DYNAFOLD_CUDA_VERSION", value_parser = parse_version)]
    cuda_version: Option<CudaVersion>,
    /// Seconds the nvcc probe may take (1-600).
    #[arg(long, env = "DYNAFOLD_NVCC_TIMEOUT", value_parser = clap::value_parser!(u64).range(1..=600))]
    nvcc_timeout: Option<u64>,
    /// Write per-process graph-break reports here and print the merged summary at the end.
    #[arg(long, env = "DYNAFOLD_REPORT_DIR", value_name = "DIR")]
    report_dir: Option<PathBuf>,
    /// Folder for dynafold's own bytecode cache (made absolute for the children).
    #[arg(long, env = "DYNAFOLD_CACHE_DIR", value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Make flashinfer.fp4_quantize's kernel traceable (false: leave it as shipped).
    #[arg(long, env = "DYNAFOLD_FP4_OPAQUE", value_parser = clap::builder::BoolishValueParser::new())]
    fp4_opaque: Option<bool>,
    /// Wake FlashInfer's dormant op declarations for torch.compile (false: leave them off).
    #[arg(long, env = "DYNAFOLD_OPS", value_parser = clap::builder::BoolishValueParser::new())]
    ops: Option<bool>,
    /// Turn dynafold off in the child processes (the command still runs).
    #[arg(long, env = "DYNAFOLD_DISABLE", value_parser = clap::builder::BoolishValueParser::new())]
    disable: Option<bool>,
    /// The preload library to use (default: beside this binary).
    #[arg(long, env = "DYNAFOLD_LIB", value_name = "PATH")]
    lib: Option<PathBuf>,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

fn parse_version(s: &str) -> Result<CudaVersion, String> {
    CudaVersion::parse_override(s)
}

fn parse_target(s: &str) -> Result<(String, PathBuf), String> {
    s.split_once('=')
        .map(|(m, f)| (m.to_owned(), PathBuf::from(f)))
        .ok_or_else(|| format!("{s:?}: expected MODULE=FILE"))
}

fn main() {
    let cli = Cli::try_parse().unwrap_or_else(|e| {
        // Help and version go to stdout with 0; a usage error is one of dynafold's own.
        let _ = e.print();
        std::process::exit(if e.use_stderr() {
            cli::run::EXIT_OWN_ERROR
        } else {
            0
        });
    });
    let result = match cli.command {
        Command::Run(args) => run(args),
        Command::Doctor { python, lib } => {
            let (out, code) = cli::doctor::run(&cli::doctor::DoctorOptions {
                python,
                lib,
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
            diff,
            module,
            cuda_version,
            site_dirs,
        } => cli::rewrite::run(
            &diff,
            &module,
            cuda_version,
            &site_dirs,
            Duration::from_secs(10),
        )
        .map(|out| {
            print!("{out}");
            0
        }),
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

fn run(args: RunArgs) -> Result<i32, String> {
    let mut env: Vec<(&'static str, OsString)> = Vec::new();
    if let Some(v) = args.log {
        env.push(("DYNAFOLD_LOG", v.into()));
    }
    if let Some(v) = args.cuda_version {
        env.push(("DYNAFOLD_CUDA_VERSION", v.as_str().into()));
    }
    if let Some(v) = args.nvcc_timeout {
        env.push(("DYNAFOLD_NVCC_TIMEOUT", v.to_string().into()));
    }
    if let Some(v) = args.fp4_opaque {
        env.push(("DYNAFOLD_FP4_OPAQUE", if v { "1" } else { "0" }.into()));
    }
    if let Some(v) = args.ops {
        env.push(("DYNAFOLD_OPS", if v { "1" } else { "0" }.into()));
    }
    if let Some(v) = args.disable {
        env.push(("DYNAFOLD_DISABLE", if v { "1" } else { "0" }.into()));
    }
    // The libraries ignore relative folders (they would move with chdir): resolve them here.
    let report_dir = match args.report_dir {
        Some(d) => Some(std::path::absolute(&d).map_err(|e| format!("report folder: {e}"))?),
        None => None,
    };
    if let Some(d) = args.cache_dir {
        let d = std::path::absolute(&d).map_err(|e| format!("cache folder: {e}"))?;
        env.push(("DYNAFOLD_CACHE_DIR", d.into()));
    }
    let opts = cli::run::RunOptions {
        env,
        report_dir,
        lib: args.lib,
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
        for (name, _) in dynafold_core::config::VARIABLES {
            assert!(envs.iter().any(|e| e == name), "{name} has no run option");
        }
        assert!(envs.iter().any(|e| e == "DYNAFOLD_LIB"));
    }
}
