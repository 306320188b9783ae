//! `dynafold report DIR [--json]`: merges a run's graph-break files into one table.

use std::path::Path;

use crate::report::{merge_newest_run, table};

/// The text to print, or a one-line error.
pub fn run(dir: &Path, json: bool) -> Result<String, String> {
    let merged =
        merge_newest_run(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    if json {
        return table::render_json(&merged);
    }
    if merged.files.is_empty() {
        return Ok(format!(
            "dynafold: no report files (*.jsonl) in {}; was DYNAFOLD_REPORT_DIR set for the run?\n",
            dir.display()
        ));
    }
    Ok(table::render(&merged))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_dir_is_an_error_and_empty_dir_says_so() {
        assert!(run(Path::new("/nonexistent/dynafold"), false).is_err());
        let dir = tempfile::tempdir().unwrap();
        assert!(run(dir.path(), false).unwrap().contains("no report files"));
        let json: serde_json::Value =
            serde_json::from_str(&run(dir.path(), true).unwrap()).unwrap();
        assert_eq!(json["total"], 0);
    }
}
