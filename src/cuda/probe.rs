//! Running `which` / `nvcc` the way CPython's `subprocess` does, but bounded in time.
//!
//! CPython would wait forever on a hung nvcc; we run inside the user's server at import time,
//! so a probe that overstays its timeout is killed (with its whole process group, since a
//! shell-script nvcc leaves children holding the pipes) and reported as `Timeout`.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use super::posixpath;

pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Beyond this, output is not kept: no nvcc prints megabytes of `--version`.
const OUTPUT_CAP: usize = 4 << 20;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// `exec` failed with this errno (CPython raises the matching OSError subclass).
    SpawnFailed(i32),
    /// Something other than exec went wrong (pipes, threads); no CPython equivalent.
    Broken(String),
    Exited(i32),
    Signaled(i32),
    Timeout,
    /// More than `OUTPUT_CAP` bytes on a pipe.
    TooMuchOutput,
}

#[derive(Clone, Debug)]
pub(crate) struct ProbeResult {
    pub status: Status,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl ProbeResult {
    fn bare(status: Status) -> ProbeResult {
        ProbeResult {
            status,
            stdout: Vec::new(),
            stderr: Vec::new(),
        }
    }
}

/// What CPython's `subprocess` would try to exec for `program`, in order: the name itself
/// when it has a directory part, else each `PATH` entry joined with it (`os.get_exec_path`,
/// falling back to `os.defpath` when PATH is unset; an empty entry means the cwd).
pub(crate) fn exec_candidates(program: &str, path_var: Option<&str>) -> Vec<String> {
    if !posixpath::dirname(program).is_empty() {
        return vec![program.to_owned()];
    }
    path_var
        .unwrap_or("/bin:/usr/bin")
        .split(':')
        .map(|dir| posixpath::join(dir, program))
        .collect()
}

pub(crate) struct Invocation<'a> {
    /// `argv[0]` as CPython passes it (the name the caller wrote, not the resolved path).
    pub arg0: &'a str,
    pub args: &'a [&'a str],
    pub env: &'a HashMap<String, String>,
    pub cwd: &'a Path,
    pub timeout: Duration,
}

/// Runs the first candidate that execs, reporting errno like `_posixsubprocess`: the first
/// error that is not ENOENT/ENOTDIR wins, else the last one seen.
pub(crate) fn run_search(candidates: &[String], inv: &Invocation<'_>) -> ProbeResult {
    let mut saved: Option<i32> = None;
    let mut last = libc::ENOENT;
    for cand in candidates {
        let r = run_one(cand, inv);
        match r.status {
            Status::SpawnFailed(errno) => {
                if errno != libc::ENOENT && errno != libc::ENOTDIR && saved.is_none() {
                    saved = Some(errno);
                }
                last = errno;
            }
            _ => {
                // CPython keeps searching only while exec fails; once one execs, that is the
                // process it waits for, even if an earlier candidate failed oddly.
                return r;
            }
        }
    }
    ProbeResult::bare(Status::SpawnFailed(saved.unwrap_or(last)))
}

fn run_one(candidate: &str, inv: &Invocation<'_>) -> ProbeResult {
    if candidate.contains('\0') || inv.args.iter().any(|a| a.contains('\0')) {
        // CPython raises ValueError("embedded null byte") before forking.
        return ProbeResult::bare(Status::Broken("embedded NUL byte".into()));
    }
    // Resolve relative names against the cwd ourselves: std leaves "relative to which
    // directory" unspecified once current_dir is set, and a bare name would trigger its own
    // PATH search.
    let program: PathBuf = if candidate.starts_with('/') {
        PathBuf::from(candidate)
    } else {
        inv.cwd.join(candidate)
    };
    let mut cmd = Command::new(&program);
    cmd.arg0(OsStr::new(inv.arg0))
        .args(inv.args)
        .env_clear()
        .envs(inv.env)
        .current_dir(inv.cwd)
        // FlashInfer's child inherits stdin; ours must never wait on a terminal.
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return ProbeResult::bare(match e.raw_os_error() {
                Some(errno) => Status::SpawnFailed(errno),
                None => Status::Broken(e.to_string()),
            })
        }
    };
    collect(&mut child, inv.timeout)
}

