//! dynafold's own bytecode cache: the marshalled code object of a rewritten FlashInfer module
//! (kept beside it, under its own tag) or of one of dynafold's embedded Python hooks (kept in
//! the user's cache folder), so a warm start skips `compile()` (10-40 ms for a 100 KB fp4
//! module, 3-13 ms for the hooks).
//!
//! The rewrite itself still runs on every import: it is what decides the key (the folded
//! values live in the rewritten text), and it costs about a millisecond (bench/RESULTS.md).
//!
//! Everything here may fail without consequence: any error means "no cache" and one debug
//! line. A cache file is trusted only if it is a regular file owned by this effective uid,
//! not group/world-writable, and carries the full key digest of this exact module, source,
//! interpreter and dynafold version; `marshal.loads` on hostile bytes can crash CPython, so
//! nothing else is ever unmarshalled.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyCode};

/// Changes whenever the file layout changes; part of every file.
const MAGIC: &[u8; 10] = b"DYNAFOLD1\n";
const DIGEST_LEN: usize = 32;
/// Hex digits of the digest in the file name: enough to keep environments apart; the full
/// digest inside the file is what is checked.
const NAME_HASH_LEN: usize = 16;
/// Like CPython's pycs: readable by everyone who can read the module (as far as the umask
/// allows), writable by us only.
const CACHE_FILE_MODE: u32 = 0o644;
/// Larger than any FlashInfer module's code; a bigger file is not ours.
const MAX_FILE_BYTES: u64 = 16 << 20;

/// One module's slot in the cache: where its file lives and the digest it must carry.
pub struct Entry {
    path: PathBuf,
    digest: Vec<u8>,
    private_dir: bool,
}

/// Where a module's cache file goes when `DYNAFOLD_CACHE_DIR` is not set.
#[derive(Clone, Copy)]
pub enum Place<'a> {
    /// In the `__pycache__` beside this source file, like CPython's own pycs.
    BesideSource(&'a str),
    /// In the user's cache folder: code that has no file of its own (the embedded hooks).
    UserCache,
}

/// `DYNAFOLD_CACHE_DIR`, read (and warned about) once per process.
fn cache_dir() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| dynafold_core::config::dir("DYNAFOLD_CACHE_DIR"))
        .as_deref()
}

/// `$XDG_CACHE_HOME/dynafold/bytecode`, else `$HOME/.cache/dynafold/bytecode`: where pip,
/// torch and FlashInfer keep theirs. Only absolute values are used.
fn user_cache_dir() -> Option<&'static Path> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let absolute = |name: &str| {
            std::env::var_os(name)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        absolute("XDG_CACHE_HOME")
            .or_else(|| absolute("HOME").map(|h| h.join(".cache")))
            .map(|base| base.join("dynafold").join("bytecode"))
    })
    .as_deref()
}

impl Entry {
    /// The slot for `module` loaded from `origin`, or None when this interpreter has no
    /// cache tag (caching disabled by the implementation) or hashing failed.
    pub fn new(
        py: Python<'_>,
        module: &str,
        origin: &str,
        source: &Bound<'_, PyBytes>,
        rewritten: &str,
        place: Place<'_>,
    ) -> Option<Entry> {
        match Self::build(py, module, origin, source, rewritten, place) {
            Ok(e) => e,
            Err(e) => {
                log::debug!("{module}: no bytecode cache: {e}");
                None
            }
        }
    }

