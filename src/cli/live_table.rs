//! `dynafold doctor --ops` on a FlashInfer release with no shipped table: the table traced
//! here and now, by the same program that wrote the shipped ones (integration/api_status/
//! trace_all.py, carried in the binary), in the user's own interpreter with the preload. A
//! release nobody measured gets an answer, not "none for X"; it takes a minute or more, so
//! each op traced is said on stderr as it finishes.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::cli::api_table::{self, Ops};
use crate::cli::run::preload_value;

/// trace_all.py and what it imports, as (path under the folder it runs from, source).
const SCRIPTS: &[(&str, &str)] = &[
    (
        "trace_all.py",
        include_str!("../../integration/api_status/trace_all.py"),
    ),
    (
        "trace_all_keys.py",
        include_str!("../../integration/api_status/trace_all_keys.py"),
    ),
    (
        "public_api.py",
        include_str!("../../integration/api_status/public_api.py"),
    ),
    (
        "reasons.py",
        include_str!("../../integration/api_status/reasons.py"),
    ),
    (
        "standins.py",
        include_str!("../../integration/api_status/standins.py"),
    ),
    (
        "verdicts.py",
        include_str!("../../integration/api_status/verdicts.py"),
    ),
    (
        "builders/__init__.py",
        include_str!("../../integration/api_status/builders/__init__.py"),
    ),
    (
        "builders/attention.py",
        include_str!("../../integration/api_status/builders/attention.py"),
    ),
    (
        "builders/elementwise.py",
        include_str!("../../integration/api_status/builders/elementwise.py"),
    ),
    (
        "builders/fit.py",
        include_str!("../../integration/api_status/builders/fit.py"),
    ),
    (
        "builders/linear_attention.py",
        include_str!("../../integration/api_status/builders/linear_attention.py"),
    ),
    (
        "builders/moe_comm.py",
        include_str!("../../integration/api_status/builders/moe_comm.py"),
    ),
    (
        "builders/quant_gemm.py",
        include_str!("../../integration/api_status/builders/quant_gemm.py"),
    ),
    (
        "builders/sampling_kv.py",
        include_str!("../../integration/api_status/builders/sampling_kv.py"),
    ),
];

/// The whole trace; a release's table took 40 s to 3 min on two cores (per op: trace_all.py's
/// own limit).
const TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// The statuses trace_all.py prints, one op a line (`fake          rmsnorm`).
fn op_line(line: &str) -> Option<(&str, &str)> {
    let status = api_table::statuses()
        .iter()
        .find(|s| line.starts_with(*s) && line[s.len()..].starts_with(' '))?;
    Some((status, line[status.len()..].trim()))
}

/// Traces `release`'s public ops in `python` with the preload `lib`, saying each op on stderr
/// as it finishes. The table's ops and the seconds it took, or why there is none.
pub fn trace(python: &Path, lib: &Path, release: &str) -> Result<(Ops, u64), String> {
    let dir = scratch_dir()?;
    let result = trace_in(&dir, python, lib, release);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn scratch_dir() -> Result<PathBuf, String> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!("dynafold-ops-{}-{stamp}", std::process::id()));
    std::fs::create_dir_all(dir.join("builders")).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}

