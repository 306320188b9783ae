//! Merging the report files of a run: one row per site, counts summed over processes.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use serde::Serialize;

use super::covered::is_covered;
use super::record::{Gap, GapLine, Line, ProcessLine, Record, SiteKey};
use super::runs::{select, utc_time, was_disabled};

/// One site across every process that hit it.
#[derive(Clone, Debug, Serialize)]
pub struct Site {
    pub key: SiteKey,
    /// Who owns the frame that broke (`Record::owner`): a package, or the user's own file.
    pub owner: String,
    pub count: u64,
    pub ranks: BTreeSet<i64>,
    pub pids: BTreeSet<u32>,
    pub hosts: BTreeSet<String>,
    pub torch: BTreeSet<String>,
    /// `true`/`false` when known: the same site can fail a fullgraph compile in one place and
    /// break a graph in another.
    pub fullgraph: BTreeSet<bool>,
    /// Would be folded with dynafold active (see `covered::is_covered`).
    pub covered: bool,
    /// At least one occurrence was met by a fullgraph=True compile that survey mode carried
    /// on: without it, that compile would have stopped here.
    pub survey: bool,
    pub hint: Option<String>,
    pub first_seen: f64,
    pub last_seen: f64,
    /// The first occurrence, for its frames and stack.
    pub record: Record,
}

impl Site {
    pub fn from_record(record: Record, count: u64) -> Site {
        let mut site = Site {
            key: record.site_key(),
            owner: record.owner(),
            count,
            ranks: BTreeSet::new(),
            pids: BTreeSet::new(),
            hosts: BTreeSet::new(),
            torch: BTreeSet::new(),
            fullgraph: BTreeSet::new(),
            covered: is_covered(&record),
            survey: false,
            hint: record.hint.clone(),
            first_seen: record.time,
            last_seen: record.time,
            record,
        };
        site.note(&site.record.clone(), "");
        site
    }

    /// Folds one more occurrence's ranks, pids, torch and fullgraph into the row.
    pub(crate) fn note(&mut self, r: &Record, host: &str) {
        self.ranks.extend(r.rank);
        if r.pid != 0 {
            self.pids.insert(r.pid);
        }
        if !host.is_empty() {
            self.hosts.insert(host.to_string());
        }
        self.torch.extend(r.torch.clone());
        self.fullgraph.extend(r.fullgraph);
        self.survey |= r.survey;
        if self.hint.is_none() {
            self.hint = r.hint.clone();
        }
        if r.time < self.first_seen {
            self.first_seen = r.time;
        }
        if r.time > self.last_seen {
            self.last_seen = r.time;
        }
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Merged {
    /// Most frequent first.
    pub sites: Vec<Site>,
    pub files: Vec<String>,
    pub total: u64,
    /// Unparseable last lines (a process killed mid-write); expected, not an error.
    pub torn_lines: usize,
    /// Unparseable lines elsewhere.
    pub bad_lines: usize,
    /// `*.jsonl` entries left out or cut short, each with why: one bad entry (a symlink, a
    /// FIFO, an unreadable or oversized file) must not cost the rest of the run its summary.
    pub skipped: Vec<String>,
    /// Break lines a process could not write (a full disk) or whose file was removed while it
    /// ran, one sentence per file and event, as the files' gap lines say (`append.rs`).
    pub missing: Vec<String>,
    /// The run of `dynafold run` these reports come from (`runs::select`).
    pub run: Option<String>,
    /// The folder's other, older runs, not merged.
    pub other_runs: Vec<String>,
    /// dynafold was disabled for this run (`runs::DISABLED_MARK`): nothing was watched.
    pub disabled: bool,
}

/// One owner's share of a report: its sites and their breaks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Owner {
    pub owner: String,
    pub sites: usize,
    pub count: u64,
}

/// The owners of `sites`, most breaks first (then by name), each once.
pub fn owners(sites: &[Site]) -> Vec<Owner> {
    let mut by: BTreeMap<&str, Owner> = BTreeMap::new();
    for s in sites {
        let o = by.entry(&s.owner).or_insert_with(|| Owner {
            owner: s.owner.clone(),
            sites: 0,
            count: 0,
        });
        o.sites += 1;
        o.count += s.count;
    }
    let mut out: Vec<Owner> = by.into_values().collect();
    out.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.owner.cmp(&b.owner)));
    out
}

