//! Keeps `DynafoldFinder` at `sys.meta_path[0]` when other finders (setuptools'
//! `_distutils_hack`, editable installs) insert themselves later.
//!
//! Checked on every `import` audit event, which fires before the finders are asked; the usual
//! answer (we are still first) costs two borrowed-pointer reads and no Python code.

use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyList;

static FINDER: AtomicPtr<ffi::PyObject> = AtomicPtr::new(std::ptr::null_mut());
/// Moving the finder runs list methods; an import they trigger must not recurse here.
static MOVING: AtomicBool = AtomicBool::new(false);

/// Remembers the finder object (owned for the life of the process by `finder::install`).
pub fn remember(finder: *mut ffi::PyObject) {
    FINDER.store(finder, Ordering::Relaxed);
}

pub fn check() {
    let ours = FINDER.load(Ordering::Relaxed);
    // SAFETY: GIL held (audit hooks run with it); borrowed references only, and every call
    // that could fail is checked before the next. Py_IsInitialized guards finalisation,
    // when sys.meta_path may already be gone.
    unsafe {
        if ours.is_null() || ffi::Py_IsInitialized() == 0 {
            return;
        }
        let meta_path = ffi::PySys_GetObject(c"meta_path".as_ptr());
        if meta_path.is_null() || ffi::PyList_Check(meta_path) == 0 {
            return;
        }
        if ffi::PyList_Size(meta_path) > 0 && ffi::PyList_GetItem(meta_path, 0) == ours {
            return;
        }
    }
    if MOVING.swap(true, Ordering::Acquire) {
        return;
    }
    Python::attach(|py| {
        let moved = remembered(py)
            .ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err("finder not installed"))
            .and_then(|ours| move_first(&ours));
        if let Err(e) = moved {
            log::debug!("could not move the finder first: {e}");
        }
        if PyErr::occurred(py) {
            let _ = PyErr::take(py);
        }
    });
    MOVING.store(false, Ordering::Release);
}

/// The remembered finder as a new reference, if installed.
pub fn remembered(py: Python<'_>) -> Option<Bound<'_, PyAny>> {
    let p = FINDER.load(Ordering::Relaxed);
    // SAFETY: the pointer is a strong reference leaked by `finder::install`, so it is alive.
    (!p.is_null()).then(|| unsafe { Bound::from_borrowed_ptr(py, p) })
}

/// Moves `ours` to the front of sys.meta_path (inserting it if someone removed it), dropping
/// any duplicate of it.
pub fn move_first(ours: &Bound<'_, PyAny>) -> PyResult<()> {
    let meta_path = ours.py().import("sys")?.getattr("meta_path")?;
    let meta_path = meta_path.cast::<PyList>()?;
    while let Ok(i) = meta_path.index(ours) {
        meta_path.del_item(i)?;
    }
    meta_path.insert(0, ours)
}
