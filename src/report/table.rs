//! What people read: one block per site, grouped by the owner of the frame that broke (the
//! package, or the user's own file), most breaks first, and the same data as JSON.
//!
//! A site needs four lines to be useful (where in the user's code, where it broke, why, what
//! to do), so each row of the summary line is followed by its frames rather than squeezed
//! into one very wide line. The owner says whose code has to change: a survey run lists every
//! stop at once, and the groups are what to take to whom.

use std::collections::BTreeSet;
use std::fmt::Write;

use super::merge::{by_owner, owners, Merged, Site};
use super::record::Frame;

/// The merged report as text.
pub fn render(merged: &Merged) -> String {
    let mut out = String::new();
    let ranks = merged.ranks();
    let processes = format!(
        "{} process{}",
        merged.processes(),
        if merged.processes() == 1 { "" } else { "es" }
    );
    if merged.total == 0 {
        let _ = writeln!(out, "dynafold: no graph breaks in {processes}");
    } else {
        let _ = writeln!(
            out,
            "dynafold: {} graph break{} at {} site{} from {processes}{}",
            merged.total,
            plural(merged.total as usize),
            merged.sites.len(),
            plural(merged.sites.len()),
            if ranks.is_empty() {
                String::new()
            } else {
                format!(" (ranks {})", ranges(&ranks))
            }
        );
    }
    if let Some(run) = &merged.run {
        let _ = writeln!(out, "  run {run}{}", older_runs(&merged.other_runs));
    }
    if merged.torn_lines + merged.bad_lines > 0 {
        let _ = writeln!(
            out,
            "  skipped {} torn last line(s) (a process stopped mid-write) and {} unreadable line(s)",
            merged.torn_lines, merged.bad_lines
        );
    }
    for why in &merged.skipped {
        let _ = writeln!(out, "  skipped {why}");
    }
    for what in &merged.missing {
        let _ = writeln!(out, "  missing {what}");
    }
    render_sites(&mut out, &merged.sites, usize::MAX);
    out
}

/// Says that older runs were left out, and how to read one.
fn older_runs(others: &[String]) -> String {
    match others.last() {
        None => String::new(),
        Some(last) => format!(
            " (the newest; {} older run{} not merged: name one, e.g. `dynafold report DIR/{last}`)",
            others.len(),
            plural(others.len())
        ),
    }
}

/// The short form printed at process exit: the top `limit` sites.
pub fn render_summary(sites: &[Site], limit: usize) -> String {
    let mut out = String::new();
    let total: u64 = sites.iter().map(|s| s.count).sum();
    let _ = writeln!(
        out,
        "dynafold: {} Dynamo graph break{} at {} site{} in this process",
        total,
        plural(total as usize),
        sites.len(),
        plural(sites.len())
    );
    render_sites(&mut out, sites, limit);
    out
}

/// An owner as the table names it: a package by its name, the user's file as such.
fn owner_label(owner: &str) -> String {
    if owner.starts_with('/') || owner.starts_with('<') {
        format!("{owner} (your code)")
    } else {
        owner.to_string()
    }
}

fn counted(n: u64, one: &str) -> String {
    format!("{n} {one}{}", plural(n as usize))
}

fn render_sites(out: &mut String, sites: &[Site], limit: usize) {
    if sites.is_empty() {
        return;
    }
    let shares: Vec<String> = owners(sites)
        .iter()
        .map(|o| {
            format!(
                "{} {} ({})",
                owner_label(&o.owner),
                counted(o.sites as u64, "site"),
                counted(o.count, "break")
            )
        })
        .collect();
    let _ = writeln!(out, "  by owner: {}", shares.join("; "));
    let _ = writeln!(
        out,
        "\n{:>3}  {:>6}  {:<8}  {:<8}  {:<10}  reason",
        "#", "count", "ranks", "covered", "type"
    );
    let mut shown = 0;
    for (owner, group) in by_owner(sites) {
        if shown >= limit {
            break;
        }
        let _ = writeln!(
            out,
            "{}: {}, {}",
            owner_label(&owner.owner),
            counted(owner.sites as u64, "site"),
            counted(owner.count, "break")
        );
        for s in group.into_iter().take(limit - shown) {
            shown += 1;
            render_site(out, shown, s);
        }
    }
    if sites.len() > limit {
        let _ = writeln!(out, "  ... and {} more site(s)", sites.len() - limit);
    }
    let failed = sites.iter().any(|s| s.fullgraph.contains(&true));
    let surveyed = sites.iter().any(|s| s.survey);
    if failed || surveyed {
        out.push('\n');
    }
    if failed {
        let _ = writeln!(
            out,
            "  type! = at least one occurrence failed a fullgraph=True compile"
        );
    }
    if surveyed {
        let _ = writeln!(
            out,
            "  type* = met by a fullgraph=True compile that survey mode carried on (without it, that compile stops at the first of these)"
        );
    }
}