/// `sites` grouped by owner, the owners in `owners`' order, each group in the order it had.
pub fn by_owner(sites: &[Site]) -> Vec<(Owner, Vec<&Site>)> {
    owners(sites)
        .into_iter()
        .map(|o| {
            let mine = sites.iter().filter(|s| s.owner == o.owner).collect();
            (o, mine)
        })
        .collect()
}

impl Merged {
    pub fn processes(&self) -> usize {
        self.files.len()
    }

    /// The owners of the sites, most breaks first.
    pub fn owners(&self) -> Vec<Owner> {
        owners(&self.sites)
    }

    pub fn ranks(&self) -> BTreeSet<i64> {
        self.sites
            .iter()
            .flat_map(|s| s.ranks.iter().copied())
            .collect()
    }
}

/// Bytes read from one report file. A line is a few hundred bytes and breaks are recorded when
/// Dynamo compiles, not per call, so this is far beyond a real run; a bigger file is not one
/// dynafold wrote, and reading it whole could exhaust the memory of the wrapper.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// The newest run of `dir` (or `dir` itself when it holds no run), named in the result.
pub fn merge_newest_run(dir: &Path) -> io::Result<Merged> {
    let selection = select(dir)?;
    let mut merged = merge_dir(&selection.dir)?;
    merged.run = selection.run;
    merged.other_runs = selection.other_runs;
    merged.disabled = was_disabled(&selection.dir);
    Ok(merged)
}

/// Reads every `*.jsonl` regular file directly in `dir`. Only the folder itself failing is an
/// error; each entry that cannot be read is a warning and a line in `skipped`.
pub fn merge_dir(dir: &Path) -> io::Result<Merged> {
    merge_dir_capped(dir, MAX_FILE_BYTES)
}

fn merge_dir_capped(dir: &Path, cap: u64) -> io::Result<Merged> {
    let mut skipped = Vec::new();
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        match entry {
            Ok(e) if e.path().extension().is_some_and(|x| x == "jsonl") => names.push(e.path()),
            Ok(_) => {}
            Err(e) => skipped.push(format!("{}: {e}", dir.display())),
        }
    }
    names.sort();
    let mut inputs = Vec::with_capacity(names.len());
    for p in names {
        match read_report_file(&p, cap) {
            // Lossy: a file with a bad byte still has good lines around it.
            Ok((bytes, whole)) => {
                if !whole {
                    skipped.push(format!(
                        "{}: larger than {cap} bytes; read the first {cap} only",
                        p.display()
                    ));
                }
                inputs.push((
                    p.display().to_string(),
                    String::from_utf8_lossy(&bytes).into_owned(),
                ));
            }
            Err(why) => skipped.push(format!("{}: {why}", p.display())),
        }
    }
    let mut merged = merge_texts(inputs);
    skipped.append(&mut merged.skipped);
    for why in &skipped {
        log::warn!("dynafold: report file skipped: {why}");
    }
    merged.skipped = skipped;
    Ok(merged)
}

/// At most `cap` bytes of `path` and whether that was all of it. Never follows a symlink
/// (a report folder is often shared scratch space) and never blocks on a FIFO: the type is
/// checked on the open descriptor, so the name cannot be swapped after the check.
fn read_report_file(path: &Path, cap: u64) -> Result<(Vec<u8>, bool), String> {
    let file: File = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => "a symlink; not followed".to_string(),
            _ => e.to_string(),
        })?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    let mut bytes = Vec::new();
    // One byte past the cap tells a file of exactly `cap` bytes from a longer one.
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    let whole = bytes.len() as u64 <= cap;
    if !whole {
        // Whole lines only: a cut line would be miscounted as a torn last line.
        let keep = bytes
            .get(..usize::try_from(cap).unwrap_or(usize::MAX))
            .and_then(|b| b.iter().rposition(|&c| c == b'\n'))
            .map_or(0, |i| i + 1);
        bytes.truncate(keep);
    }
    Ok((bytes, whole))
}

