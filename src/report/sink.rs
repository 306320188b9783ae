//! The per-process recorder: counts sites in memory and, with a report directory, appends one
//! JSON line per occurrence to `<dir>/dynafold-<host>-<pid>.jsonl`, after a first line naming
//! the process (written when the observer is installed, so a process that never breaks is
//! still seen to have watched).
//!
//! One line per occurrence (not per new site): each line carries the site's running count in
//! this process, so the file is append-only, every line stands alone, and a process killed at
//! any point leaves at worst one torn last line. Lines are written with a single `write` on
//! an unbuffered file, so nothing waits in a buffer when the process dies. A full disk or a
//! removed folder is `append.rs`'s business: the file says what it is missing.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;

use dashmap::DashMap;

use super::append::ReportFile;
use super::merge::Site;
use super::record::{Line, Process, ProcessLine, Record, SiteKey};

/// What a process does when a line did not go out: the file says so (`append.rs`).
const LOSING: &str = "trying again at the next break; `dynafold report` will say what is missing";

pub struct Recorder {
    /// The process whose breaks `sites` and `file` hold: a forked child inherits both, and
    /// must neither report the parent's breaks as its own nor append to the parent's file.
    owner: AtomicU32,
    sites: DashMap<SiteKey, Site>,
    dir: Option<PathBuf>,
    host: String,
    file: Mutex<FileState>,
    warned: AtomicBool,
}

enum FileState {
    NotOpened,
    Open(ReportFile),
    Failed,
}

impl Recorder {
    /// `dir`: where to write; `None` keeps counts in memory only.
    pub fn new(dir: Option<PathBuf>) -> Self {
        Recorder {
            owner: AtomicU32::new(std::process::id()),
            sites: DashMap::new(),
            dir,
            host: hostname(),
            file: Mutex::new(FileState::NotOpened),
            warned: AtomicBool::new(false),
        }
    }

    /// Reads `DYNAFOLD_REPORT_DIR` (unset, empty or relative: memory only; relative gets a
    /// warning, since it would move with the process's `chdir`).
    pub fn from_env() -> Self {
        Recorder::new(crate::config::dir("DYNAFOLD_REPORT_DIR"))
    }

    /// Counts one occurrence and appends its line; returns the site's count in this process.
    pub fn record(&self, record: Record) -> u64 {
        self.forget_parent_after_fork();
        let key = record.site_key();
        let count = {
            let mut entry = self
                .sites
                .entry(key)
                .or_insert_with(|| Site::from_record(record.clone(), 0));
            entry.count += 1;
            if entry.count > 1 {
                entry.note(&record, &self.host);
            }
            entry.count
        };
        if self.dir.is_some() {
            let line = Line {
                v: 1,
                count,
                host: self.host.clone(),
                record,
            };
            self.append(&line);
        }
        count
    }

    /// Sites seen in this process, as rows for the table.
    pub fn sites(&self) -> Vec<Site> {
        self.forget_parent_after_fork();
        self.sites.iter().map(|e| e.value().clone()).collect()
    }

    pub fn total(&self) -> u64 {
        self.forget_parent_after_fork();
        self.sites.iter().map(|e| e.value().count).sum()
    }

    /// The report file, once one has been opened.
    pub fn path(&self) -> Option<PathBuf> {
        self.forget_parent_after_fork();
        match &*self.file.lock().ok()? {
            FileState::Open(file) => Some(file.path().to_path_buf()),
            _ => None,
        }
    }

    /// A forked child starts from nothing: no sites, no file (its breaks go to a file named
    /// after its own pid). Checked on every read as well as every record, since a child that
    /// exits before its first break still prints the exit summary.
    fn forget_parent_after_fork(&self) {
        let pid = std::process::id();
        if self.owner.load(Ordering::Acquire) == pid {
            return;
        }
        let Ok(mut state) = self.file.lock() else {
            return;
        };
        // Re-read under the lock: another thread of the child may have reset already.
        if self.owner.load(Ordering::Acquire) == pid {
            return;
        }
        // The parent's descriptor is shared with it; dropping the child's copy leaves the
        // parent's file open in the parent. A parent whose folder failed gets a fresh try.
        *state = FileState::NotOpened;
        self.sites.clear();
        self.owner.store(pid, Ordering::Release);
    }

    /// Opens this process's file now (with a report directory), so the run shows the process
    /// watched even if it never breaks. Called when the observer is installed.
    pub fn watch(&self) {
        self.forget_parent_after_fork();
        if self.dir.is_none() {
            return;
        }
        if let Ok(mut state) = self.file.lock() {
            self.open_once(&mut state);
        }
    }

