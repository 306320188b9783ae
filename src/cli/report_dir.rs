//! The report folder of `dynafold run`: made (private), given a fresh folder for this run, and
//! proven writable before the command starts. Processes write a report file only at their
//! first graph break, so an empty run folder is read as "no breaks"; a folder they could not
//! write to would turn a broken program into that all-clear, and a reused one without a
//! folder per run would report an earlier run's breaks for this one.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::report::runs::{run_name, DISABLED_MARK};

/// Makes `dir` and this run's folder in it; returns the run folder, where the processes write.
///
/// The reports name the user's source files and frames and the sink creates them 0600, so a
/// folder made here is private too: 0700, which a umask can only narrow (parents created for
/// it alike). An existing `dir` keeps the mode its owner chose.
pub fn prepare(dir: &Path) -> Result<PathBuf, String> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create report folder {}: {e}", dir.display()))?;
    let run = dir.join(run_name(std::time::SystemTime::now(), std::process::id()));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&run)
        .map_err(|e| format!("report folder {} is not writable: {e}", dir.display()))?;
    probe(&run)?;
    Ok(run)
}

/// Marks `run` as a run dynafold was disabled for, so that `dynafold report` says so instead
/// of reading its empty folder as "no graph breaks".
pub fn mark_disabled(run: &Path) -> Result<(), String> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(run.join(DISABLED_MARK))
        .and_then(|mut f| {
            f.write_all(b"dynafold was disabled for this run (--disable or DYNAFOLD_DISABLE): no process watched for graph breaks\n")
        })
        .map_err(|e| format!("report folder {} is not writable: {e}", run.display()))
}

/// Creates and removes a file the way the sink creates its own (exclusive, 0600): whatever
/// stops this stops the processes' reports, and mode bits alone would not say (root, ACLs,
/// read-only mounts).
fn probe(dir: &Path) -> Result<(), String> {
    let path = dir.join(format!(".dynafold-probe-{}", std::process::id()));
    let unwritable =
        |e: std::io::Error| format!("report folder {} is not writable: {e}", dir.display());
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(unwritable)?;
    let written = file.write_all(b"probe\n").map_err(unwritable);
    drop(file);
    let removed = std::fs::remove_file(&path).map_err(unwritable);
    written.and(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_new_folder_is_private_and_left_empty() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/b");
        let run = prepare(&dir).unwrap();
        assert_eq!(run.parent(), Some(dir.as_path()));
        for d in [&dir, &run] {
            let mode = std::fs::metadata(d).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode & 0o077, 0, "{mode:o}");
        }
        assert_eq!(std::fs::read_dir(&run).unwrap().count(), 0);
    }

    #[test]
    fn a_disabled_run_is_marked_as_such() {
        let root = tempfile::tempdir().unwrap();
        let run = prepare(root.path()).unwrap();
        assert!(!crate::report::runs::was_disabled(&run));
        mark_disabled(&run).unwrap();
        assert!(crate::report::runs::was_disabled(&run));
        let merged = crate::report::merge_newest_run(root.path()).unwrap();
        assert!(merged.disabled && merged.files.is_empty(), "{merged:?}");
    }

    #[test]
    fn each_run_gets_its_own_folder() {
        let root = tempfile::tempdir().unwrap();
        let a = prepare(root.path()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = prepare(root.path()).unwrap();
        assert_ne!(a, b);
        let selected = crate::report::runs::select(root.path()).unwrap();
        assert_eq!(selected.dir, b);
    }

    #[test]
    fn a_path_under_a_file_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let file = root.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let err = prepare(&file.join("rep")).unwrap_err();
        assert!(err.starts_with("cannot create report folder"), "{err}");
    }
}
