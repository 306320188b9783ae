//! Work to start right after a module finishes importing: today, the graph-break observer
//! once `torch._dynamo` is loaded. The waiting loader is `hooks/loaders.py`'s
//! `ObservingLoader`, so that torch._dynamo's body runs beneath no Rust frame.

use pyo3::prelude::*;

const DYNAMO: &str = "torch._dynamo";

pub fn is_target(name: &str) -> bool {
    name == DYNAMO
}

/// Wraps the ordinary loader so the observer starts after `torch._dynamo` executes.
pub fn wrap(py: Python<'_>, spec: &Bound<'_, PyAny>) -> PyResult<bool> {
    let inner = spec.getattr("loader")?;
    if !inner.hasattr("exec_module")? {
        return Ok(false);
    }
    let ours = crate::loader::python_side(py)?
        .getattr("ObservingLoader")?
        .call1((inner,))?;
    spec.setattr("loader", ours)?;
    Ok(true)
}

/// Called by `ObservingLoader` once torch._dynamo has executed.
#[pyfunction]
pub fn start_observer(py: Python<'_>) -> PyResult<()> {
    let _timer = crate::overhead::Timer::start(crate::overhead::Part::Observer);
    crate::guard::propagating(py, "starting the graph-break observer", || {
        crate::reporter::install_observer(py)
    })?;
    Ok(())
}