    fn append(&self, line: &Line) {
        let Ok(mut text) = serde_json::to_string(line) else {
            return;
        };
        text.push('\n');
        let Ok(mut state) = self.file.lock() else {
            return;
        };
        self.open_once(&mut state);
        self.write(&mut state, &text);
    }

    /// A file is opened once per process and starts with the process line.
    fn open_once(&self, state: &mut FileState) {
        if !matches!(state, FileState::NotOpened) {
            return;
        }
        *state = self.open_new();
    }

    /// A new file with its process line (`FileState::Failed` when the folder refuses it).
    fn open_new(&self) -> FileState {
        let Some(dir) = self.dir.as_deref() else {
            return FileState::Failed;
        };
        let mut file = match ReportFile::create(dir, &self.host) {
            Ok(f) => f,
            Err(e) => {
                self.warn_once(&e, "counting in memory only");
                return FileState::Failed;
            }
        };
        let head = ProcessLine {
            v: 1,
            process: Process {
                pid: std::process::id(),
                host: self.host.clone(),
                time: now(),
            },
        };
        if let Ok(mut text) = serde_json::to_string(&head) {
            text.push('\n');
            if let Err(e) = file.append(&text) {
                self.warn_once(&e, LOSING);
            }
        }
        FileState::Open(file)
    }

    fn write(&self, state: &mut FileState, text: &str) {
        let FileState::Open(file) = state else {
            return;
        };
        if file.removed() {
            // Its folder was removed under the running process: lines written now would go
            // into a file nobody can read. A new file, in the folder made anew, says so first.
            let old = file.path().to_path_buf();
            *state = self.open_new();
            let FileState::Open(file) = state else {
                return;
            };
            if let Err(e) = file.note_removed(&old) {
                self.warn_once(&e, LOSING);
            }
            log::warn!(
                "dynafold: graph-break report {} was removed while this process ran; writing on in {}",
                old.display(),
                file.path().display()
            );
        }
        let FileState::Open(file) = state else {
            return;
        };
        if let Err(e) = file.append(text) {
            // The file stays open: a disk that filled up may empty again, and the lines lost
            // meanwhile are counted in the file.
            self.warn_once(&e, LOSING);
        }
    }

    fn warn_once(&self, e: &io::Error, then: &str) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            let dir = self.dir.as_deref().unwrap_or(Path::new("?"));
            log::warn!(
                "dynafold: cannot write graph-break report in {}: {e}; {then}",
                dir.display()
            );
        }
    }
}

