//! Merging the report files of a run: one row per site, counts summed over processes.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::Path;

use serde::Serialize;

use super::covered::is_covered;
use super::record::{Line, Record, SiteKey};

/// One site across every process that hit it.
#[derive(Clone, Debug, Serialize)]
pub struct Site {
    pub key: SiteKey,
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
            count,
            ranks: BTreeSet::new(),
            pids: BTreeSet::new(),
            hosts: BTreeSet::new(),
            torch: BTreeSet::new(),
            fullgraph: BTreeSet::new(),
            covered: is_covered(&record),
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
}

impl Merged {
    pub fn processes(&self) -> usize {
        self.files.len()
    }

    pub fn ranks(&self) -> BTreeSet<i64> {
        self.sites
            .iter()
            .flat_map(|s| s.ranks.iter().copied())
            .collect()
    }
}

/// Reads every `*.jsonl` file directly in `dir`.
pub fn merge_dir(dir: &Path) -> io::Result<Merged> {
    let mut names: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl") && p.is_file())
        .collect();
    names.sort();
    let mut inputs = Vec::with_capacity(names.len());
    for p in names {
        // Lossy: a file with a bad byte still has good lines around it.
        let bytes = std::fs::read(&p)?;
        inputs.push((
            p.display().to_string(),
            String::from_utf8_lossy(&bytes).into_owned(),
        ));
    }
    Ok(merge_texts(inputs))
}

/// One `(name, contents)` per process file.
pub fn merge_texts(inputs: Vec<(String, String)>) -> Merged {
    let mut merged = Merged::default();
    let mut sites: BTreeMap<SiteKey, Site> = BTreeMap::new();
    for (name, text) in inputs {
        let per_file = read_file(&text, &mut merged);
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

pub fn sort_sites(sites: &mut [Site]) {
    sites.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
}

type PerFile = BTreeMap<SiteKey, (u64, String, Vec<Record>)>;

/// Per site in one process file: the highest running count seen (lines may be lost only at
/// the end), the host, and the records (first one first).
fn read_file(text: &str, merged: &mut Merged) -> PerFile {
    let mut out: PerFile = BTreeMap::new();
    let last = text.lines().filter(|l| !l.trim().is_empty()).count();
    for (i, raw) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        let line: Line = match serde_json::from_str(raw) {
            Ok(l) => l,
            Err(_) if i + 1 == last && !text.ends_with('\n') => {
                merged.torn_lines += 1;
                continue;
            }
            Err(_) => {
                merged.bad_lines += 1;
                continue;
            }
        };
        let entry = out
            .entry(line.record.site_key())
            .or_insert_with(|| (0, line.host.clone(), Vec::new()));
        entry.0 = entry.0.max(line.count);
        entry.2.push(line.record);
    }
    out
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
}
