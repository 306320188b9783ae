//! Loading the pyo3 library that sits beside this one and asking it to install the finder.

use std::ffi::{c_int, c_void, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// File name of the pyo3 library, expected in the same folder as `libdynafold.so`.
const PYTHON_LIB: &str = "libdynafold_python.so";

/// One line on stderr. The stub cannot use the `log` crate machinery of the pyo3 library,
/// and speaks only in Python processes and only when something is off.
pub fn say(msg: &str) {
    if quiet() {
        return;
    }
    let line = format!("dynafold[{}] WARN: {msg}\n", std::process::id());
    // SAFETY: writing a valid buffer to fd 2; a short or failed write is acceptable.
    unsafe {
        libc::write(2, line.as_ptr().cast(), line.len());
    }
}

/// Quiet when `DYNAFOLD_LOG` would hide dynafold's warnings in the pyo3 library too; a bad
/// filter is reported there, and the default (warn) applies here meanwhile.
fn quiet() -> bool {
    getenv(c"DYNAFOLD_LOG").is_some_and(|v| {
        matches!(dynafold_values::log_filter(&v), Ok(Some(f)) if dynafold_values::hides_warnings(f))
    })
}

fn getenv(name: &CStr) -> Option<String> {
    // SAFETY: getenv with a NUL-terminated name; the result is copied at once.
    let p = unsafe { libc::getenv(name.as_ptr()) };
    if p.is_null() {
        return None;
    }
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// Whether DYNAFOLD_DISABLE asks to stay off. A value that is neither a yes nor a no is
/// reported and treated as the default (enabled), as for every DYNAFOLD_* variable.
pub fn disabled_by_env() -> bool {
    let raw = getenv(c"DYNAFOLD_DISABLE");
    let (off, warning) = dynafold_values::flag("DYNAFOLD_DISABLE", raw.as_deref(), false);
    if let Some(w) = warning {
        say(&w);
    }
    off
}

/// Loads the pyo3 library and calls its `dynafold_install`. Returns its `dynafold_on_import`
/// when the finder is installed, None when this process stays untouched.
pub fn load_and_install() -> Option<*mut c_void> {
    let path = sibling_library()?;
    let cpath = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: dlopen/dlsym with NUL-terminated strings; the symbols are the pyo3 library's
    // own `extern "C"` functions with these signatures.
    unsafe {
        let handle = libc::dlopen(cpath.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        if handle.is_null() {
            say(&format!("cannot load {}: {}", path.display(), dlerror()));
            return None;
        }
        let install = libc::dlsym(handle, c"dynafold_install".as_ptr());
        let on_import = libc::dlsym(handle, c"dynafold_on_import".as_ptr());
        if install.is_null() || on_import.is_null() {
            say(&format!("{} lacks dynafold_install", path.display()));
            return None;
        }
        let install: extern "C" fn() -> c_int = std::mem::transmute(install);
        (install() == 0).then_some(on_import)
    }
}

fn dlerror() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated message.
    let p = unsafe { libc::dlerror() };
    if p.is_null() {
        return "unknown error".into();
    }
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// The real path of this library, resolved with dladdr so that a relative LD_PRELOAD entry or
/// a symlink still finds its sibling.
fn sibling_library() -> Option<PathBuf> {
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    let anchor = load_and_install as *const c_void;
    // SAFETY: dladdr fills `info` for an address inside this library.
    if unsafe { libc::dladdr(anchor, &mut info) } == 0 || info.dli_fname.is_null() {
        say("cannot locate libdynafold.so itself (dladdr failed)");
        return None;
    }
    let own = unsafe { CStr::from_ptr(info.dli_fname) };
    let own = Path::new(std::ffi::OsStr::from_bytes(own.to_bytes()));
    let real = std::fs::canonicalize(own).unwrap_or_else(|_| own.to_path_buf());
    Some(real.parent()?.join(PYTHON_LIB))
}