pub(crate) fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The host name, reduced to characters safe in a file name.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates on success
    // (and the last byte stays 0 for the truncation case because we pass len - 1).
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len() - 1) };
    let raw = if rc == 0 {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(buf.get(..end).unwrap_or(&[])).into_owned()
    } else {
        String::new()
    };
    let clean: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.is_empty() {
        "host".to_string()
    } else {
        clean
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::record::Frame;
    use std::os::unix::fs::PermissionsExt;

    fn rec(line: u32) -> Record {
        Record {
            pid: std::process::id(),
            break_type: "gb0059".into(),
            reason: "print".into(),
            user_frame: Some(Frame {
                file: "/m.py".into(),
                line,
                function: "f".into(),
                ..Frame::default()
            }),
            ..Record::default()
        }
    }

    #[test]
    fn counts_sites_and_appends_one_line_per_occurrence() {
        let dir = tempfile::tempdir().unwrap();
        let r = Recorder::new(Some(dir.path().join("sub")));
        assert_eq!(r.record(rec(1)), 1);
        assert_eq!(r.record(rec(1)), 2);
        assert_eq!(r.record(rec(2)), 1);
        assert_eq!(r.total(), 3);
        let mut again = rec(1);
        again.fullgraph = Some(true);
        again.rank = Some(4);
        r.record(again);
        let site = r.sites().into_iter().find(|s| s.count == 3).unwrap();
        assert!(site.fullgraph.contains(&true));
        assert!(site.ranks.contains(&4));
        assert_eq!(r.sites().len(), 2);
        let path = r.path().unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        let text = std::fs::read_to_string(&path).unwrap();
        let head: ProcessLine = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(head.process.pid, std::process::id());
        let lines: Vec<Line> = text
            .lines()
            .skip(1)
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(
            lines.iter().map(|l| l.count).collect::<Vec<_>>(),
            vec![1, 2, 1, 3]
        );
    }

    #[test]
    fn a_watching_process_without_breaks_is_a_process_in_the_merge() {
        let dir = tempfile::tempdir().unwrap();
        let r = Recorder::new(Some(dir.path().to_path_buf()));
        r.watch();
        r.watch();
        let path = r.path().expect("watch opens the file");
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 1);
        let merged = crate::report::merge::merge_dir(dir.path()).unwrap();
        assert_eq!((merged.processes(), merged.total), (1, 0));
        assert!(merged.skipped.is_empty(), "{:?}", merged.skipped);
        assert!(crate::report::table::render(&merged)
            .starts_with("dynafold: no graph breaks in 1 process\n"));
        // The first break goes under the same process line.
        r.record(rec(1));
        let merged = crate::report::merge::merge_dir(dir.path()).unwrap();
        assert_eq!((merged.processes(), merged.total), (1, 1));
        // Without a folder, watching writes nothing anywhere.
        let memory = Recorder::new(None);
        memory.watch();
        assert!(memory.path().is_none());
    }

    #[test]
    fn concurrent_records_give_whole_lines_and_exact_counts() {
        let dir = tempfile::tempdir().unwrap();
        let r = std::sync::Arc::new(Recorder::new(Some(dir.path().to_path_buf())));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let r = r.clone();
                std::thread::spawn(move || {
                    for _ in 0..50 {
                        r.record(rec(t % 2));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(r.total(), 200);
        let text = std::fs::read_to_string(r.path().unwrap()).unwrap();
        let merged = crate::report::merge::merge_texts(vec![("f".into(), text)]);
        assert_eq!(
            (merged.bad_lines, merged.torn_lines, merged.total),
            (0, 0, 200)
        );
    }

    #[test]
    fn existing_name_or_symlink_is_never_reused() {
        let dir = tempfile::tempdir().unwrap();
        let host = hostname();
        let taken = dir
            .path()
            .join(format!("dynafold-{host}-{}.jsonl", std::process::id()));
        std::os::unix::fs::symlink("/dev/null", &taken).unwrap();
        let r = Recorder::new(Some(dir.path().to_path_buf()));
        r.record(rec(1));
        let path = r.path().unwrap();
        assert_ne!(path, taken);
        assert!(path.to_string_lossy().ends_with("-1.jsonl"));
    }

    /// Runs `child` in a forked copy of this process; its return value is the exit code.
    /// Only async-signal-tolerant work belongs in `child`: no panics, no printing.
    fn in_forked_child(child: impl FnOnce() -> i32) -> i32 {
        // SAFETY: the child only runs `child` (allocation is fork-safe with glibc) and leaves
        // with _exit, so no destructor or atexit handler of the test harness runs twice.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child)).unwrap_or(99);
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waiting for the child forked just above.
        let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(waited, pid);
        assert!(libc::WIFEXITED(status), "child died: status {status}");
        libc::WEXITSTATUS(status)
    }

    #[test]
    fn forked_child_starts_empty_before_its_first_break() {
        for dir in [None, Some(tempfile::tempdir().unwrap())] {
            let r = Recorder::new(dir.as_ref().map(|d| d.path().to_path_buf()));
            r.record(rec(1));
            r.record(rec(1));
            let parent_file = r.path();
            let code = in_forked_child(|| {
                // Exit summary of a child that never broke: nothing of the parent's.
                if r.total() != 0 || !r.sites().is_empty() {
                    return 1;
                }
                if r.path().is_some() {
                    return 2;
                }
                // Its first break is its own first, in its own file.
                if r.record(rec(1)) != 1 || r.total() != 1 {
                    return 3;
                }
                if dir.is_some() && (r.path().is_none() || r.path() == parent_file) {
                    return 4;
                }
                0
            });
            assert_eq!(code, 0, "report dir {:?}", dir.as_ref().map(|d| d.path()));
            assert_eq!(r.total(), 2, "the parent keeps its own counts");
            assert_eq!(r.path(), parent_file);
            if let Some(dir) = &dir {
                let merged = crate::report::merge::merge_dir(dir.path()).unwrap();
                assert_eq!((merged.processes(), merged.total), (2, 3));
            }
        }
    }

    #[test]
    fn unwritable_dir_keeps_counting_in_memory() {
        let r = Recorder::new(Some(PathBuf::from("/proc/definitely/not/here")));
        assert_eq!(r.record(rec(1)), 1);
        assert_eq!(r.record(rec(1)), 2);
        assert!(r.path().is_none());
        assert!(r.warned.load(Ordering::Relaxed));
    }
}
