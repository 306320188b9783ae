//! dynafold's own bytecode cache: the marshalled code object of a rewritten FlashInfer module
//! or of one of dynafold's embedded Python hooks, kept in dynafold's own cache folder
//! (`DYNAFOLD_CACHE_DIR`, else `$XDG_CACHE_HOME/dynafold/bytecode`), so a warm start skips
//! `compile()` (10-40 ms for a 100 KB fp4 module, 3-13 ms for the hooks).
//!
//! Nothing is ever written inside another package's tree: a file there would outlive `pip
//! uninstall` (which removes only what it installed) and make the package's folder a namespace
//! package afterwards. Entries of an earlier dynafold that did write beside the module are
//! removed when the module's entry is next stored here.
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

/// Changes whenever the file layout changes; part of every file. Layout: MAGIC, the key
/// digest, the source file's path (u32 little-endian length, then the bytes), the marshalled
/// code.
const MAGIC: &[u8; 10] = b"DYNAFOLD2\n";
const DIGEST_LEN: usize = 32;
/// Hex digits of the digest in the file name: enough to keep environments apart; the full
/// digest inside the file is what is checked.
const NAME_HASH_LEN: usize = 16;
/// Like CPython's pycs: readable by everyone who can read the module (as far as the umask
/// allows), writable by us only.
const CACHE_FILE_MODE: u32 = 0o644;
/// Larger than any FlashInfer module's code; a bigger file is not ours.
const MAX_FILE_BYTES: u64 = 16 << 20;
/// Longer than any path a source file has (PATH_MAX); a longer one means a damaged header.
const MAX_ORIGIN_BYTES: usize = 4096;
/// What every cache file name ends with, before the digest's hex and `.pyc`.
const TAG_MARK: &str = ".dynafold-";