fn render_site(out: &mut String, number: usize, s: &Site) {
    let ranks = if s.ranks.is_empty() {
        "-".to_string()
    } else {
        ranges(&s.ranks)
    };
    let covered = if s.covered { "yes" } else { "no" };
    let mut kind = s.key.break_type.clone();
    if s.fullgraph.contains(&true) {
        kind.push('!');
    }
    if s.survey {
        kind.push('*');
    }
    let _ = writeln!(
        out,
        "{:>3}  {:>6}  {:<8}  {:<8}  {:<10}  {}",
        number, s.count, ranks, covered, kind, s.key.reason
    );
    let pad = " ".repeat(16);
    if let Some(f) = &s.record.user_frame {
        let _ = writeln!(out, "{pad}user     {}", frame_text(f, false));
    }
    if let Some(f) = &s.record.library_frame {
        let _ = writeln!(out, "{pad}library  {}", frame_text(f, true));
    }
    if let Some(f) = &s.record.via_frame {
        let _ = writeln!(out, "{pad}via      {}", frame_text(f, true));
    }
    if s.covered {
        let _ = writeln!(out, "{pad}covered  would be folded with dynafold active");
    }
    if let Some(h) = &s.hint {
        let _ = writeln!(out, "{pad}hint     {h}");
    }
}

/// Library frames are shown from their package down (`flashinfer/jit/cpp_ext.py:80`), user
/// frames with their full path, which is what an editor opens.
fn frame_text(f: &Frame, library: bool) -> String {
    let file = if library {
        short_path(f)
    } else {
        f.file.clone()
    };
    let mut s = format!("{file}:{} in {}", f.line, f.function);
    if library {
        match (&f.package, f.stdlib) {
            (Some(p), true) => {
                let _ = write!(s, "  [{p}, stdlib]");
            }
            (Some(p), false) => {
                let _ = write!(s, "  [{p}]");
            }
            _ => {}
        }
    }
    s
}

fn short_path(f: &Frame) -> String {
    let file = f.file.replace('\\', "/");
    if let Some(pkg) = &f.package {
        let needle = format!("/{pkg}/");
        if let Some(i) = file.rfind(&needle) {
            return file.get(i + 1..).unwrap_or(&file).to_string();
        }
    }
    match file.rsplit_once('/') {
        Some((_, base)) if f.stdlib => base.to_string(),
        _ => file,
    }
}

