//! DYNAFOLD_* settings. Each is read where it is needed, validated strictly; a value that does
//! not validate gets one warning line naming the variable and what was expected, and the
//! default is used. Nothing read here is ever pasted into generated source.

use std::path::PathBuf;
use std::time::Duration;

use crate::cuda::CudaVersion;

/// Default `env_logger` filter: warnings only, so a healthy server hears nothing from us.
pub const DEFAULT_LOG: &str = "warn";
pub const DEFAULT_NVCC_TIMEOUT: Duration = Duration::from_secs(10);

/// Every DYNAFOLD_* variable the libraries read, with its meaning; each is also a `dynafold run`
/// option (a unit test in main.rs checks it), and the README's table lists them.
pub const VARIABLES: &[(&str, &str)] = &[
    (
        "DYNAFOLD_DISABLE",
        "1 turns dynafold off in every process (default 0)",
    ),
    (
        "DYNAFOLD_LOG",
        "log filter in env_logger syntax, e.g. info or dynafold=debug (default warn)",
    ),
    (
        "DYNAFOLD_CUDA_VERSION",
        "MAJOR.MINOR: use this CUDA version instead of running nvcc",
    ),
    (
        "DYNAFOLD_NVCC_TIMEOUT",
        "seconds the nvcc probe may take, 1-600 (default 10)",
    ),
    (
        "DYNAFOLD_REPORT_DIR",
        "folder for per-process graph-break reports (JSON lines)",
    ),
    (
        "DYNAFOLD_CACHE_DIR",
        "absolute folder for dynafold's own bytecode cache (default: rewritten modules beside the module under their own tag, the embedded hooks in $XDG_CACHE_HOME/dynafold/bytecode)",
    ),
    (
        "DYNAFOLD_FP4_OPAQUE",
        "0 leaves FlashInfer's declaration of fp4_quantize's kernel dormant (default 1)",
    ),
    (
        "DYNAFOLD_OPS",
        "0 leaves FlashInfer's op declarations dormant, fp4's included (default 1)",
    ),
    (
        "DYNAFOLD_LIB",
        "the preload library `dynafold run` uses (default: beside the binary)",
    ),
];

fn var(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}

/// The log filter, validated (`dynafold_values::log_filter`); empty is unset.
pub fn log_filter() -> String {
    let Some(v) = var("DYNAFOLD_LOG") else {
        return DEFAULT_LOG.into();
    };
    match dynafold_values::log_filter(&v) {
        Ok(Some(f)) => f.to_owned(),
        Ok(None) => DEFAULT_LOG.into(),
        Err(why) => {
            // Logging is not up yet: this one goes straight to stderr.
            eprintln!(
                "dynafold[{}] WARN: DYNAFOLD_LOG={v:?} {why}; using {DEFAULT_LOG}",
                std::process::id()
            );
            DEFAULT_LOG.into()
        }
    }
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
    let v = var("DYNAFOLD_CUDA_VERSION")?;
    match CudaVersion::parse_override(&v) {
        Ok(version) => Some(version),
        Err(why) => {
            log::warn!("DYNAFOLD_CUDA_VERSION={v:?} ignored: {why}");
            None
        }
    }
}

/// `DYNAFOLD_NVCC_TIMEOUT`, whole seconds from 1 to 600.
pub fn nvcc_timeout() -> Duration {
    let Some(v) = var("DYNAFOLD_NVCC_TIMEOUT") else {
        return DEFAULT_NVCC_TIMEOUT;
    };
    match v.parse::<u64>() {
        Ok(s) if (1..=600).contains(&s) => Duration::from_secs(s),
        _ => {
            log::warn!(
                "DYNAFOLD_NVCC_TIMEOUT={v:?} is not a whole number of seconds from 1 to 600; using {}",
                DEFAULT_NVCC_TIMEOUT.as_secs()
            );
            DEFAULT_NVCC_TIMEOUT
        }
    }
}

/// An absolute folder from `name`, or None (relative paths would move with `chdir`).
pub fn dir(name: &str) -> Option<PathBuf> {
    let v = var(name)?;
    if v.is_empty() {
        return None;
    }
    let p = PathBuf::from(&v);
    if p.is_absolute() {
        Some(p)
    } else {
        log::warn!("{name}={v:?} is not an absolute path; ignored");
        None
    }
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
