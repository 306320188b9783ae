//! Writing fake programs for tests without `ETXTBSY`.
//!
//! Tests run on many threads, and each spawns children. If this process held a
//! write descriptor on a script while another thread forked, the forked child
//! would inherit it until its own `exec`, and an `exec` of the script in that
//! window fails with "Text file busy". So the script is written by a short-lived
//! `sh` child: the write descriptor never exists in the test process.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Writes `body` to `path` with permission bits `mode`, from a child process.
pub(crate) fn write_program(path: &Path, body: &[u8], mode: u32) {
    let mut child = Command::new("/bin/sh")
        .args(["-c", "cat > \"$1\" && chmod \"$2\" \"$1\"", "sh"])
        .arg(path)
        .arg(format!("{mode:o}"))
        .stdin(Stdio::piped())
        .spawn()
        .expect("spawn /bin/sh to write a test program");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(body)
        .expect("write the test program's body");
    let status = child.wait().expect("wait for /bin/sh");
    assert!(
        status.success(),
        "writing {} failed: {status}",
        path.display()
    );
}