/// One module's slot in the cache: where its file lives, the digest it must carry and the
/// source file it was made from.
pub struct Entry {
    path: PathBuf,
    digest: Vec<u8>,
    origin: String,
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
    /// The slot for `module` loaded from `origin` (a source file's path, or a name such as
    /// `<dynafold>/hooks/x.py` for code without a file), or None when this interpreter has no
    /// cache tag (caching disabled by the implementation), there is no cache folder, or
    /// hashing failed.
    pub fn new(
        py: Python<'_>,
        module: &str,
        origin: &str,
        source: &Bound<'_, PyBytes>,
        rewritten: &str,
    ) -> Option<Entry> {
        match Self::build(py, module, origin, source, rewritten) {
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
    ) -> PyResult<Option<Entry>> {
        let sys = py.import("sys")?;
        let Some(tag) = sys
            .getattr("implementation")?
            .getattr("cache_tag")?
            .extract::<Option<String>>()?
        else {
            return Ok(None);
        };
        let Some(dir) = cache_dir().or_else(user_cache_dir) else {
            return Ok(None);
        };
        let magic = py.import("importlib.util")?.getattr("MAGIC_NUMBER")?;
        let magic = magic.cast::<PyBytes>()?;
        // compile() in the loader inherits -O/-OO, which changes the code object.
        let optimize: i64 = sys.getattr("flags")?.getattr("optimize")?.extract()?;
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
        let (digest, hex) = sha256(py, &parts)?;
        let short = hex.get(..NAME_HASH_LEN).unwrap_or(&hex);
        // A source file's slot is also named by its path, so the same module of two
        // environments has two slots, and storing one prunes only its own older entries.
        let slot = if Path::new(origin).is_absolute() {
            let (_, path_hex) = sha256(py, &[origin.as_bytes()])?;
            let path_hex = path_hex.get(..NAME_HASH_LEN).unwrap_or(&path_hex);
            format!("{module}.{tag}.{path_hex}")
        } else {
            format!("{module}.{tag}")
        };
        Ok(Some(Entry {
            path: dir.join(format!("{slot}{TAG_MARK}{short}.pyc")),
            digest,
            origin: origin.to_owned(),
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
            .and_then(|rest| rest.strip_prefix(self.digest.as_slice()))
            .and_then(split_origin)
            .filter(|(origin, _)| *origin == self.origin.as_bytes())
            .map(|(_, body)| body);
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
        let origin = self.origin.as_bytes();
        let Ok(origin_len) = u32::try_from(origin.len()) else {
            return;
        };
        let mut contents =
            Vec::with_capacity(MAGIC.len() + DIGEST_LEN + 4 + origin.len() + body.len());
        contents.extend_from_slice(MAGIC);
        contents.extend_from_slice(&self.digest);
        contents.extend_from_slice(&origin_len.to_le_bytes());
        contents.extend_from_slice(origin);
        contents.extend_from_slice(&body);
        if let Err(e) = write_atomic(&self.path, &contents) {
            log::debug!("bytecode cache {}: not written: {e}", self.path.display());
            return;
        }
        prune(&self.path);
        remove_beside_source(&self.origin);
    }
}

/// (digest, hex digest) of the parts, each length-prefixed.
fn sha256(py: Python<'_>, parts: &[&[u8]]) -> PyResult<(Vec<u8>, String)> {
    let hasher = py.import("hashlib")?.call_method0("sha256")?;
    for part in parts {
        let len = (part.len() as u64).to_le_bytes();
        hasher.call_method1("update", (PyBytes::new(py, &len),))?;
        hasher.call_method1("update", (PyBytes::new(py, part),))?;
    }
    Ok((
        hasher.call_method0("digest")?.extract()?,
        hasher.call_method0("hexdigest")?.extract()?,
    ))
}

/// (origin, rest) of the bytes that follow the digest.
fn split_origin(rest: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, rest) = rest.split_first_chunk::<4>()?;
    let len = usize::try_from(u32::from_le_bytes(*len)).ok()?;
    (len <= MAX_ORIGIN_BYTES && len <= rest.len()).then(|| rest.split_at(len))
}

/// The `STEM.TAG` part of a cache file's name, when the name has the shape this module
/// writes (`….dynafold-` then NAME_HASH_LEN hex digits then `.pyc`).
fn slot_of(name: &str) -> Option<&str> {
    let (slot, rest) = name.rsplit_once(TAG_MARK)?;
    let hash = rest.strip_suffix(".pyc")?;
    (hash.len() == NAME_HASH_LEN && hash.bytes().all(|b| b.is_ascii_hexdigit())).then_some(slot)
}

/// Removes, beside `kept` in the cache folder, the entries nothing will read again: the other
/// entries of the same slot (written for a FlashInfer build, rule set or dynafold version this
/// one replaces: an upgrade in place), and those whose source file no longer exists (an
/// uninstalled package, a removed environment). Only regular files of ours with our name
/// shape are touched; failures are ignored.
fn prune(kept: &Path) {
    let (Some(dir), Some(name)) = (kept.parent(), kept.file_name().and_then(|n| n.to_str())) else {
        return;
    };
    let Some(kept_slot) = slot_of(name) else {
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
        let Some(slot) = slot_of(other) else {
            continue;
        };
        if other == name {
            continue;
        }
        let path = entry.path();
        let why = if slot == kept_slot {
            "superseded"
        } else if source_is_gone(&path) {
            "its source file is gone"
        } else {
            continue;
        };
        remove_ours(&path, why);
    }
}

/// Whether the cache file at `path` names an absolute source path that no longer exists.
/// Unreadable files and files of another layout are left alone.
fn source_is_gone(path: &Path) -> bool {
    let mut head = [0u8; MAGIC.len() + DIGEST_LEN + 4 + MAX_ORIGIN_BYTES];
    let read = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .and_then(|mut f| {
            let mut n = 0;
            while n < head.len() {
                match f.read(&mut head[n..])? {
                    0 => break,
                    k => n += k,
                }
            }
            Ok(n)
        });
    let Ok(n) = read else {
        return false;
    };
    let origin = head[..n]
        .strip_prefix(MAGIC.as_slice())
        .and_then(|rest| rest.get(DIGEST_LEN..))
        .and_then(split_origin)
        .and_then(|(origin, _)| std::str::from_utf8(origin).ok());
    match origin {
        Some(origin) if Path::new(origin).is_absolute() => {
            matches!(std::fs::symlink_metadata(origin), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
        }
        _ => false,
    }
}

/// Removes the entries an earlier dynafold wrote into the `__pycache__` beside the source
/// file (`STEM.TAG.dynafold-HASH.pyc`), which `pip uninstall` would leave behind.
fn remove_beside_source(origin: &str) {
    let origin = Path::new(origin);
    if !origin.is_absolute() {
        return;
    }
    let (Some(parent), Some(stem)) = (origin.parent(), origin.file_stem().and_then(|s| s.to_str()))
    else {
        return;
    };
    let pycache = parent.join("__pycache__");
    let Ok(entries) = std::fs::read_dir(&pycache) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(slot) = file_name.to_str().and_then(slot_of) else {
            continue;
        };
        // STEM.TAG: the tag is one dotted word (cpython-311), the stem has no dot.
        if slot
            .split_once('.')
            .is_some_and(|(s, tag)| s == stem && !tag.contains('.'))
        {
            remove_ours(
                &entry.path(),
                "written beside the module by an earlier dynafold",
            );
        }
    }
}

fn remove_ours(path: &Path, why: &str) {
    let ours = std::fs::symlink_metadata(path)
        .map(|m| m.is_file() && m.uid() == euid())
        .unwrap_or(false);
    if ours {
        match std::fs::remove_file(path) {
            Ok(()) => log::debug!("bytecode cache {}: {why}; removed", path.display()),
            Err(e) => log::debug!("bytecode cache {}: not removed: {e}", path.display()),
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
fn write_atomic(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("no parent folder"))?;
    if !dir.is_dir() {
        // Private to us, like the user cache folders of pip and torch.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
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
        dir.join("cache")
            .join("m.cpython-311.dynafold-0123456789abcdef.pyc")
    }

    /// A cache file of this layout recording `origin`.
    fn entry_file(path: &Path, origin: &str) {
        let mut contents = MAGIC.to_vec();
        contents.extend_from_slice(&[7; DIGEST_LEN]);
        contents.extend_from_slice(&(origin.len() as u32).to_le_bytes());
        contents.extend_from_slice(origin.as_bytes());
        contents.extend_from_slice(b"code");
        write_atomic(path, &contents).unwrap();
    }

    #[test]
    fn storing_prunes_superseded_entries_and_those_whose_source_is_gone() {
        let dir = TempDir::new();
        let cache = dir.path().join("cache");
        let live = dir.path().join("live.py");
        std::fs::write(&live, "x = 1\n").unwrap();
        let live = live.to_str().unwrap();
        let gone = dir.path().join("gone.py");
        let gone = gone.to_str().unwrap();
        let name = |slot: &str, hash: &str| cache.join(format!("{slot}.dynafold-{hash}.pyc"));
        let kept = name("a.cpython-311.1111111111111111", "0000000000000000");
        let older = name("a.cpython-311.1111111111111111", "00000000000000ff");
        let other_env = name("a.cpython-311.2222222222222222", "0000000000000000");
        let uninstalled = name("b.cpython-311.3333333333333333", "0000000000000000");
        let hook = name("_dynafold_x.cpython-311", "0000000000000000");
        entry_file(&kept, live);
        entry_file(&older, live);
        entry_file(&other_env, live);
        entry_file(&uninstalled, gone);
        entry_file(&hook, "<dynafold>/hooks/x.py");
        let foreign = cache.join("notes.txt");
        std::fs::write(&foreign, "not ours").unwrap();
        prune(&kept);
        assert!(kept.exists() && other_env.exists() && hook.exists() && foreign.exists());
        assert!(!older.exists(), "a superseded entry of the same slot stays");
        assert!(!uninstalled.exists(), "an entry whose source is gone stays");
    }

    #[test]
    fn entries_an_earlier_dynafold_wrote_beside_the_module_are_removed() {
        let dir = TempDir::new();
        let pycache = dir.path().join("__pycache__");
        std::fs::create_dir(&pycache).unwrap();
        let ours = pycache.join("fp4.cpython-311.dynafold-0123456789abcdef.pyc");
        let cpython = pycache.join("fp4.cpython-311.pyc");
        let other_module = pycache.join("core.cpython-311.dynafold-0123456789abcdef.pyc");
        for f in [&ours, &cpython, &other_module] {
            std::fs::write(f, "x").unwrap();
        }
        remove_beside_source(dir.path().join("fp4.py").to_str().unwrap());
        assert!(!ours.exists());
        assert!(cpython.exists() && other_module.exists());
    }

    #[test]
    fn only_names_of_our_shape_have_a_slot() {
        assert_eq!(
            slot_of("m.cpython-311.ab.dynafold-0123456789abcdef.pyc"),
            Some("m.cpython-311.ab")
        );
        assert_eq!(slot_of("m.cpython-311.dynafold-0123456789abcdeg.pyc"), None);
        assert_eq!(slot_of("m.cpython-311.dynafold-0123.pyc"), None);
        assert_eq!(slot_of("m.cpython-311.pyc"), None);
        assert_eq!(split_origin(&[3, 0, 0, 0, b'a', b'b']), None);
        assert_eq!(
            split_origin(&[1, 0, 0, 0, b'a', b'b']),
            Some((&b"a"[..], &b"b"[..]))
        );
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
            with_umask(mask, || write_atomic(&path, b"payload")).unwrap();
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
        std::fs::create_dir(path.parent().unwrap()).unwrap();
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
        write_atomic(&path, b"payload").unwrap();
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
