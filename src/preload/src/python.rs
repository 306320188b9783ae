//! The handful of CPython entry points the stub needs, looked up at run time so that the
//! library carries no reference to Python symbols.

use std::ffi::{c_char, c_int, c_void, CStr};

pub type AuditHook = extern "C" fn(*const c_char, *mut c_void, *mut c_void) -> c_int;

pub struct Python {
    pub add_audit_hook: unsafe extern "C" fn(AuditHook, *mut c_void) -> c_int,
    pub is_initialized: unsafe extern "C" fn() -> c_int,
    pub version: unsafe extern "C" fn() -> *const c_char,
    /// The current thread state or NULL, without the fatal error `PyThreadState_Get` gives:
    /// `PyThreadState_GetUnchecked` (3.13+) or `_PyThreadState_UncheckedGet` (3.9-3.12).
    pub thread_state: unsafe extern "C" fn() -> *mut c_void,
    /// `PyThreadState_GetInterpreter` and `PyInterpreterState_Main`: audit hooks fire in every
    /// interpreter of the process, and dynafold lives in the main one only.
    pub interpreter_of: unsafe extern "C" fn(*mut c_void) -> *mut c_void,
    pub main_interpreter: unsafe extern "C" fn() -> *mut c_void,
}

/// The interpreter linked into this process, or None when this is not a Python process.
pub fn find() -> Option<Python> {
    // SAFETY: dlsym on RTLD_DEFAULT with NUL-terminated names; the casts match CPython's
    // documented signatures for these functions.
    unsafe {
        let add = symbol(c"PySys_AddAuditHook")?;
        let init = symbol(c"Py_IsInitialized")?;
        let version = symbol(c"Py_GetVersion")?;
        let tstate = symbol(c"PyThreadState_GetUnchecked")
            .or_else(|| symbol(c"_PyThreadState_UncheckedGet"))?;
        let interpreter_of = symbol(c"PyThreadState_GetInterpreter")?;
        let main = symbol(c"PyInterpreterState_Main")?;
        Some(Python {
            add_audit_hook: std::mem::transmute::<
                *mut c_void,
                unsafe extern "C" fn(AuditHook, *mut c_void) -> c_int,
            >(add),
            is_initialized: std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> c_int>(
                init,
            ),
            version: std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> *const c_char>(
                version,
            ),
            thread_state: std::mem::transmute::<*mut c_void, unsafe extern "C" fn() -> *mut c_void>(
                tstate,
            ),
            interpreter_of: std::mem::transmute::<
                *mut c_void,
                unsafe extern "C" fn(*mut c_void) -> *mut c_void,
            >(interpreter_of),
            main_interpreter: std::mem::transmute::<
                *mut c_void,
                unsafe extern "C" fn() -> *mut c_void,
            >(main),
        })
    }
}

unsafe fn symbol(name: &CStr) -> Option<*mut c_void> {
    let p = libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr());
    (!p.is_null()).then_some(p)
}

/// Whether the pyo3 library (abi3, CPython >= 3.9, GIL builds) can run in this interpreter.
/// `Py_GetVersion` is safe to call before initialisation.
pub fn supported(py: &Python) -> Result<(), String> {
    // SAFETY: Py_GetVersion returns a static NUL-terminated string.
    let text = unsafe { CStr::from_ptr((py.version)()) }.to_string_lossy();
    if text.contains("free-threading") {
        return Err(format!("free-threaded CPython is not supported ({text})"));
    }
    let mut parts = text.split(|c: char| !c.is_ascii_digit());
    let major: u32 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    if (major, minor) < (3, 9) {
        return Err(format!("CPython {major}.{minor} is older than 3.9"));
    }
    Ok(())
}