fn trace_in(dir: &Path, python: &Path, lib: &Path, release: &str) -> Result<(Ops, u64), String> {
    let write = |path: &Path, text: &str| {
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
    };
    for (name, text) in SCRIPTS {
        write(&dir.join(name), text)?;
    }
    // The conditions the shipped tables were traced in (scripts/api-status): FlashInfer asks
    // nvcc for the CUDA version (a named stand-in, 12.8: nothing is compiled, the kernels are
    // stand-ins) and targets the GPUs it sees (none are used: named by its own variable).
    let nvcc = dir.join("cuda/bin/nvcc");
    std::fs::create_dir_all(dir.join("cuda/bin")).map_err(|e| e.to_string())?;
    write(
        &nvcc,
        "#!/bin/sh\necho \"Cuda compilation tools, release 12.8, V12.8.93\"\n",
    )?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&nvcc, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| e.to_string())?;
    }
    let out = dir.join("traced.json");
    let mut child = Command::new(python)
        .arg(dir.join("trace_all.py"))
        .arg(&out)
        .env(
            "LD_PRELOAD",
            preload_value(lib, std::env::var_os("LD_PRELOAD").as_deref()),
        )
        .env("CUDA_HOME", dir.join("cuda"))
        .env("FLASHINFER_WORKSPACE_BASE", dir.join("fi"))
        .env("FLASHINFER_CUDA_ARCH_LIST", "9.0a 10.0a 11.0a 12.0a")
        .env("DYNAFOLD_LOG", "error")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", python.display()))?;
    let started = Instant::now();
    // The trace is bounded: past TIMEOUT the child is killed, which ends the reading below.
    let pid = child.id() as i32;
    let finished = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = finished.clone();
    let watchdog = std::thread::spawn(move || {
        while started.elapsed() < TIMEOUT {
            std::thread::sleep(Duration::from_millis(200));
            if seen.load(std::sync::atomic::Ordering::Relaxed) {
                return;
            }
        }
        // SAFETY: the child is reaped only after this thread is joined, so the pid is still
        // the child's (a zombie at worst).
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    });
    let (mut total, mut done, mut tail) = (None::<usize>, 0usize, Vec::<String>::new());
    if let Some(err) = child.stderr.take() {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if let Some(n) = line
                .strip_prefix("tracing ")
                .and_then(|r| r.split(' ').next())
            {
                total = n.parse().ok();
            }
            match op_line(&line) {
                Some((status, name)) => {
                    done += 1;
                    let of = total.map_or(String::new(), |t| format!("/{t}"));
                    eprintln!(
                        "dynafold doctor: tracing FlashInfer {release} live: {done}{of} {name}: {status} ({}s)",
                        started.elapsed().as_secs()
                    );
                }
                None if !line.trim().is_empty() => {
                    tail.push(line);
                    if tail.len() > 20 {
                        tail.remove(0);
                    }
                }
                None => {}
            }
        }
    }
    finished.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = watchdog.join();
    let status = child.wait().map_err(|e| e.to_string())?;
    let seconds = started.elapsed().as_secs();
    if !status.success() {
        let why = tail
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map_or("no message", String::as_str);
        return Err(if seconds >= TIMEOUT.as_secs() {
            format!("the trace ran past {} min", TIMEOUT.as_secs() / 60)
        } else {
            format!("the trace failed ({status}): {why}")
        });
    }
    let text = std::fs::read_to_string(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let ops = api_table::parse(&text).ok_or("the trace wrote no table")?;
    Ok((ops, seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_trace_alls_op_lines_and_nothing_else() {
        assert_eq!(op_line("fake          rmsnorm"), Some(("fake", "rmsnorm")));
        assert_eq!(
            op_line("out of scope  comm.allreduce"),
            Some(("out of scope", "comm.allreduce"))
        );
        assert_eq!(
            op_line("fails         gemm.mm_fp8"),
            Some(("fails", "gemm.mm_fp8"))
        );
        assert_eq!(op_line("fakes were checked"), None);
        assert_eq!(op_line("UserWarning: fails"), None);
    }

    /// Every module trace_all.py imports from its own folder is carried.
    #[test]
    fn carries_every_module_trace_all_imports() {
        let carried: Vec<&str> = SCRIPTS.iter().map(|(p, _)| *p).collect();
        for (_, text) in SCRIPTS {
            for line in text.lines() {
                let Some(module) = line
                    .strip_prefix("import ")
                    .map(|m| m.split([' ', ',']).next().unwrap_or(""))
                else {
                    continue;
                };
                let file = format!("{module}.py");
                let local = Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("integration/api_status")
                    .join(&file);
                if local.exists() {
                    assert!(carried.contains(&file.as_str()), "{file} is not carried");
                }
            }
        }
        let builders = std::fs::read_dir(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("integration/api_status/builders"),
        )
        .expect("builders/");
        for entry in builders.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".py") {
                let path = format!("builders/{name}");
                assert!(carried.contains(&path.as_str()), "{path} is not carried");
            }
        }
    }
}
