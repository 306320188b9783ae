//! `dynafold doctor --ops`: the status of every public tensor op of the installed FlashInfer
//! release under `torch.compile(fullgraph=True)`, from the tables `scripts/api-status` wrote
//! to integration/api_status/tables/ (shipped in the binary: printing them runs nothing), or
//! one traced live for a release with none (live_table.rs).

use serde_json::Value;

/// (release, its table as JSON), one per release the program was run for.
const TABLES: &[(&str, &str)] = &[
    (
        "0.6.3",
        include_str!("../../integration/api_status/tables/0.6.3.json"),
    ),
    (
        "0.6.11.post1",
        include_str!("../../integration/api_status/tables/0.6.11.post1.json"),
    ),
    (
        "0.6.16",
        include_str!("../../integration/api_status/tables/0.6.16.json"),
    ),
    (
        "0.7.2",
        include_str!("../../integration/api_status/tables/0.7.2.json"),
    ),
    (
        "0.7.4",
        include_str!("../../integration/api_status/tables/0.7.4.json"),
    ),
];

/// The order statuses are counted and listed in (table.py's STATUSES).
const STATUSES: &[&str] = &[
    "H200",
    "fake",
    "by design",
    "out of scope",
    "fails",
    "untried",
];

/// What each status means, one line (the order of STATUSES).
pub const LEGEND: &str = "H200: compiled and bit-identical to eager on an H200 | fake: traces whole on fake tensors (stand-in device) | by design: FlashInfer rules it out | out of scope: not a model's op | fails: breaks the graph | untried: no arguments to call it with yet (counted, never hidden)";

/// The statuses, in the order they are listed.
pub fn statuses() -> &'static [&'static str] {
    STATUSES
}

/// The releases with a table.
pub fn releases() -> Vec<&'static str> {
    TABLES.iter().map(|(r, _)| *r).collect()
}

/// One op of a table.
pub struct Row {
    pub name: String,
    pub status: String,
    pub detail: String,
}

/// A table's ops, by name: one shipped (`shipped`) or one traced live (`parse`).
pub type Ops = serde_json::Map<String, Value>;

/// The table shipped for `release`; None when this dynafold has none.
pub fn shipped(release: &str) -> Option<Ops> {
    let (_, text) = TABLES.iter().find(|(r, _)| *r == release)?;
    parse(text)
}

/// The ops of a table as trace_all.py or table.py writes it.
pub fn parse(text: &str) -> Option<Ops> {
    let mut table: Value = serde_json::from_str(text).ok()?;
    match table.get_mut("ops")?.take() {
        Value::Object(ops) => Some(ops),
        _ => None,
    }
}

/// The table's rows, by status (STATUSES' order), then name; only `status` when given.
pub fn rows(ops: &Ops, status: Option<&str>) -> Vec<Row> {
    let mut out: Vec<Row> = ops
        .iter()
        .map(|(name, row)| Row {
            name: name.clone(),
            status: row["status"].as_str().unwrap_or("?").to_owned(),
            detail: detail(row),
        })
        .filter(|r| status.is_none_or(|s| r.status == s))
        .collect();
    let rank = |s: &str| {
        STATUSES
            .iter()
            .position(|x| *x == s)
            .unwrap_or(STATUSES.len())
    };
    out.sort_by(|a, b| (rank(&a.status), &a.name).cmp(&(rank(&b.status), &b.name)));
    out
}

/// The table as JSON (`doctor --ops --json`): each op's row as the table holds it, less the
/// paths of the run logs (in the source tree, not installed), its texts without them; only
/// `status` when given.
pub fn json(ops: Ops, status: Option<&str>) -> Value {
    let kept = ops
        .into_iter()
        .filter(|(_, row)| status.is_none_or(|s| row["status"].as_str() == Some(s)))
        .map(|(name, mut row)| {
            if let Value::Object(fields) = &mut row {
                fields.remove("evidence");
                for value in fields.values_mut() {
                    if let Value::String(text) = value {
                        *text = without_source_paths(text);
                    }
                }
            }
            (name, row)
        })
        .collect();
    Value::Object(kept)
}