/// One `(name, contents)` per process file.
pub fn merge_texts(inputs: Vec<(String, String)>) -> Merged {
    let mut merged = Merged::default();
    let mut sites: BTreeMap<SiteKey, Site> = BTreeMap::new();
    for (name, text) in inputs {
        let (per_file, watched, torn, bad, gaps) = read_file(&text);
        // A process's file starts with its process line (sink.rs), so a file with neither that
        // nor a record is not a process: junk, or one killed before its first line was out.
        if per_file.is_empty() && !watched && gaps.is_empty() {
            merged.skipped.push(format!(
                "{name}: not a report: no record in it ({})",
                match (torn, bad) {
                    (0, 0) => "empty".to_string(),
                    (t, 0) if t > 0 => "only a torn line: a process stopped mid-write".into(),
                    (_, b) => format!("{b} unreadable line(s)"),
                }
            ));
            continue;
        }
        merged.torn_lines += torn;
        merged.bad_lines += bad;
        merged.missing.extend(missing_lines(&name, &gaps));
        merged.files.push(name);
        for (key, (count, host, lines)) in per_file {
            let mut lines = lines.into_iter();
            let Some(first) = lines.next() else { continue };
            let site = sites.entry(key).or_insert_with(|| {
                let mut s = Site::from_record(first.clone(), 0);
                s.pids.clear();
                s.ranks.clear();
                s
            });
            site.count += count;
            site.note(&first, &host);
            for r in lines {
                site.note(&r, &host);
            }
        }
    }
    let mut sites: Vec<Site> = sites.into_values().collect();
    sort_sites(&mut sites);
    merged.total = sites.iter().map(|s| s.count).sum();
    merged.sites = sites;
    merged
}

/// What a file's gap lines say is missing. A gap that says lines stop here, followed by one
/// that counts them once writing resumed, is one event: the count is said.
fn missing_lines(name: &str, gaps: &[Gap]) -> Vec<String> {
    let mut events: Vec<&Gap> = Vec::new();
    for g in gaps {
        if g.lost.is_some()
            && events
                .last()
                .is_some_and(|l| l.lost.is_none() && !l.removed)
        {
            events.pop();
        }
        events.push(g);
    }
    events
        .into_iter()
        .map(|g| match g.lost {
            _ if g.removed => format!(
                "{name}: opened anew at {}: {}; its breaks before then are lost, and sites met only before then are not in this report",
                utc_time(g.time),
                g.why
            ),
            Some(n) => format!(
                "{name}: {n} break line{} not written ({}); the counts are right again from the site's next break",
                if n == 1 { "" } else { "s" },
                g.why
            ),
            None => format!(
                "{name}: break lines not written from {} on ({}); this process's counts are a lower bound",
                utc_time(g.time),
                g.why
            ),
        })
        .collect()
}

pub fn sort_sites(sites: &mut [Site]) {
    sites.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
}

type PerFile = BTreeMap<SiteKey, (u64, String, Vec<Record>)>;

