//! `dynafold run -- COMMAND`: the ddtrace-run of dynafold. Puts the preload library in
//! `LD_PRELOAD`, runs the command as a child, forwards the signals it is sent to it, exits with
//! its status, and prints the merged graph-break summary when a report folder was used.
//!
//! A child rather than `exec`: the summary must be printed after the whole process tree ends.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::signals;

/// File name of the preload library.
pub const PRELOAD_LIB: &str = "libdynafold.so";
/// File name of the pyo3 library the preload library loads from its own folder.
pub const PYTHON_LIB: &str = "libdynafold_python.so";

/// Exit codes for a command that could not be started, as shells and `env` use them.
const EXIT_NOT_FOUND: i32 = 127;
const EXIT_NOT_EXECUTABLE: i32 = 126;
/// dynafold's own failures (bad usage, no library, no report folder), as `env` and `timeout`
/// use 125: a child's exit code of 1 or 2 must not be mistaken for dynafold's.
pub const EXIT_OWN_ERROR: i32 = 125;

/// Settings passed to the child as DYNAFOLD_* variables (each already validated by clap or
/// by the libraries themselves, which warn and use defaults).
#[derive(Default)]
pub struct RunOptions {
    pub env: Vec<(&'static str, OsString)>,
    /// Variables taken out of the command's environment (bad values, already warned about).
    pub unset: Vec<&'static str>,
    /// Absolute; the processes write into a fresh run folder inside it.
    pub report_dir: Option<PathBuf>,
    pub lib: Option<PathBuf>,
    /// dynafold is off in the processes (`--disable`, `DYNAFOLD_DISABLE`): the summary says
    /// so, and the run folder is marked, instead of an all-clear nothing watched for.
    pub disabled: bool,
}

/// Where the preload library is: `--lib`/`DYNAFOLD_LIB`, beside this binary, or beside the
/// Python package that ships it (`python -m dynafold` passes `--lib`).
pub fn find_preload(explicit: Option<&Path>) -> Result<PathBuf, String> {
    let candidate = match explicit {
        Some(p) => p.to_path_buf(),
        None => {
            let exe = std::env::current_exe()
                .map_err(|e| format!("cannot locate the dynafold binary: {e}"))?
                .canonicalize()
                .map_err(|e| format!("cannot resolve the dynafold binary: {e}"))?;
            let beside = exe.with_file_name(PRELOAD_LIB);
            if beside.exists() {
                beside
            } else {
                installed_package(&exe).unwrap_or(beside)
            }
        }
    };
    let abs = candidate
        .canonicalize()
        .map_err(|e| format!("preload library {} not found: {e}", candidate.display()))?;
    if !abs.is_file() {
        return Err(format!("preload library {} is not a file", abs.display()));
    }
    // ld.so splits LD_PRELOAD at both; such a path would silently preload fragments.
    if abs
        .as_os_str()
        .as_bytes()
        .iter()
        .any(|b| *b == b':' || *b == b' ')
    {
        return Err(format!(
            "preload library path {} contains a space or ':', which LD_PRELOAD cannot carry; install dynafold elsewhere",
            abs.display()
        ));
    }
    check_loadable(&abs)?;
    // Without its sibling the preload library only warns in every Python process; say it once
    // here instead. It cannot be dlopened outside Python (it needs the interpreter's symbols).
    let sibling = abs.with_file_name(PYTHON_LIB);
    if !sibling.is_file() {
        return Err(format!(
            "{} must sit beside {}: not found",
            sibling.display(),
            abs.display()
        ));
    }
    Ok(abs)
}

/// `pip install` puts this binary in `PREFIX/bin` and the libraries in the `dynafold` package
/// under `PREFIX/lib/pythonX.Y/site-packages` (venv, `--user` and `--prefix` alike);
/// `pip install --target DIR` puts them in `DIR/bin` and `DIR/dynafold`.
fn installed_package(exe: &Path) -> Option<PathBuf> {
    let prefix = exe.parent()?.parent()?;
    let target = prefix.join("dynafold").join(PRELOAD_LIB);
    if target.is_file() {
        return Some(target);
    }
    let lib = prefix.join("lib");
    let mut found: Vec<PathBuf> = std::fs::read_dir(lib)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
        .flat_map(|e| {
            ["site-packages", "dist-packages"]
                .map(|site| e.path().join(site).join("dynafold").join(PRELOAD_LIB))
        })
        .filter(|p| p.is_file())
        .collect();
    // Several Pythons in one prefix: take the newest, deterministically.
    found.sort();
    found.pop()
}

/// dlopen it once here: a broken library must fail this command, not every child process.
/// Safe to load in this process: without Python symbols its constructor does nothing.
fn check_loadable(path: &Path) -> Result<(), String> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| "path has a NUL byte")?;
    // SAFETY: dlopen/dlerror/dlclose with a valid NUL-terminated path.
    unsafe {
        let h = libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        if h.is_null() {
            let err = libc::dlerror();
            let msg = if err.is_null() {
                "unknown error".into()
            } else {
                std::ffi::CStr::from_ptr(err).to_string_lossy().into_owned()
            };
            return Err(format!("cannot load {}: {msg}", path.display()));
        }
        libc::dlclose(h);
    }
    Ok(())
}

