//! DYNAFOLD_* settings. Each is read where it is needed, validated strictly by the one reading
//! here (`check`), which `dynafold run`, `dynafold doctor` and every process share; a value
//! that does not validate gets one warning line naming the variable and what was expected,
//! and the default is used. Nothing read here is ever pasted into generated source.

use std::path::PathBuf;
use std::time::Duration;

use crate::cuda::CudaVersion;

/// Default `env_logger` filter: warnings only, so a healthy server hears nothing from us.
pub const DEFAULT_LOG: &str = "warn";
pub const DEFAULT_NVCC_TIMEOUT: Duration = Duration::from_secs(10);

/// How a variable's value is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A yes/no (`dynafold_values::yes_no`), with its default.
    Flag(bool),
    /// An env_logger filter (`dynafold_values::log_filter`).
    Log,
    /// MAJOR.MINOR.
    CudaVersion,
    /// Whole seconds, 1-600.
    Seconds,
    /// An absolute folder (a relative one would move with `chdir`).
    Folder,
    /// A file path, checked by whoever loads it (`dynafold run`, `doctor`).
    Library,
}

/// A DYNAFOLD_* variable: its name, how it is read, and its meaning.
pub struct Variable {
    pub name: &'static str,
    pub kind: Kind,
    pub help: &'static str,
}

/// Every DYNAFOLD_* variable the libraries read, with its meaning; each is also a `dynafold run`
/// option (a unit test in main.rs checks it), and the README's table lists them.
pub const VARIABLES: &[Variable] = &[
    Variable {
        name: "DYNAFOLD_DISABLE",
        kind: Kind::Flag(false),
        help: "1 turns dynafold off in every process (default 0)",
    },
    Variable {
        name: "DYNAFOLD_LOG",
        kind: Kind::Log,
        help: "log filter in env_logger syntax, e.g. info or dynafold=debug (default warn)",
    },
    Variable {
        name: "DYNAFOLD_CUDA_VERSION",
        kind: Kind::CudaVersion,
        help: "MAJOR.MINOR: use this CUDA version instead of running nvcc",
    },
    Variable {
        name: "DYNAFOLD_NVCC_TIMEOUT",
        kind: Kind::Seconds,
        help: "seconds the nvcc probe may take, 1-600 (default 10)",
    },
    Variable {
        name: "DYNAFOLD_REPORT_DIR",
        kind: Kind::Folder,
        help: "folder for per-process graph-break reports (JSON lines)",
    },
    Variable {
        name: "DYNAFOLD_CACHE_DIR",
        kind: Kind::Folder,
        help: "absolute folder for dynafold's own bytecode cache (default: $XDG_CACHE_HOME/dynafold/bytecode, else ~/.cache/dynafold/bytecode)",
    },
    Variable {
        name: "DYNAFOLD_FP4_OPAQUE",
        kind: Kind::Flag(true),
        help: "0 leaves FlashInfer's declaration of fp4_quantize's kernel dormant (default 1)",
    },
    Variable {
        name: "DYNAFOLD_OPS",
        kind: Kind::Flag(true),
        help: "0 leaves FlashInfer's op declarations dormant, fp4's included (default 1)",
    },
    Variable {
        name: "DYNAFOLD_SURVEY",
        kind: Kind::Flag(false),
        help: "1 lets a compile that asks for fullgraph=True carry on past its graph breaks, so one run reports them all: a diagnosis (default 0)",
    },
    Variable {
        name: "DYNAFOLD_LIB",
        kind: Kind::Library,
        help: "the preload library `dynafold run` uses (default: beside the binary)",
    },
];

/// The variable called `name`, if dynafold reads one.
pub fn variable(name: &str) -> Option<&'static Variable> {
    VARIABLES.iter().find(|v| v.name == name)
}

fn var(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}

/// MAJOR.MINOR, the one reading of `DYNAFOLD_CUDA_VERSION` and `--cuda-version`.
pub fn parse_cuda_version(raw: &str) -> Result<Option<CudaVersion>, String> {
    if raw.is_empty() {
        return Ok(None);
    }
    CudaVersion::parse_override(raw)
        .map(Some)
        .map_err(|e| format!("is not a CUDA version: {e}"))
}

/// Whole seconds from 1 to 600, the one reading of `DYNAFOLD_NVCC_TIMEOUT` and
/// `--nvcc-timeout` (0 would make every probe time out at once).
pub fn parse_seconds(raw: &str) -> Result<Option<u64>, String> {
    match raw.parse::<u64>() {
        _ if raw.is_empty() => Ok(None),
        Ok(s) if (1..=600).contains(&s) => Ok(Some(s)),
        _ => Err("is not a whole number of seconds from 1 to 600".to_string()),
    }
}

/// An absolute folder; empty is unset.
pub fn parse_folder(raw: &str) -> Result<Option<PathBuf>, String> {
    if raw.is_empty() {
        return Ok(None);
    }
    let p = PathBuf::from(raw);
    if !p.is_absolute() {
        return Err("is not an absolute path".into());
    }
    if p.exists() && !p.is_dir() {
        return Err("is not a folder".into());
    }
    Ok(Some(p))
}