/// `text` without the source tree's paths (docs/..., scripts/...): an installed dynafold
/// has none of them.
pub fn without_source_paths(text: &str) -> String {
    const TREE: [&str; 4] = ["docs/", "scripts/", "integration/", "tests/"];
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = TREE.iter().filter_map(|p| rest.find(p)).min() {
        let end = rest[at..]
            .find(|c: char| c.is_whitespace() || matches!(c, ')' | ',' | ';'))
            .map_or(rest.len(), |e| at + e);
        let (mut before, mut after) = (&rest[..at], &rest[end..]);
        if before.ends_with('(') && after.starts_with(')') {
            // "see (docs/x) here" -> "see here"
            before = before[..before.len() - 1].trim_end_matches(' ');
            after = &after[1..];
        } else if after.starts_with(')') {
            // "(a segfault, docs/x)" -> "(a segfault)"
            before = before.trim_end_matches([' ', ',', ';']);
        }
        out.push_str(before);
        rest = after;
    }
    out.push_str(rest);
    out
}

/// The number of ops and the counts per status, as `H200 89, fake 165, ...`.
pub fn totals(ops: &Ops) -> (usize, String) {
    let totals: Vec<String> = STATUSES
        .iter()
        .map(|s| {
            let n = ops
                .values()
                .filter(|row| row["status"].as_str() == Some(s))
                .count();
            format!("{s} {n}")
        })
        .collect();
    (ops.len(), totals.join(", "))
}

/// Why the op has its status: the evidence or operators (and the fake check) when it traces,
/// else the reason or the error's first line.
fn detail(row: &Value) -> String {
    let text = |key: &str| {
        row.get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let detail = match row["status"].as_str() {
        Some("H200") => format!("{}; fake check: {}", operators(row), text("fake_check")),
        Some("fake") => {
            let check = text("fake_check");
            format!(
                "sm{} stand-in; {}{}",
                row["sm"].as_u64().unwrap_or(90),
                operators(row),
                if check.is_empty() {
                    String::new()
                } else {
                    format!("; fake check: {check}")
                }
            )
        }
        // The named reason (what a GPU run would meet, or what this machine lacks), else the
        // error's first line.
        Some("fails") if !text("reason").is_empty() => text("reason"),
        Some("fails") => text("error"),
        _ => text("reason"),
    };
    without_source_paths(&detail)
}

/// The FlashInfer operators a traced op's graph holds.
fn operators(row: &Value) -> String {
    let ops: Vec<&str> = row["operators"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if ops.is_empty() {
        "no FlashInfer operator".to_owned()
    } else {
        ops.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each status a row can have is explained in the legend, none left as a bare word.
    #[test]
    fn the_legend_explains_every_status() {
        let parts: Vec<&str> = LEGEND.split(" | ").collect();
        assert_eq!(parts.len(), STATUSES.len(), "{LEGEND}");
        for (part, status) in parts.iter().zip(STATUSES) {
            let why = part.strip_prefix(&format!("{status}: ")[..]);
            assert!(why.is_some_and(|w| !w.trim().is_empty()), "{part}");
        }
    }

    #[test]
    fn every_shipped_table_parses_and_counts_each_op_once() {
        for release in releases() {
            let ops = shipped(release).expect("a table");
            let all = rows(&ops, None);
            let (n, totals) = totals(&ops);
            assert_eq!(all.len(), n, "{release}");
            let counted: usize = totals
                .split(", ")
                .filter_map(|part| part.rsplit(' ').next()?.parse::<usize>().ok())
                .sum();
            assert_eq!(counted, n, "{release}");
            let fails = rows(&ops, Some("fails"));
            assert!(fails.iter().all(|r| r.status == "fails") && !fails.is_empty());
            // Grouped: a status never comes back after the next one started.
            let order: Vec<&str> = all.iter().map(|r| r.status.as_str()).collect();
            let mut seen: Vec<&str> = Vec::new();
            for s in order {
                if seen.last() != Some(&s) {
                    assert!(!seen.contains(&s), "{release}: {s} split");
                    seen.push(s);
                }
            }
        }
        assert!(shipped("0.1.0").is_none());
    }

    /// An installed dynafold has no docs/, scripts/ or integration/ (the H200 evidence): no
    /// row cites them.
    #[test]
    fn no_row_cites_the_source_tree() {
        for release in releases() {
            let ops = shipped(release).expect("a table");
            for r in rows(&ops, None) {
                assert!(!r.detail.contains("docs/"), "{}: {}", r.name, r.detail);
                assert!(
                    !r.detail.contains("integration/"),
                    "{}: {}",
                    r.name,
                    r.detail
                );
            }
            let text = json(ops, None).to_string();
            assert!(
                !text.contains("docs/")
                    && !text.contains("scripts/")
                    && !text.contains("integration/"),
                "{release}"
            );
        }
        assert_eq!(
            without_source_paths("crashes (segfault, docs/gpu-run-1), eagerly"),
            "crashes (segfault), eagerly"
        );
        assert_eq!(without_source_paths("see (docs/x.md) here"), "see here");
    }
}
