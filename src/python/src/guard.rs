//! The one place that turns "anything went wrong" into "log one line and carry on".
//!
//! Except an interrupt: `KeyboardInterrupt` and `SystemExit` (any `BaseException` that is not
//! an `Exception`) are the user's, not a failure of ours. Where the caller can raise, they
//! propagate ([`propagating`]); where it cannot (audit hooks), a Ctrl-C is re-armed so that
//! CPython raises it at its next check ([`guarded`]).

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::exceptions::{PyException, PyKeyboardInterrupt};
use pyo3::prelude::*;

/// Runs `f`; a Python error or a panic is logged under `what` and becomes `None`. The Python
/// error state is left clear whatever happened; an interrupt is re-armed, not lost.
pub fn guarded<T>(py: Python<'_>, what: &str, f: impl FnOnce() -> PyResult<T>) -> Option<T> {
    match propagating(py, what, f) {
        Ok(v) => v,
        Err(e) => {
            if e.is_instance_of::<PyKeyboardInterrupt>(py) {
                // SAFETY: GIL held; only schedules the SIGINT handler to run again.
                unsafe { pyo3::ffi::PyErr_SetInterrupt() };
            }
            None
        }
    }
}

/// Runs `f`; an `Exception` or a panic is logged under `what` and becomes `Ok(None)`, an
/// interrupt comes back as `Err` for the caller to raise. No other error is left set.
pub fn propagating<T>(
    py: Python<'_>,
    what: &str,
    f: impl FnOnce() -> PyResult<T>,
) -> PyResult<Option<T>> {
    let result = catch_unwind(AssertUnwindSafe(f));
    // Raw C calls inside `f` may leave an error set that no PyErr carried out.
    if PyErr::occurred(py) {
        let _ = PyErr::take(py);
    }
    match result {
        Ok(Ok(v)) => Ok(Some(v)),
        Ok(Err(e)) if !e.is_instance_of::<PyException>(py) => Err(e),
        Ok(Err(e)) => {
            log::warn!(
                "{what}: {}; falling back to the normal import",
                one_line(py, &e)
            );
            Ok(None)
        }
        Err(_) => {
            log::warn!("{what}: internal panic; falling back to the normal import");
            Ok(None)
        }
    }
}

/// `Type: message`, first line only, for log lines.
pub fn one_line(py: Python<'_>, e: &PyErr) -> String {
    let ty = e
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".into());
    let msg = e.value(py).to_string();
    let first = msg.lines().next().unwrap_or("");
    format!("{ty}: {first}")
}