    fn build(
        py: Python<'_>,
        module: &str,
        origin: &str,
        source: &Bound<'_, PyBytes>,
        rewritten: &str,
        place: Place<'_>,
    ) -> PyResult<Option<Entry>> {
        let sys = py.import("sys")?;
        let Some(tag) = sys
            .getattr("implementation")?
            .getattr("cache_tag")?
            .extract::<Option<String>>()?
        else {
            return Ok(None);
        };
        let magic = py.import("importlib.util")?.getattr("MAGIC_NUMBER")?;
        let magic = magic.cast::<PyBytes>()?;
        // compile() in the loader inherits -O/-OO, which changes the code object.
        let optimize: i64 = sys.getattr("flags")?.getattr("optimize")?.extract()?;
        let hasher = py.import("hashlib")?.call_method0("sha256")?;
        // Each part length-prefixed, so no two different inputs hash the same stream.
        let parts: [&[u8]; 8] = [
            source.as_bytes(),
            rewritten.as_bytes(),
            tag.as_bytes(),
            magic.as_bytes(),
            &optimize.to_le_bytes(),
            env!("CARGO_PKG_VERSION").as_bytes(),
            // The code object embeds the file name for tracebacks.
            origin.as_bytes(),
            module.as_bytes(),
        ];
        for part in parts {
            let len = (part.len() as u64).to_le_bytes();
            hasher.call_method1("update", (PyBytes::new(py, &len),))?;
            hasher.call_method1("update", (PyBytes::new(py, part),))?;
        }
        let digest: Vec<u8> = hasher.call_method0("digest")?.extract()?;
        let hex: String = hasher.call_method0("hexdigest")?.extract()?;
        let short = hex.get(..NAME_HASH_LEN).unwrap_or(&hex);
        let file_name = |stem: &str| format!("{stem}.{tag}.dynafold-{short}.pyc");
        let (path, private_dir) = match (cache_dir(), place) {
            (Some(dir), _) => (dir.join(file_name(module)), true),
            (None, Place::UserCache) => match user_cache_dir() {
                Some(dir) => (dir.join(file_name(module)), true),
                None => return Ok(None),
            },
            (None, Place::BesideSource(origin)) => {
                let origin = Path::new(origin);
                let (Some(parent), Some(stem)) = (origin.parent(), origin.file_stem()) else {
                    return Ok(None);
                };
                let stem = stem.to_string_lossy();
                (parent.join("__pycache__").join(file_name(&stem)), false)
            }
        };
        Ok(Some(Entry {
            path,
            digest,
            private_dir,
        }))
    }

    /// The cached code object, if a trusted, intact file for this exact key exists.
    pub fn load<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyAny>> {
        let bytes = match read_trusted(&self.path) {
            Ok(Some(b)) => b,
            Ok(None) => return None,
            Err(e) => {
                log::debug!("bytecode cache {}: not used: {e}", self.path.display());
                return None;
            }
        };
        let body = bytes
            .strip_prefix(MAGIC.as_slice())
            .and_then(|rest| rest.strip_prefix(self.digest.as_slice()));
        let Some(body) = body else {
            log::debug!(
                "bytecode cache {}: not this key; ignored",
                self.path.display()
            );
            return None;
        };
        let code = py
            .import("marshal")
            .and_then(|m| m.call_method1("loads", (PyBytes::new(py, body),)))
            .ok()
            .filter(|c| c.is_instance_of::<PyCode>());
        if code.is_none() {
            log::debug!("bytecode cache {}: corrupt; ignored", self.path.display());
        }
        code
    }

    /// Writes `code` for later processes, unless `sys.dont_write_bytecode` says not to.
    /// Failures (read-only or full folder, a name taken by someone else) are silent.
    pub fn store(&self, py: Python<'_>, code: &Bound<'_, PyAny>) {
        let body = || -> PyResult<Option<Vec<u8>>> {
            let sys = py.import("sys")?;
            if sys.getattr("dont_write_bytecode")?.is_truthy()? {
                return Ok(None);
            }
            let data = py.import("marshal")?.call_method1("dumps", (code,))?;
            Ok(Some(data.cast::<PyBytes>()?.as_bytes().to_vec()))
        };
        let body = match body() {
            Ok(Some(b)) => b,
            Ok(None) => return,
            Err(e) => {
                log::debug!("bytecode cache: cannot marshal: {e}");
                return;
            }
        };
        let mut contents = Vec::with_capacity(MAGIC.len() + DIGEST_LEN + body.len());
        contents.extend_from_slice(MAGIC);
        contents.extend_from_slice(&self.digest);
        contents.extend_from_slice(&body);
        if let Err(e) = write_atomic(&self.path, &contents, self.private_dir) {
            log::debug!("bytecode cache {}: not written: {e}", self.path.display());
            return;
        }
        prune_superseded(&self.path);
    }
}

