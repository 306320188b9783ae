//! One process's report file under pressure: a disk that fills up in the middle of a run, and a
//! folder removed while the process still writes into it.
//!
//! The file holds whole lines only, and says where lines are missing (`GapLine`), so the merge
//! can tell a complete report from one that is not:
//! - Room for one gap line is kept allocated past the end of the file (`fallocate` with
//!   `FALLOC_FL_KEEP_SIZE`), so when the disk is full the file can still say that lines stop
//!   there. A line is written only after its own room and the next gap line's are allocated,
//!   so a full disk refuses the allocation, not the write: no line is ever cut. On a file
//!   system without `fallocate`, a failed write is cut back to the last whole line and the
//!   gap line is written if there is room.
//! - Later lines keep being tried (a disk fills and empties); the first one that goes out is
//!   preceded by a gap line with the number of lines lost.
//! - A file whose last link is gone (its folder removed) is replaced by a new one in a new
//!   folder of the same name, which starts with a gap line saying so. Each break line carries
//!   its site's running count in the process, so the merge's counts stay right for every
//!   site met again after that.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::record::{Gap, GapLine};

/// Attempts at a fresh name when `dynafold-<host>-<pid>.jsonl` already exists (a pid reused
/// from an earlier run into the same directory).
const NAME_ATTEMPTS: u32 = 100;

/// Bytes kept allocated past the end for the gap line (about 120 bytes with a long error).
const GAP_ROOM: u64 = 512;

pub struct ReportFile {
    file: File,
    path: PathBuf,
    /// Bytes of whole lines in the file.
    len: u64,
    /// Lines not written since the last one that was.
    lost: u64,
    /// The first failure's error, for the gap line.
    why: String,
    /// A gap line saying lines stop here is in the file (written once per run of failures).
    cut: bool,
    /// `fallocate` works on this file system.
    reserve: bool,
}

impl ReportFile {
    /// Creates `dir` (mode 0700) and a new file in it: O_EXCL, never through a symlink,
    /// readable by the owner only, as report folders are often shared scratch space.
    pub fn create(dir: &Path, host: &str) -> io::Result<ReportFile> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        let pid = std::process::id();
        let mut last = io::Error::new(io::ErrorKind::AlreadyExists, "no free file name");
        for n in 0..NAME_ATTEMPTS {
            let name = if n == 0 {
                format!("dynafold-{host}-{pid}.jsonl")
            } else {
                format!("dynafold-{host}-{pid}-{n}.jsonl")
            };
            let path = dir.join(name);
            match OpenOptions::new()
                .append(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(&path)
            {
                Ok(file) => {
                    return Ok(ReportFile {
                        file,
                        path,
                        len: 0,
                        lost: 0,
                        why: String::new(),
                        cut: false,
                        reserve: true,
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file has no name left: its folder (or the file) was removed while the process ran,
    /// and whatever is written to it can no longer be read by anyone.
    pub fn removed(&self) -> bool {
        self.file.metadata().is_ok_and(|m| {
            use std::os::unix::fs::MetadataExt;
            m.nlink() == 0
        })
    }

    /// Writes a gap line at the start of a file opened anew after `old` was removed.
    pub fn note_removed(&mut self, old: &Path) -> io::Result<()> {
        let gap = Gap {
            why: format!("{} was removed while the process ran", old.display()),
            time: super::sink::now(),
            removed: true,
            ..Gap::default()
        };
        self.append(&gap_text(gap))
    }

    /// Appends whole lines (`text` ends with a newline), or none of them. On failure the
    /// lines are counted as lost, the file says so where it can, and the error is returned
    /// for the caller's one warning.
    pub fn append(&mut self, text: &str) -> io::Result<()> {
        let mut out = String::new();
        if self.lost > 0 {
            out = gap_text(Gap {
                lost: Some(self.lost),
                why: self.why.clone(),
                time: super::sink::now(),
                removed: false,
            });
        }
        out.push_str(text);
        let result = self.room_for(out.len() as u64).and_then(|()| {
            self.file.write_all(out.as_bytes()).inspect_err(|_| {
                // Cut a partly written line back off: the file keeps whole lines only.
                let _ = self.file.set_len(self.len);
            })
        });
        match result {
            Ok(()) => {
                self.len += out.len() as u64;
                self.lost = 0;
                self.cut = false;
                Ok(())
            }
            Err(e) => {
                self.lose(&e);
                Err(e)
            }
        }
    }

    /// Counts one lost line and, at the first of a run of them, writes the gap line that says
    /// lines stop here, into the room kept for it.
    fn lose(&mut self, e: &io::Error) {
        if self.lost == 0 {
            self.why = e.to_string();
        }
        self.lost += 1;
        if self.cut {
            return;
        }
        self.cut = true;
        let gap = gap_text(Gap {
            lost: None,
            why: self.why.clone(),
            time: super::sink::now(),
            removed: false,
        });
        if self.file.write_all(gap.as_bytes()).is_ok() {
            self.len += gap.len() as u64;
        } else {
            let _ = self.file.set_len(self.len);
        }
    }

    /// Allocates `n` bytes past the end plus the room for the next gap line; a full disk
    /// fails here, before anything is written.
    fn room_for(&mut self, n: u64) -> io::Result<()> {
        if !self.reserve {
            return Ok(());
        }
        let (Ok(offset), Ok(len)) = (
            libc::off_t::try_from(self.len),
            libc::off_t::try_from(n + GAP_ROOM),
        ) else {
            return Ok(());
        };
        // SAFETY: a valid open descriptor; KEEP_SIZE leaves the file's size as it is.
        let rc = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_KEEP_SIZE,
                offset,
                len,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            // No fallocate here: plain writes, cut back on failure.
            Some(libc::EOPNOTSUPP | libc::ENOSYS | libc::EINVAL) => {
                self.reserve = false;
                Ok(())
            }
            Some(libc::EINTR) => Ok(()),
            _ => Err(e),
        }
    }
}

fn gap_text(gap: Gap) -> String {
    let mut text = serde_json::to_string(&GapLine { v: 1, gap }).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_removed_file_is_seen_removed() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("run");
        let mut f = ReportFile::create(&sub, "h").unwrap();
        f.append("{}\n").unwrap();
        assert!(!f.removed());
        std::fs::remove_dir_all(&sub).unwrap();
        assert!(f.removed());
        let old = f.path().to_path_buf();
        let mut again = ReportFile::create(&sub, "h").unwrap();
        again.note_removed(&old).unwrap();
        let text = std::fs::read_to_string(again.path()).unwrap();
        let gap: GapLine = serde_json::from_str(text.trim()).unwrap();
        assert!(gap.gap.removed && gap.gap.why.contains("was removed"));
    }

    #[test]
    fn failed_writes_are_counted_and_said_when_writing_resumes() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = ReportFile::create(dir.path(), "h").unwrap();
        f.append("{\"a\": 1}\n").unwrap();
        // A failure as a full disk gives it, without filling one.
        let full = io::Error::from_raw_os_error(libc::ENOSPC);
        f.lose(&full);
        f.lose(&full);
        f.append("{\"a\": 2}\n").unwrap();
        let text = std::fs::read_to_string(f.path()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        let cut: GapLine = serde_json::from_str(lines[1]).unwrap();
        let resumed: GapLine = serde_json::from_str(lines[2]).unwrap();
        assert_eq!((cut.gap.lost, resumed.gap.lost), (None, Some(2)));
        assert!(cut.gap.why.contains("No space left"), "{}", cut.gap.why);
        assert_eq!(lines[3], "{\"a\": 2}");
    }
}