/// `0-3,5,7-8`.
pub fn ranges(set: &BTreeSet<i64>) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut iter = set.iter().copied().peekable();
    while let Some(start) = iter.next() {
        let mut end = start;
        while iter.peek() == Some(&(end + 1)) {
            end += 1;
            iter.next();
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
    }
    parts.join(",")
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The merged report for machines.
/// Version of `report --json`'s layout; raised when a field changes meaning or goes.
pub const JSON_SCHEMA: u32 = 1;

pub fn render_json(merged: &Merged) -> Result<String, String> {
    #[derive(serde::Serialize)]
    struct Versioned<'a> {
        schema: u32,
        /// The sites' owners, most breaks first: `sites[].owner` summed.
        owners: Vec<super::merge::Owner>,
        #[serde(flatten)]
        merged: &'a Merged,
    }
    serde_json::to_string_pretty(&Versioned {
        schema: JSON_SCHEMA,
        owners: merged.owners(),
        merged,
    })
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::merge::merge_texts;
    use crate::report::record::{Line, Record};

    fn line(pid: u32, rank: i64, count: u64, stack: &[&str], lib: Option<Frame>) -> String {
        let l = Line {
            v: 1,
            count,
            host: "h".into(),
            record: Record {
                pid,
                rank: Some(rank),
                break_type: "gb0007".into(),
                reason: "Dynamo does not know how to trace the builtin `_thread.allocate_lock.`"
                    .into(),
                user_frame: Some(Frame {
                    file: "/srv/model.py".into(),
                    line: 42,
                    function: "forward".into(),
                    ..Frame::default()
                }),
                library_frame: lib,
                stack: stack.iter().map(|s| s.to_string()).collect(),
                hint: Some("subprocess at trace time".into()),
                fullgraph: Some(true),
                ..Record::default()
            },
        };
        serde_json::to_string(&l).unwrap() + "\n"
    }

    #[test]
    fn table_lists_each_site_once_with_frames_and_coverage() {
        let lib = Frame {
            file: "/usr/lib/python3.11/subprocess.py".into(),
            line: 828,
            function: "__init__".into(),
            package: Some("subprocess".into()),
            stdlib: true,
        };
        let stack = [
            "/srv/model.py:42 in forward",
            "/sp/flashinfer/jit/cpp_ext.py:70 in get_cuda_version",
            "/usr/lib/python3.11/subprocess.py:828 in __init__",
        ];
        let m = merge_texts(vec![
            (
                "a".into(),
                line(1, 0, 1, &stack, Some(lib.clone()))
                    + &line(1, 0, 2, &stack, Some(lib.clone())),
            ),
            ("b".into(), line(2, 1, 1, &stack, Some(lib))),
            (
                "c".into(),
                line(3, 2, 1, &["/srv/model.py:42 in forward"], None).replace(":42", ":43"),
            ),
        ]);
        let text = render(&m);
        assert!(
            text.starts_with("dynafold: 4 graph breaks at 2 sites from 3 processes (ranks 0-2)"),
            "{text}"
        );
        assert!(text.contains("  3  0-1       yes       gb0007!"), "{text}");
        assert!(
            text.contains("user     /srv/model.py:42 in forward"),
            "{text}"
        );
        assert!(
            text.contains("library  subprocess.py:828 in __init__  [subprocess, stdlib]"),
            "{text}"
        );
        assert!(text.contains("hint     subprocess at trace time"), "{text}");
        assert_eq!(text.matches("user     /srv/model.py:42").count(), 1);
        let json: serde_json::Value = serde_json::from_str(&render_json(&m).unwrap()).unwrap();
        assert_eq!(json["sites"][0]["count"], 3);
        assert_eq!(json["sites"][0]["covered"], true);
        assert_eq!(json["sites"][1]["covered"], false);
    }

    fn owned(pid: u32, line_no: u32, count: u64, owner: &str, survey: bool) -> String {
        let l = Line {
            v: 1,
            count,
            host: "h".into(),
            record: Record {
                pid,
                break_type: "gb0124".into(),
                reason: format!("break at {line_no}"),
                user_frame: Some(Frame {
                    file: "/srv/model.py".into(),
                    line: line_no,
                    function: "forward".into(),
                    ..Frame::default()
                }),
                owner: Some(owner.into()),
                survey,
                fullgraph: Some(false),
                ..Record::default()
            },
        };
        serde_json::to_string(&l).unwrap() + "\n"
    }

    #[test]
    fn sites_are_grouped_by_owner_most_breaks_first_and_survey_is_marked() {
        let text = owned(1, 10, 1, "flashinfer", true)
            + &owned(1, 11, 1, "sglang", true)
            + &owned(1, 12, 1, "sglang", true)
            + &owned(1, 13, 1, "/srv/model.py", false);
        let m = merge_texts(vec![("a".into(), text)]);
        let out = render(&m);
        assert!(
            out.contains("  by owner: sglang 2 sites (2 breaks); /srv/model.py (your code) 1 site (1 break); flashinfer 1 site (1 break)"),
            "{out}"
        );
        let at = |needle: &str| {
            out.find(needle)
                .unwrap_or_else(|| panic!("{needle}: {out}"))
        };
        // Equal counts: by name, so the user's path comes before a package's.
        assert!(at("\nsglang: 2 sites, 2 breaks") < at("break at 11"));
        assert!(at("break at 12") < at("\n/srv/model.py (your code): 1 site, 1 break"));
        assert!(at("\n/srv/model.py (your code): 1 site, 1 break") < at("break at 13"));
        assert!(at("break at 13") < at("\nflashinfer: 1 site, 1 break"));
        assert!(at("\nflashinfer: 1 site, 1 break") < at("break at 10"));
        // Numbered in the order shown; surveyed sites marked, the other not.
        assert!(
            out.contains("  3       1  -         no        gb0124      break at 13"),
            "{out}"
        );
        assert!(
            out.contains("  4       1  -         no        gb0124*     break at 10"),
            "{out}"
        );
        assert!(out.contains("type* = met by a fullgraph=True compile that survey mode carried on"));
        let json: serde_json::Value = serde_json::from_str(&render_json(&m).unwrap()).unwrap();
        let sites = json["sites"].as_array().unwrap();
        assert!(sites.iter().all(|s| s["owner"].is_string()), "{json}");
        assert_eq!(json["owners"][0]["owner"], "sglang");
        assert_eq!(json["owners"][0]["sites"], 2);
        assert_eq!(json["owners"][1]["owner"], "/srv/model.py");
        // The per-process summary keeps its limit across groups.
        let short = render_summary(&m.sites, 2);
        assert!(
            short.contains("break at 11") && short.contains("break at 12"),
            "{short}"
        );
        assert!(!short.contains("break at 10") && short.contains("... and 2 more site(s)"));
    }

    #[test]
    fn rank_ranges_compress() {
        let s: BTreeSet<i64> = [0, 1, 2, 3, 5, 7, 8].into_iter().collect();
        assert_eq!(ranges(&s), "0-3,5,7-8");
    }
}
