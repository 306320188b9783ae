//! The report folder of `dynafold run`: made (private) and proven writable before the command
//! starts. Processes write a report file only at their first graph break, so an empty folder
//! is read as "no breaks"; a folder they could not write to would turn a broken program into
//! that all-clear.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

/// The reports name the user's source files and frames and the sink creates them 0600, so a
/// folder made here is private too: 0700, which a umask can only narrow (parents created for
/// it alike). An existing folder keeps the mode its owner chose.
pub fn prepare(dir: &Path) -> Result<(), String> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create report folder {}: {e}", dir.display()))?;
    probe(dir)
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
        prepare(&dir).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & 0o077, 0, "{mode:o}");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
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