/// Removes the other entries of the same module and interpreter beside `kept`
/// (`STEM.TAG.dynafold-OTHERHASH.pyc`): each was written for a FlashInfer build, rule set or
/// dynafold version this one replaces, and nothing else would ever delete them (a
/// `pip uninstall` of FlashInfer leaves `__pycache__` files it did not install). Only regular
/// files of ours with exactly that shape are touched; failures are ignored.
fn prune_superseded(kept: &Path) {
    let (Some(dir), Some(name)) = (kept.parent(), kept.file_name().and_then(|n| n.to_str())) else {
        return;
    };
    let Some(prefix) = name
        .rfind(".dynafold-")
        .map(|i| &name[..i + ".dynafold-".len()])
    else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(other) = file_name.to_str() else {
            continue;
        };
        let Some(hash) = other
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_suffix(".pyc"))
        else {
            continue;
        };
        if other == name
            || hash.len() != NAME_HASH_LEN
            || !hash.bytes().all(|b| b.is_ascii_hexdigit())
        {
            continue;
        }
        let path = entry.path();
        let ours = std::fs::symlink_metadata(&path)
            .map(|m| m.is_file() && m.uid() == euid())
            .unwrap_or(false);
        if ours {
            match std::fs::remove_file(&path) {
                Ok(()) => log::debug!("bytecode cache {}: superseded; removed", path.display()),
                Err(e) => log::debug!("bytecode cache {}: not removed: {e}", path.display()),
            }
        }
    }
}

/// The code object of `source` as `compile()` gives it under `file`: from `entry` when it
/// holds it, else compiled and stored there. The flag says whether it came from the cache.
pub fn code<'py>(
    py: Python<'py>,
    entry: Option<&Entry>,
    source: &str,
    file: &str,
) -> PyResult<(Bound<'py, PyAny>, bool)> {
    if let Some(code) = entry.and_then(|e| e.load(py)) {
        return Ok((code, true));
    }
    let code = py
        .import("builtins")?
        .getattr("compile")?
        .call1((source, file, "exec", 0, true))?;
    if let Some(e) = entry {
        e.store(py, &code);
    }
    Ok((code, false))
}

