//! The one place that turns "anything went wrong" into "log one line and carry on".

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::prelude::*;

/// Runs `f`; a Python error or a panic is logged under `what` and becomes `None`. The Python
/// error state is left clear whatever happened.
pub fn guarded<T>(py: Python<'_>, what: &str, f: impl FnOnce() -> PyResult<T>) -> Option<T> {
    let result = catch_unwind(AssertUnwindSafe(f));
    // Raw C calls inside `f` may leave an error set that no PyErr carried out.
    if PyErr::occurred(py) {
        let _ = PyErr::take(py);
    }
    match result {
        Ok(Ok(v)) => Some(v),
        Ok(Err(e)) => {
            log::warn!(
                "{what}: {}; falling back to the normal import",
                one_line(py, &e)
            );
            None
        }
        Err(_) => {
            log::warn!("{what}: internal panic; falling back to the normal import");
            None
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
