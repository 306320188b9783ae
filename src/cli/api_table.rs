//! `dynafold doctor --ops`: the status of every public tensor op of the installed FlashInfer
//! release under `torch.compile(fullgraph=True)`, from the tables `scripts/api-status` wrote
//! to docs/api-status/ (shipped in the binary: printing them runs nothing).

use serde_json::Value;

/// (release, its table as JSON), one per release the program was run for.
const TABLES: &[(&str, &str)] = &[
    ("0.6.16", include_str!("../../docs/api-status/0.6.16.json")),
    ("0.7.2", include_str!("../../docs/api-status/0.7.2.json")),
    ("0.7.4", include_str!("../../docs/api-status/0.7.4.json")),
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

/// The releases with a table.
pub fn releases() -> Vec<&'static str> {
    TABLES.iter().map(|(r, _)| *r).collect()
}

/// The table of `release` as `(label, value)` lines, or None when there is none.
pub fn lines(release: &str) -> Option<Vec<(String, String)>> {
    let (_, text) = TABLES.iter().find(|(r, _)| *r == release)?;
    let table: Value = serde_json::from_str(text).ok()?;
    let ops = table.get("ops")?.as_object()?;
    let mut out = Vec::new();
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
    out.push((
        format!("{} public tensor ops", ops.len()),
        totals.join(", "),
    ));
    let mut names: Vec<&String> = ops.keys().collect();
    names.sort();
    for name in names {
        let row = &ops[name];
        let status = row["status"].as_str().unwrap_or("?");
        out.push((name.clone(), format!("{status}: {}", detail(row))));
    }
    Some(out)
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
    match row["status"].as_str() {
        Some("H200") => row["evidence"]
            .as_array()
            .and_then(|files| files.first())
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        Some("fake") => {
            let ops: Vec<&str> = row["operators"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let check = text("fake_check");
            format!(
                "sm{} stand-in; {}{}",
                row["sm"].as_u64().unwrap_or(90),
                if ops.is_empty() {
                    "no FlashInfer operator".to_owned()
                } else {
                    ops.join(", ")
                },
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_table_parses_and_counts_each_op_once() {
        for release in releases() {
            let got = lines(release).expect("a table");
            let ops = got.len() - 1;
            let counted: usize = got[0]
                .1
                .split(", ")
                .filter_map(|part| part.rsplit(' ').next()?.parse::<usize>().ok())
                .sum();
            assert_eq!(counted, ops, "{release}");
        }
        assert!(lines("0.1.0").is_none());
    }
}