fn reader<R: Read + Send + 'static>(pipe: Option<R>) -> mpsc::Receiver<Result<Vec<u8>, String>> {
    let (tx, rx) = mpsc::channel();
    match pipe {
        None => {
            let _ = tx.send(Ok(Vec::new()));
        }
        Some(p) => {
            let spawned = thread::Builder::new()
                .name("dynafold-probe".into())
                .spawn(move || {
                    let mut buf = Vec::new();
                    let res = p
                        .take(OUTPUT_CAP as u64 + 1)
                        .read_to_end(&mut buf)
                        .map(|_| buf)
                        .map_err(|e| e.to_string());
                    let _ = tx.send(res);
                });
            if let Err(e) = spawned {
                let (tx2, rx2) = mpsc::channel();
                let _ = tx2.send(Err(format!("cannot start reader thread: {e}")));
                return rx2;
            }
        }
    }
    rx
}

/// Kills the child's whole process group. Only ever called while the child is unreaped (its
/// exit is observed with `WNOWAIT` until the end of `collect`), so its pid, which is also the
/// group id because of `process_group(0)`, cannot have been reused by then.
fn kill_group(child: &mut Child) {
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: plain syscall on the process group we created for this child.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
}

/// The child's exit, observed without reaping it: `Ok(None)` while it runs.
fn exited(child: &Child) -> std::io::Result<Option<Status>> {
    let pid = libc::id_t::from(child.id());
    // SAFETY: `info` is a zeroed out-parameter that waitid fills; WNOWAIT leaves the child a
    // zombie, so its pid stays ours.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            pid,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: waitid succeeded, so the SIGCHLD fields of `info` are the ones filled in.
    let (who, code) = unsafe { (info.si_pid(), info.si_status()) };
    if who == 0 {
        return Ok(None);
    }
    Ok(Some(match info.si_code {
        libc::CLD_EXITED => Status::Exited(code),
        libc::CLD_KILLED | libc::CLD_DUMPED => Status::Signaled(code),
        other => Status::Broken(format!("unexpected waitid code {other}")),
    }))
}

/// Kills the group if asked, then reaps the child: the last thing done with it.
fn finish(child: &mut Child, kill: bool, result: ProbeResult) -> ProbeResult {
    if kill {
        kill_group(child);
    }
    let _ = child.wait();
    result
}