/// The file's bytes if it is ours to trust; Ok(None) when there is no file.
fn read_trusted(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    let mut file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    // Checked on the open file, not the name, so it cannot be swapped in between.
    let meta = file.metadata()?;
    let why = if !meta.is_file() {
        Some("not a regular file")
    } else if meta.uid() != euid() {
        Some("owned by another user")
    } else if meta.mode() & 0o022 != 0 {
        Some("group or world writable")
    } else if meta.len() > MAX_FILE_BYTES {
        Some("too large")
    } else {
        None
    };
    if let Some(why) = why {
        return Err(std::io::Error::other(format!("untrusted: {why}")));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.read_to_end(&mut bytes)?;
    Ok(Some(bytes))
}

/// Temp file created new in the same folder (O_EXCL, O_NOFOLLOW), then renamed over the
/// final name, so readers see a whole file or none. A final name held by another user is
/// left alone.
fn write_atomic(path: &Path, contents: &[u8], private_dir: bool) -> std::io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("no parent folder"))?;
    if !dir.is_dir() {
        // `__pycache__` is made like CPython makes it; DYNAFOLD_CACHE_DIR private to us.
        std::fs::DirBuilder::new()
            .recursive(private_dir)
            .mode(if private_dir { 0o700 } else { 0o755 })
            .create(dir)?;
    }
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if meta.uid() != euid() {
            return Err(std::io::Error::other("name taken by another user"));
        }
    }
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(format!(
        ".{}.{nanos:x}.{}.tmp",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp = PathBuf::from(tmp_name);
    let mut file: File = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(CACHE_FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)?;
    let written = trusted_mode(&file)
        .and_then(|()| file.write_all(contents))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Makes the new file one that `read_trusted` accepts, whatever the umask, a default ACL or
/// the file system did to open()'s mode: writable by no one else (else it would be rejected at
/// every start and the cache never used) and readable and writable by us (else a umask such
/// as 0466 would leave us a file we cannot read back). Read bits the umask removed stay off.
fn trusted_mode(file: &File) -> std::io::Result<()> {
    let mode = file.metadata()?.mode() & 0o777;
    let wanted = (mode & !0o022) | 0o600;
    if wanted != mode {
        file.set_permissions(std::fs::Permissions::from_mode(wanted))?;
    }
    Ok(())
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// The umask is per process: tests that change it must not overlap.
    static UMASK: Mutex<()> = Mutex::new(());

    fn with_umask<T>(mask: libc::mode_t, f: impl FnOnce() -> T) -> T {
        let _guard = UMASK.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: umask cannot fail; the old value is put back before the lock is released.
        let old = unsafe { libc::umask(mask) };
        let out = f();
        // SAFETY: as above.
        unsafe { libc::umask(old) };
        out
    }

    /// A fresh folder removed on drop (this crate does without tempfile).
    struct TempDir(PathBuf);

    impl TempDir {
        fn new() -> TempDir {
            static N: AtomicU64 = AtomicU64::new(0);
            let dir = std::env::temp_dir().join(format!(
                "dynafold-cache-test-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir(&dir).unwrap();
            TempDir(dir)
        }

        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn slot(dir: &Path) -> PathBuf {
        let pycache = dir.join("__pycache__");
        std::fs::create_dir_all(&pycache).unwrap();
        pycache.join("m.cpython-311.dynafold-0123456789abcdef.pyc")
    }

    #[test]
    fn stored_file_is_trusted_whatever_the_umask() {
        // 002: shared-group set-ups; 000: some containers; 077: private; 466: a umask that
        // would leave the owner a file it cannot read back.
        for (mask, expected) in [
            (0o002, 0o644),
            (0o000, 0o644),
            (0o022, 0o644),
            (0o077, 0o600),
            (0o466, 0o600),
        ] {
            let dir = TempDir::new();
            let path = slot(dir.path());
            with_umask(mask, || write_atomic(&path, b"payload", false)).unwrap();
            let mode = std::fs::metadata(&path).unwrap().mode() & 0o777;
            assert_eq!(mode, expected, "umask {mask:03o}: mode {mode:03o}");
            let read = read_trusted(&path).unwrap_or_else(|e| panic!("umask {mask:03o}: {e}"));
            assert_eq!(read.as_deref(), Some(b"payload".as_slice()));
        }
    }

    #[test]
    fn a_group_writable_new_file_is_made_private_before_it_is_stored() {
        // Stands for whatever makes open()'s 0644 come out group-writable (an ACL, a file
        // system that ignores the mode): the file written must still be one we trust.
        let dir = TempDir::new();
        let path = slot(dir.path());
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .unwrap();
        file.set_permissions(std::fs::Permissions::from_mode(0o666))
            .unwrap();
        trusted_mode(&file).unwrap();
        assert_eq!(file.metadata().unwrap().mode() & 0o777, 0o644);
    }

    #[test]
    fn writable_by_others_or_owned_by_others_is_still_rejected() {
        let dir = TempDir::new();
        let path = slot(dir.path());
        write_atomic(&path, b"payload", false).unwrap();
        for mode in [0o664, 0o646, 0o666] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let err = read_trusted(&path).expect_err("group/world writable must not be trusted");
            assert!(err.to_string().contains("writable"), "{mode:o}: {err}");
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        // A file of another user: made by chown when we may (root), else one that exists.
        let foreign = if euid() == 0 {
            std::os::unix::fs::chown(&path, Some(65534), None).unwrap();
            path.clone()
        } else {
            PathBuf::from("/etc/passwd")
        };
        let err = read_trusted(&foreign).expect_err("another user's file must not be trusted");
        assert!(err.to_string().contains("another user"), "{err}");
    }
}
