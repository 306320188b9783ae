//! Work to start right after a module finishes importing: today, the graph-break observer
//! once `torch._dynamo` is loaded.

use pyo3::prelude::*;

const DYNAMO: &str = "torch._dynamo";

pub fn is_target(name: &str) -> bool {
    name == DYNAMO
}

#[pyclass(module = "dynafold", frozen)]
pub struct PostImportLoader {
    inner: Py<PyAny>,
}

/// Wraps the ordinary loader so the observer starts after `torch._dynamo` executes.
pub fn wrap(py: Python<'_>, spec: &Bound<'_, PyAny>) -> PyResult<bool> {
    let inner = spec.getattr("loader")?;
    if !inner.hasattr("exec_module")? {
        return Ok(false);
    }
    spec.setattr(
        "loader",
        Bound::new(
            py,
            PostImportLoader {
                inner: inner.unbind(),
            },
        )?,
    )?;
    Ok(true)
}

#[pymethods]
impl PostImportLoader {
    fn create_module(&self, py: Python<'_>, spec: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let inner = self.inner.bind(py);
        if inner.hasattr("create_module")? {
            Ok(inner.call_method1("create_module", (spec,))?.unbind())
        } else {
            Ok(py.None())
        }
    }

    fn exec_module(&self, module: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = module.py();
        let inner = self.inner.bind(py);
        inner.call_method1("exec_module", (module,))?;
        // Put the ordinary loader back where introspection looks for it.
        let _ = module.setattr("__loader__", inner);
        if let Ok(spec) = module.getattr("__spec__") {
            let _ = spec.setattr("loader", inner);
        }
        let _timer = crate::overhead::Timer::start(crate::overhead::Part::Observer);
        crate::guard::guarded(py, "starting the graph-break observer", || {
            crate::reporter::install_observer(py)
        });
        Ok(())
    }

    fn __getattr__(&self, py: Python<'_>, attr: &str) -> PyResult<Py<PyAny>> {
        Ok(self.inner.bind(py).getattr(attr)?.unbind())
    }
}