fn collect(child: &mut Child, timeout: Duration) -> ProbeResult {
    let deadline = Instant::now() + timeout;
    let out_rx = reader(child.stdout.take());
    let err_rx = reader(child.stderr.take());

    let mut pause = Duration::from_millis(1);
    let status = loop {
        match exited(child) {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => {
                return finish(
                    child,
                    true,
                    ProbeResult::bare(Status::Broken(e.to_string())),
                )
            }
        }
        let now = Instant::now();
        if now >= deadline {
            return finish(child, true, ProbeResult::bare(Status::Timeout));
        }
        thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(20));
    };

    // Like CPython we read to EOF, which a leftover grandchild can delay; bounded by the
    // same deadline, after which the group is killed and the readers abandoned.
    let mut outputs = Vec::with_capacity(2);
    for rx in [out_rx, err_rx] {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Ok(bytes)) => outputs.push(bytes),
            Ok(Err(e)) => return finish(child, true, ProbeResult::bare(Status::Broken(e))),
            Err(_) => return finish(child, true, ProbeResult::bare(Status::Timeout)),
        }
    }
    let stderr = outputs.pop().unwrap_or_default();
    let stdout = outputs.pop().unwrap_or_default();
    if stdout.len() > OUTPUT_CAP || stderr.len() > OUTPUT_CAP {
        return finish(child, true, ProbeResult::bare(Status::TooMuchOutput));
    }
    finish(
        child,
        false,
        ProbeResult {
            status,
            stdout,
            stderr,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(dir: &Path, name: &str, body: &str) -> String {
        let p = dir.join(name);
        crate::cuda::test_files::write_program(&p, body.as_bytes(), 0o755);
        p.to_str().unwrap().to_owned()
    }

    fn env() -> HashMap<String, String> {
        [("PATH".to_string(), "/usr/bin:/bin".to_string())].into()
    }

    fn go(cands: &[String], cwd: &Path, timeout: Duration) -> ProbeResult {
        let env = env();
        run_search(
            cands,
            &Invocation {
                arg0: "x",
                args: &["--version"],
                env: &env,
                cwd,
                timeout,
            },
        )
    }

    #[test]
    fn candidates_follow_cpython() {
        assert_eq!(
            exec_candidates("which", Some("/a:/b/")),
            ["/a/which", "/b/which"]
        );
        assert_eq!(exec_candidates("which", Some("")), ["which"]);
        assert_eq!(
            exec_candidates("which", Some("/a::")),
            ["/a/which", "which", "which"]
        );
        assert_eq!(
            exec_candidates("which", None),
            ["/bin/which", "/usr/bin/which"]
        );
        assert_eq!(exec_candidates("bin/nvcc", Some("/a")), ["bin/nvcc"]);
        assert_eq!(exec_candidates("/x/nvcc", Some("/a")), ["/x/nvcc"]);
    }

    #[test]
    fn captures_output_and_status() {
        let d = tempfile::tempdir().unwrap();
        let s = script(
            d.path(),
            "t",
            "#!/bin/sh\necho \"out $1\"\necho err >&2\nexit 3\n",
        );
        let r = go(&[s], d.path(), DEFAULT_TIMEOUT);
        assert_eq!(r.status, Status::Exited(3));
        assert_eq!(r.stdout, b"out --version\n");
        assert_eq!(r.stderr, b"err\n");
    }

    #[test]
    fn reports_signals_and_errnos() {
        let d = tempfile::tempdir().unwrap();
        let s = script(d.path(), "k", "#!/bin/sh\nkill -9 $$\n");
        assert_eq!(
            go(&[s], d.path(), DEFAULT_TIMEOUT).status,
            Status::Signaled(9)
        );
        let missing = d.path().join("nope").to_str().unwrap().to_owned();
        assert_eq!(
            go(std::slice::from_ref(&missing), d.path(), DEFAULT_TIMEOUT).status,
            Status::SpawnFailed(libc::ENOENT)
        );
        let noexec = d.path().join("noexec");
        crate::cuda::test_files::write_program(&noexec, b"#!/bin/sh\n", 0o644);
        let noexec = noexec.to_str().unwrap().to_owned();
        // First non-ENOENT error wins even when a later candidate would fail differently.
        assert_eq!(
            go(&[missing, noexec], d.path(), DEFAULT_TIMEOUT).status,
            Status::SpawnFailed(libc::EACCES)
        );
        let noshebang = script(d.path(), "plain", "echo hi\n");
        assert_eq!(
            go(&[noshebang], d.path(), DEFAULT_TIMEOUT).status,
            Status::SpawnFailed(libc::ENOEXEC)
        );
    }

    #[test]
    fn relative_candidates_use_cwd() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("bin")).unwrap();
        script(&d.path().join("bin"), "nvcc", "#!/bin/sh\necho rel\n");
        let r = go(&["bin/nvcc".to_string()], d.path(), DEFAULT_TIMEOUT);
        assert_eq!(r.status, Status::Exited(0));
        assert_eq!(r.stdout, b"rel\n");
    }

    #[test]
    fn hung_program_times_out_fast() {
        let d = tempfile::tempdir().unwrap();
        let s = script(d.path(), "hang", "#!/bin/sh\nsleep 60\necho never\n");
        let t0 = Instant::now();
        let r = go(&[s], d.path(), Duration::from_millis(300));
        assert_eq!(r.status, Status::Timeout);
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    }

    #[test]
    fn grandchild_holding_pipe_times_out() {
        let d = tempfile::tempdir().unwrap();
        let s = script(
            d.path(),
            "bg",
            "#!/bin/sh\nsleep 60 &\necho started\nexit 0\n",
        );
        let t0 = Instant::now();
        let r = go(&[s], d.path(), Duration::from_millis(300));
        assert_eq!(r.status, Status::Timeout);
        assert!(t0.elapsed() < Duration::from_secs(5));
    }
}
