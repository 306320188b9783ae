//! `dynafold report DIR [--json]`: merges a run's graph-break files into one table.

use std::path::Path;

use crate::report::{merge_newest_run, table, Merged};

/// What to print where, and the exit code.
#[derive(Debug, Default)]
pub struct Output {
    pub stdout: String,
    pub stderr: String,
    pub code: i32,
}

/// The merged report. Reading no report at all exits 1, so a script cannot mistake a wrong
/// folder, a missing one, a folder of junk or a run dynafold was disabled for, for a run
/// without breaks; a run folder of `dynafold run` with no file is that run's answer: no
/// process loaded Dynamo, so none could break.
pub fn run(dir: &Path, json: bool) -> Result<Output, String> {
    let merged = match merge_newest_run(dir) {
        Ok(m) => m,
        // Not one of dynafold's own errors (125): nothing was read, as docs/usage.md says.
        Err(e) => {
            return Ok(Output {
                stderr: format!("dynafold: cannot read {}: {e}\n", dir.display()),
                code: 1,
                ..Output::default()
            })
        }
    };
    let nothing_read = merged.files.is_empty()
        && (merged.run.is_none() || !merged.skipped.is_empty() || merged.disabled);
    let mut out = Output {
        code: i32::from(nothing_read),
        ..Output::default()
    };
    if json {
        out.stdout = table::render_json(&merged)? + "\n";
        if nothing_read {
            out.stderr = nothing_read_line(dir, &merged);
        }
    } else if nothing_read {
        out.stderr = nothing_read_line(dir, &merged);
        for why in &merged.skipped {
            out.stderr.push_str(&format!("  skipped {why}\n"));
        }
    } else {
        out.stdout = table::render(&merged);
    }
    Ok(out)
}

fn nothing_read_line(dir: &Path, merged: &Merged) -> String {
    if merged.disabled && merged.skipped.is_empty() {
        format!(
            "dynafold: dynafold was disabled for run {} (--disable or DYNAFOLD_DISABLE): no process watched for graph breaks, so it has no report\n",
            merged.run.as_deref().unwrap_or("?")
        )
    } else if merged.skipped.is_empty() {
        format!(
            "dynafold: no report files (*.jsonl) in {}; was DYNAFOLD_REPORT_DIR set for the run?\n",
            dir.display()
        )
    } else {
        format!(
            "dynafold: no report read from {}: {} file(s) skipped\n",
            dir.display(),
            merged.skipped.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_dir_is_an_error_and_empty_dir_says_so_on_stderr() {
        let out = run(Path::new("/nonexistent/dynafold"), false).unwrap();
        assert_eq!((out.stdout.as_str(), out.code), ("", 1));
        assert!(
            out.stderr
                .starts_with("dynafold: cannot read /nonexistent/dynafold: "),
            "{out:?}"
        );
        let dir = tempfile::tempdir().unwrap();
        let out = run(dir.path(), false).unwrap();
        assert!(out.stderr.contains("no report files"), "{out:?}");
        assert_eq!((out.stdout.as_str(), out.code), ("", 1));
        let out = run(dir.path(), true).unwrap();
        assert!(out.stdout.ends_with("}\n"), "{out:?}");
        let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!((json["total"].as_u64(), out.code), (Some(0), 1));
    }

    #[test]
    fn junk_is_named_and_reading_nothing_fails() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.jsonl"), "junk\n").unwrap();
        let out = run(dir.path(), false).unwrap();
        assert_eq!(out.code, 1, "{out:?}");
        assert!(out.stderr.contains("a.jsonl: not a report"), "{out:?}");
        assert!(!out.stderr.contains("from 1 process"), "{out:?}");
        let json: serde_json::Value =
            serde_json::from_str(&run(dir.path(), true).unwrap().stdout).unwrap();
        assert_eq!(json["files"].as_array().map(Vec::len), Some(0));
        assert_eq!(json["skipped"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn a_disabled_run_says_so_and_fails() {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = dir.path().join("run-20261201T000000.000Z-1");
        std::fs::create_dir(&run_dir).unwrap();
        std::fs::write(run_dir.join(crate::report::runs::DISABLED_MARK), "").unwrap();
        for json in [false, true] {
            let out = run(dir.path(), json).unwrap();
            assert_eq!(out.code, 1, "{out:?}");
            assert!(
                out.stderr
                    .contains("dynafold was disabled for run run-20261201T000000.000Z-1"),
                "{out:?}"
            );
            assert!(!out.stdout.contains("no graph breaks"), "{out:?}");
        }
    }

    #[test]
    fn an_empty_run_is_zero_breaks_not_a_failure() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("run-20261201T000000.000Z-1")).unwrap();
        let out = run(dir.path(), false).unwrap();
        assert_eq!(out.code, 0, "{out:?}");
        assert!(
            out.stdout
                .starts_with("dynafold: no graph breaks in 0 processes"),
            "{out:?}"
        );
        assert!(
            out.stdout.contains("run run-20261201T000000.000Z-1"),
            "{out:?}"
        );
    }
}
