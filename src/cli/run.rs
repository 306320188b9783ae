//! `dynafold run -- COMMAND`: the ddtrace-run of dynafold. Puts the preload library in
//! `LD_PRELOAD`, runs the command as a child, forwards termination signals to it, exits with
//! its status, and prints the merged graph-break summary when a report folder was used.
//!
//! A child rather than `exec`: the summary must be printed after the whole process tree ends.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};

/// File name of the preload library.
pub const PRELOAD_LIB: &str = "libdynafold.so";

/// Settings passed to the child as DYNAFOLD_* variables (each already validated by clap or
/// by the libraries themselves, which warn and use defaults).
#[derive(Default)]
pub struct RunOptions {
    pub env: Vec<(&'static str, OsString)>,
    pub report_dir: Option<PathBuf>,
    pub lib: Option<PathBuf>,
}

/// Where the preload library is: `--lib`/`DYNAFOLD_LIB`, beside this binary, or beside the
/// Python package that ships it (`python -m dynafold` passes `--lib`).
pub fn find_preload(explicit: Option<&Path>) -> Result<PathBuf, String> {
    let candidate = match explicit {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe()
            .map_err(|e| format!("cannot locate the dynafold binary: {e}"))?
            .canonicalize()
            .map_err(|e| format!("cannot resolve the dynafold binary: {e}"))?
            .with_file_name(PRELOAD_LIB),
    };
    let abs = candidate
        .canonicalize()
        .map_err(|e| format!("preload library {} not found: {e}", candidate.display()))?;
    check_loadable(&abs)?;
    Ok(abs)
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

static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    let pid = CHILD.load(Ordering::Relaxed);
    if pid <= 0 {
        return;
    }
    // A signal from the terminal (Ctrl-C) already reached the child, which shares our process
    // group; only signals sent to us by another process (kill, systemd) need forwarding.
    // SAFETY: `info` is provided by the kernel for SA_SIGINFO handlers.
    let from_process = info.is_null() || unsafe { (*info).si_code } == libc::SI_USER;
    if from_process {
        // SAFETY: kill is async-signal-safe.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

fn install_forwarding() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
        // SAFETY: a zeroed sigaction with an SA_SIGINFO handler that only calls kill().
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = forward as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Runs `argv` under dynafold; returns the exit code this command should exit with.
pub fn run(argv: &[OsString], opts: &RunOptions) -> Result<i32, String> {
    let (program, args) = argv
        .split_first()
        .ok_or("no command given: dynafold run [OPTIONS] -- COMMAND [ARGS...]")?;
    let lib = find_preload(opts.lib.as_deref())?;
    let mut cmd = Command::new(program);
    cmd.args(args);
    cmd.env(
        "LD_PRELOAD",
        preload_value(&lib, std::env::var_os("LD_PRELOAD").as_deref()),
    );
    for (k, v) in &opts.env {
        cmd.env(k, v);
    }
    if let Some(dir) = &opts.report_dir {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create report folder {}: {e}", dir.display()))?;
    }
    install_forwarding();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", Path::new(program).display()))?;
    CHILD.store(child.id() as i32, Ordering::Relaxed);
    let status = child
        .wait()
        .map_err(|e| format!("waiting for the command: {e}"))?;
    CHILD.store(0, Ordering::Relaxed);
    if let Some(dir) = &opts.report_dir {
        match crate::cli::report::run(dir, false) {
            Ok(table) if !table.trim().is_empty() => eprintln!("{table}"),
            Ok(_) => {}
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