/// Why `raw` is not a value of the variable `name` (the words after `NAME="raw" `), by the
/// reading every process gives it; None when it is valid, empty, or not dynafold's.
pub fn check(name: &str, raw: &str) -> Option<String> {
    let kind = variable(name)?.kind;
    match kind {
        Kind::Flag(_) => dynafold_values::yes_no(raw).err(),
        Kind::Log => dynafold_values::log_filter(raw).err(),
        Kind::CudaVersion => parse_cuda_version(raw).err(),
        Kind::Seconds => parse_seconds(raw).err(),
        Kind::Folder => parse_folder(raw).err(),
        Kind::Library => None,
    }
}

/// What a process does instead of a bad value of `kind`.
pub fn fallback(kind: Kind) -> String {
    match kind {
        Kind::Flag(d) => format!("using the default ({})", u8::from(d)),
        Kind::Log => format!("using the default ({DEFAULT_LOG})"),
        Kind::CudaVersion => "using the default (nvcc's answer)".into(),
        Kind::Seconds => format!("using the default ({})", DEFAULT_NVCC_TIMEOUT.as_secs()),
        Kind::Folder | Kind::Library => "ignored".into(),
    }
}

/// The one warning line for a bad value of `name`, as every reader gives it.
pub fn warning(name: &str, raw: &str) -> Option<String> {
    let why = check(name, raw)?;
    let kind = variable(name)?.kind;
    Some(format!("{name}={raw:?} {why}; {}", fallback(kind)))
}

/// `name`'s value, or None (unset, empty, or bad: a bad one is warned about once, through
/// `log` or, before logging is up, `early`).
fn read<T>(
    name: &str,
    parse: impl Fn(&str) -> Result<Option<T>, String>,
    early: bool,
) -> Option<T> {
    let v = var(name)?;
    match parse(&v) {
        Ok(value) => value,
        Err(_) => {
            let w = warning(name, &v).unwrap_or_default();
            if early {
                // Logging is not up yet: this one goes straight to stderr.
                eprintln!("dynafold[{}] WARN: {w}", std::process::id());
            } else {
                log::warn!("{w}");
            }
            None
        }
    }
}

/// The log filter, validated (`dynafold_values::log_filter`); empty is unset.
pub fn log_filter() -> String {
    read(
        "DYNAFOLD_LOG",
        |v| dynafold_values::log_filter(v).map(|f| f.map(str::to_owned)),
        true,
    )
    .unwrap_or_else(|| DEFAULT_LOG.into())
}

/// `DYNAFOLD_FP4_OPAQUE`: whether FlashInfer's declaration of the fp4 kernel is woken with the
/// others (default yes); the name predates the general mechanism and is kept for users' settings.
pub fn fp4_opaque() -> bool {
    flag("DYNAFOLD_FP4_OPAQUE", true)
}

/// `DYNAFOLD_OPS`: whether FlashInfer's dormant op declarations are woken for Dynamo
/// (default yes).
pub fn ops() -> bool {
    flag("DYNAFOLD_OPS", true)
}

/// `DYNAFOLD_SURVEY`: whether a compile that asks for fullgraph=True is made to carry on past
/// its graph breaks, so that one run meets every one of them (default no).
pub fn survey() -> bool {
    flag("DYNAFOLD_SURVEY", false)
}

/// A yes/no variable (`dynafold_values::flag`); anything else gets one warning and `default`.
pub fn flag(name: &str, default: bool) -> bool {
    let (value, warning) = dynafold_values::flag(name, var(name).as_deref(), default);
    if let Some(w) = warning {
        log::warn!("{w}");
    }
    value
}

/// `DYNAFOLD_CUDA_VERSION`, when set and valid.
pub fn cuda_override() -> Option<CudaVersion> {
    read("DYNAFOLD_CUDA_VERSION", parse_cuda_version, false)
}

/// `DYNAFOLD_NVCC_TIMEOUT`, whole seconds from 1 to 600.
pub fn nvcc_timeout() -> Duration {
    read("DYNAFOLD_NVCC_TIMEOUT", parse_seconds, false)
        .map_or(DEFAULT_NVCC_TIMEOUT, Duration::from_secs)
}

/// An absolute folder from `name`, or None (relative paths would move with `chdir`).
pub fn dir(name: &str) -> Option<PathBuf> {
    read(name, parse_folder, false)
}

/// Test-only fault injection (`DYNAFOLD_TEST_FAULT=find_spec|exec_module`), so the tests can
/// prove that an internal error falls back to the normal import. Built only with the
/// `test-fault` feature: in a user's build no variable can make dynafold fail on purpose.
#[cfg(feature = "test-fault")]
pub fn test_fault(point: &str) -> bool {
    var("DYNAFOLD_TEST_FAULT").is_some_and(|v| v == point)
}

/// Without the feature the variable is not even read, and the faults' code is dead (the
/// wheel's library does not hold the name: `test_package.py` checks).
#[cfg(not(feature = "test-fault"))]
pub fn test_fault(_point: &str) -> bool {
    false
}
