//! Runs inside a report folder. `dynafold run --report-dir D` writes each run's reports into a
//! fresh `D/run-<UTC time>-<pid>`, so reusing D never mixes an earlier run's breaks into a
//! later run's summary; `dynafold report D` then reads the newest run and says which it read.
//! Reports written without `dynafold run` (`LD_PRELOAD` and `DYNAFOLD_REPORT_DIR` set by hand)
//! lie loose in D and are read when D holds no run.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

pub const RUN_PREFIX: &str = "run-";

/// The file `dynafold run` leaves in a run folder when dynafold was disabled for the run
/// (`--disable`, `DYNAFOLD_DISABLE`): no process watched, so the folder's emptiness is no
/// answer about graph breaks, and `dynafold report` must not read it as "no graph breaks".
pub const DISABLED_MARK: &str = "dynafold-disabled";

/// Whether `run` is a run dynafold was disabled for (its mark a regular file, not followed).
pub fn was_disabled(run: &Path) -> bool {
    std::fs::symlink_metadata(run.join(DISABLED_MARK)).is_ok_and(|m| m.is_file())
}

/// The folder name for a run started now by process `pid`. The time goes first and has fixed
/// width, so names sort in start order.
pub fn run_name(now: SystemTime, pid: u32) -> String {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let s = secs % 86_400;
    format!(
        "{RUN_PREFIX}{y:04}{m:02}{d:02}T{:02}{:02}{:02}.{:03}Z-{pid}",
        s / 3600,
        s / 60 % 60,
        s % 60,
        since.subsec_millis()
    )
}

/// Seconds since the epoch as `2026-12-04 21:50:01 UTC`, for the report's sentences.
pub fn utc_time(secs: f64) -> String {
    let secs = secs.max(0.0) as u64;
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let s = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// What of a report folder is read, and what is there besides.
#[derive(Debug, PartialEq, Eq)]
pub struct Selection {
    /// The folder whose `*.jsonl` files are merged.
    pub dir: PathBuf,
    /// Its run name, when it is a run of `dynafold run`.
    pub run: Option<String>,
    /// The other runs in the folder, oldest first (only when `dir` is the newest of them).
    pub other_runs: Vec<String>,
}

/// The newest run in `dir` when it holds runs, else `dir` itself (a run folder named
/// directly, or loose reports). Symlinks are never taken for runs.
pub fn select(dir: &Path) -> std::io::Result<Selection> {
    let mut runs: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(RUN_PREFIX))
        .collect();
    runs.sort();
    let Some(newest) = runs.pop() else {
        let own = dir
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| n.starts_with(RUN_PREFIX))
            .map(str::to_owned);
        return Ok(Selection {
            dir: dir.to_path_buf(),
            run: own,
            other_runs: Vec::new(),
        });
    };
    Ok(Selection {
        dir: dir.join(&newest),
        run: Some(newest),
        other_runs: runs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn run_names_carry_utc_time_and_sort_in_start_order() {
        let t = UNIX_EPOCH + Duration::from_millis(1_796_107_286_123);
        assert_eq!(run_name(t, 42), "run-20261201T064126.123Z-42");
        assert_eq!(run_name(UNIX_EPOCH, 7), "run-19700101T000000.000Z-7");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert!(run_name(leap, 1).starts_with("run-20000229T"));
        let later = run_name(t + Duration::from_millis(1), 1);
        assert!(run_name(t, 99_999) < later);
    }

    #[test]
    fn the_newest_run_is_selected_and_the_others_named() {
        let d = tempfile::tempdir().unwrap();
        for n in [
            "run-20261201T000000.000Z-1",
            "run-20261202T000000.000Z-1",
            "other",
        ] {
            std::fs::create_dir(d.path().join(n)).unwrap();
        }
        std::fs::write(d.path().join("run-20991231T000000.000Z-1"), "a file").unwrap();
        let s = select(d.path()).unwrap();
        assert_eq!(s.run.as_deref(), Some("run-20261202T000000.000Z-1"));
        assert_eq!(s.dir, d.path().join("run-20261202T000000.000Z-1"));
        assert_eq!(s.other_runs, vec!["run-20261201T000000.000Z-1"]);
        // A run named directly is read as it is.
        let one = select(&s.dir).unwrap();
        assert_eq!((one.dir, one.run), (s.dir.clone(), s.run.clone()));
    }

    #[test]
    fn utc_times_read_as_dates() {
        assert_eq!(utc_time(1_796_107_286.5), "2026-12-01 06:41:26 UTC");
    }

    #[test]
    fn a_folder_without_runs_is_read_itself() {
        let d = tempfile::tempdir().unwrap();
        let s = select(d.path()).unwrap();
        assert_eq!((s.dir.as_path(), s.run), (d.path(), None));
    }
}