/// Per site in one process file: the highest running count seen (lines may be lost only at
/// the end), the host, and the records (first one first); then whether it holds a process
/// line, its torn and bad line counts, and its gap lines.
fn read_file(text: &str) -> (PerFile, bool, usize, usize, Vec<Gap>) {
    let (mut watched, mut torn, mut bad) = (false, 0, 0);
    let mut gaps = Vec::new();
    let mut out: PerFile = BTreeMap::new();
    let last = text.lines().filter(|l| !l.trim().is_empty()).count();
    for (i, raw) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        // Only a file's first line can be its process line (sink.rs writes it on opening), so
        // the break lines are not parsed twice.
        if i == 0 && serde_json::from_str::<ProcessLine>(raw).is_ok() {
            watched = true;
            continue;
        }
        let line: Line = match serde_json::from_str(raw) {
            Ok(l) => l,
            Err(_) if raw.contains("\"gap\"") && serde_json::from_str::<GapLine>(raw).is_ok() => {
                if let Ok(g) = serde_json::from_str::<GapLine>(raw) {
                    gaps.push(g.gap);
                }
                continue;
            }
            Err(_) if i + 1 == last && !text.ends_with('\n') => {
                torn += 1;
                continue;
            }
            Err(_) => {
                bad += 1;
                continue;
            }
        };
        let entry = out
            .entry(line.record.site_key())
            .or_insert_with(|| (0, line.host.clone(), Vec::new()));
        entry.0 = entry.0.max(line.count);
        entry.2.push(line.record);
    }
    (out, watched, torn, bad, gaps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::record::Frame;

    pub(crate) fn line(pid: u32, rank: Option<i64>, user_line: u32, count: u64) -> String {
        let l = Line {
            v: 1,
            count,
            host: "h1".into(),
            record: Record {
                time: 100.0 + count as f64,
                pid,
                rank,
                torch: Some("2.9.1".into()),
                break_type: "gb0007".into(),
                reason: "Dynamo does not know how to trace the builtin `posix.stat.`".into(),
                user_frame: Some(Frame {
                    file: "/srv/model.py".into(),
                    line: user_line,
                    function: "forward".into(),
                    ..Frame::default()
                }),
                hint: Some("file-system access".into()),
                fullgraph: Some(false),
                ..Record::default()
            },
        };
        serde_json::to_string(&l).unwrap()
    }

    #[test]
    fn two_processes_merge_by_site_with_ranks_and_a_torn_last_line() {
        let a = format!(
            "{}\n{}\n{}\n",
            line(10, Some(0), 42, 1),
            line(10, Some(0), 42, 2),
            line(10, Some(0), 50, 1)
        );
        let full_b = line(11, Some(1), 42, 2);
        let b = format!(
            "{}\n{}",
            line(11, Some(1), 42, 1),
            &full_b[..full_b.len() / 2]
        );
        let m = merge_texts(vec![("a".into(), a), ("b".into(), b)]);
        assert_eq!(m.processes(), 2);
        assert_eq!(m.torn_lines, 1);
        assert_eq!(m.bad_lines, 0);
        assert_eq!(m.sites.len(), 2);
        let top = &m.sites[0];
        assert_eq!(top.key.user_frame, "/srv/model.py:42");
        assert_eq!(top.count, 3, "2 from pid 10, 1 surviving from pid 11");
        assert_eq!(top.ranks.iter().copied().collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(top.pids.iter().copied().collect::<Vec<_>>(), vec![10, 11]);
        assert_eq!(m.sites[1].count, 1);
        assert_eq!(m.total, 4);
        assert_eq!(m.ranks().len(), 2);
    }

    #[test]
    fn a_bad_line_in_the_middle_is_counted_not_fatal() {
        let a = format!("{}\n{{nope\n{}\n", line(1, None, 1, 1), line(1, None, 1, 2));
        let m = merge_texts(vec![("a".into(), a)]);
        assert_eq!(m.bad_lines, 1);
        assert_eq!(m.sites[0].count, 2);
        assert!(m.sites[0].ranks.is_empty());
    }

    #[test]
    fn files_without_a_record_are_named_not_counted_as_processes() {
        let good = line(1, None, 1, 1) + "\n";
        let m = merge_texts(vec![
            ("good.jsonl".into(), good),
            ("junk.jsonl".into(), "hello\nworld\n".into()),
            ("empty.jsonl".into(), String::new()),
            ("torn.jsonl".into(), "{\"v\": 1, \"cou".into()),
        ]);
        assert_eq!((m.processes(), m.total), (1, 1));
        assert_eq!(
            (m.bad_lines, m.torn_lines),
            (0, 0),
            "junk's lines are not counted twice"
        );
        assert_eq!(m.skipped.len(), 3, "{:#?}", m.skipped);
        assert!(
            m.skipped[0].starts_with("junk.jsonl: not a report")
                && m.skipped[0].contains("2 unreadable")
        );
        assert!(m.skipped[1].starts_with("empty.jsonl") && m.skipped[1].contains("empty"));
        assert!(m.skipped[2].starts_with("torn.jsonl") && m.skipped[2].contains("torn"));
    }

    #[test]
    fn gap_lines_say_what_is_missing_per_file() {
        let gap = |lost: Option<u64>, removed: bool| {
            let g = GapLine {
                v: 1,
                gap: Gap {
                    lost,
                    why: "No space left on device (os error 28)".into(),
                    time: 1_796_107_286.0,
                    removed,
                },
            };
            serde_json::to_string(&g).unwrap()
        };
        // Disk full, then space again: one event, counted.
        let resumed = format!(
            "{}\n{}\n{}\n{}\n",
            line(1, None, 1, 1),
            gap(None, false),
            gap(Some(3), false),
            line(1, None, 1, 5)
        );
        // Disk full to the end.
        let still = format!("{}\n{}\n", line(2, None, 1, 1), gap(None, false));
        // Opened anew after its folder was removed: a gap line, then the counts go on.
        let anew = format!("{}\n{}\n", gap(None, true), line(3, None, 1, 4));
        let m = merge_texts(vec![
            ("a".into(), resumed),
            ("b".into(), still),
            ("c".into(), anew),
        ]);
        assert_eq!((m.processes(), m.total, m.bad_lines), (3, 10, 0));
        assert_eq!(m.missing.len(), 3, "{:#?}", m.missing);
        assert!(m.missing[0].starts_with("a: 3 break lines not written (No space"));
        assert!(
            m.missing[1].starts_with("b: break lines not written from 2026-12-01 06:41:26 UTC on")
        );
        assert!(m.missing[2].starts_with("c: opened anew at 2026-12-01 06:41:26 UTC"));
        let table = crate::report::table::render(&m);
        assert!(table.contains("  missing a: 3 break lines"), "{table}");
    }

    #[test]
    fn merge_dir_reads_only_jsonl_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("dynafold-h-1.jsonl"),
            line(1, Some(0), 5, 1) + "\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("dynafold-h-2.jsonl"),
            line(2, Some(1), 5, 1) + "\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        let m = merge_dir(dir.path()).unwrap();
        assert_eq!(m.processes(), 2);
        assert_eq!(m.sites.len(), 1);
        assert_eq!(m.sites[0].count, 2);
        assert_eq!(m.sites[0].hosts.iter().collect::<Vec<_>>(), vec!["h1"]);
    }

    #[test]
    fn merge_dir_skips_symlinks_fifos_folders_and_unreadable_entries_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("dynafold-h-1.jsonl"),
            line(1, Some(0), 5, 1) + "\n",
        )
        .unwrap();
        // A good file reached through a symlink: someone else's data, not this run's.
        let foreign = outside.path().join("other.jsonl");
        std::fs::write(&foreign, line(2, Some(1), 5, 1) + "\n").unwrap();
        std::os::unix::fs::symlink(&foreign, dir.path().join("a-link.jsonl")).unwrap();
        // A "regular file" whose read fails (EIO): used to fail the whole merge.
        std::os::unix::fs::symlink("/proc/self/mem", dir.path().join("b-mem.jsonl")).unwrap();
        let fifo = std::ffi::CString::new(
            dir.path()
                .join("c-fifo.jsonl")
                .into_os_string()
                .into_encoded_bytes(),
        )
        .unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        std::fs::create_dir(dir.path().join("d-dir.jsonl")).unwrap();

        // A FIFO nobody writes to would block the open forever: bound the wait.
        let path = dir.path().to_path_buf();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            tx.send(merge_dir(&path).map(Box::new).map_err(|e| e.to_string()))
        });
        let m = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("merge_dir blocked on a FIFO")
            .expect("one bad entry must not fail the merge");
        assert_eq!((m.processes(), m.total), (1, 1));
        assert_eq!(m.skipped.len(), 4, "{:#?}", m.skipped);
        let why = |name: &str| {
            m.skipped
                .iter()
                .find(|s| s.contains(name))
                .unwrap_or_else(|| panic!("{name} not in {:#?}", m.skipped))
                .clone()
        };
        assert!(why("a-link.jsonl").contains("symlink"));
        assert!(why("b-mem.jsonl").contains("symlink"));
        assert!(why("c-fifo.jsonl").contains("not a regular file"));
        assert!(why("d-dir.jsonl").contains("not a regular file"));
        assert!(crate::report::table::render(&m).contains("c-fifo.jsonl"));
    }

    #[test]
    fn merge_dir_reads_at_most_the_cap_in_whole_lines() {
        let dir = tempfile::tempdir().unwrap();
        let one = line(1, None, 5, 1) + "\n";
        let two = line(1, None, 5, 2) + "\n";
        let big = dir.path().join("dynafold-h-1.jsonl");
        std::fs::write(&big, format!("{one}{two}")).unwrap();
        // A cap inside the second line: only the first, whole, is read.
        let cap = (one.len() + 10) as u64;
        let m = merge_dir_capped(dir.path(), cap).unwrap();
        assert_eq!((m.total, m.torn_lines, m.bad_lines), (1, 0, 0));
        assert_eq!(m.skipped.len(), 1);
        assert!(m.skipped[0].contains("larger than"), "{:?}", m.skipped);
        // Exactly the cap is the whole file.
        let m = merge_dir_capped(dir.path(), (one.len() + two.len()) as u64).unwrap();
        assert_eq!((m.total, m.skipped.len()), (2, 0));
        // A huge sparse file costs the cap, not its size.
        let f = std::fs::OpenOptions::new().append(true).open(&big).unwrap();
        f.set_len(8 << 30).unwrap();
        let m = merge_dir(dir.path()).unwrap();
        assert_eq!(m.total, 2);
        assert!(m.skipped[0].contains("larger than"), "{:?}", m.skipped);
    }
}