/// `LD_PRELOAD` with `lib` added in front, keeping every other entry once and in order.
pub fn preload_value(lib: &Path, current: Option<&std::ffi::OsStr>) -> OsString {
    let lib_bytes = lib.as_os_str().as_bytes();
    let mut out: Vec<u8> = lib_bytes.to_vec();
    if let Some(cur) = current {
        let mut seen: Vec<&[u8]> = vec![lib_bytes];
        // ld.so accepts both spaces and colons as separators.
        for entry in cur.as_bytes().split(|b| *b == b':' || *b == b' ') {
            if entry.is_empty() || seen.contains(&entry) {
                continue;
            }
            seen.push(entry);
            out.push(b':');
            out.extend_from_slice(entry);
        }
    }
    OsString::from(std::ffi::OsStr::from_bytes(&out))
}

/// Runs `argv` under dynafold; returns the exit code this command should exit with.
pub fn run(argv: &[OsString], opts: &RunOptions) -> Result<i32, String> {
    let (program, args) = argv
        .split_first()
        .ok_or("no command given: dynafold run [OPTIONS] [--] COMMAND [ARGS...]")?;
    let lib = find_preload(opts.lib.as_deref())?;
    let mut cmd = Command::new(program);
    cmd.args(args);
    cmd.env(
        "LD_PRELOAD",
        preload_value(&lib, std::env::var_os("LD_PRELOAD").as_deref()),
    );
    for k in &opts.unset {
        cmd.env_remove(k);
    }
    for (k, v) in &opts.env {
        cmd.env(k, v);
    }
    let run_dir = match &opts.report_dir {
        Some(dir) => Some(super::report_dir::prepare(dir)?),
        None => None,
    };
    if let Some(dir) = &run_dir {
        if opts.disabled {
            super::report_dir::mark_disabled(dir)?;
        }
        cmd.env("DYNAFOLD_REPORT_DIR", dir);
    }
    let signals = signals::install_forwarding();
    signals::prepare_child(&mut cmd, signals);
    let spawned = cmd.spawn();
    let mut left = None;
    if let Ok(child) = &spawned {
        signals::forward_to(child.id());
        left = signals::leave_group();
    }
    signals::unblock(&signals);
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            eprintln!("dynafold: cannot run {}: {e}", Path::new(program).display());
            return Ok(match e.kind() {
                std::io::ErrorKind::NotFound => EXIT_NOT_FOUND,
                _ => EXIT_NOT_EXECUTABLE,
            });
        }
    };
    let status = child
        .wait()
        .map_err(|e| format!("waiting for the command: {e}"))?;
    signals::forward_to(0);
    signals::restore_defaults(&signals);
    signals::rejoin(left);
    if let Some(dir) = &run_dir {
        // Every process that watched for breaks (one that loaded torch's Dynamo) left a file,
        // with or without breaks in it: none means no process watched.
        match crate::report::merge_newest_run(dir) {
            Ok(m) if m.files.is_empty() && m.skipped.is_empty() && m.disabled => eprintln!(
                "dynafold: dynafold was disabled for this run (--disable or DYNAFOLD_DISABLE): no process watched for graph breaks (report folder {})",
                dir.display()
            ),
            Ok(m) if m.files.is_empty() && m.skipped.is_empty() => eprintln!(
                "dynafold: no process watched for graph breaks (none loaded torch's Dynamo; report folder {})",
                dir.display()
            ),
            Ok(m) => eprintln!("{}", crate::report::table::render(&m)),
            Err(e) => eprintln!("dynafold: no graph-break summary: {e}"),
        }
    }
    Ok(match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        _ => 1,
    })
}

#[cfg(test)]
mod tests {
    use super::preload_value;
    use std::ffi::OsStr;
    use std::path::Path;

    #[test]
    fn preload_keeps_other_entries_once() {
        let lib = Path::new("/x/libdynafold.so");
        assert_eq!(preload_value(lib, None), "/x/libdynafold.so");
        assert_eq!(
            preload_value(lib, Some(OsStr::new("/a.so /x/libdynafold.so:/b.so:/a.so"))),
            "/x/libdynafold.so:/a.so:/b.so"
        );
    }
}
