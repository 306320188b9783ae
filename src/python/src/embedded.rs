//! Python helpers shipped inside the library (from `hooks/*.py`), run once per process as
//! private modules.

use std::ffi::{CStr, CString};

use pyo3::prelude::*;
use pyo3::types::PyModule;

/// The module `name`, executing `source` the first time (it is then kept in sys.modules).
pub fn module<'py>(
    py: Python<'py>,
    source: &str,
    file_name: &CStr,
    name: &CStr,
) -> PyResult<Bound<'py, PyModule>> {
    let modules = py.import("sys")?.getattr("modules")?;
    let key = name.to_string_lossy();
    if let Ok(existing) = modules.get_item(key.as_ref()) {
        if let Ok(m) = existing.cast_into::<PyModule>() {
            return Ok(m);
        }
    }
    let code =
        CString::new(source).map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    PyModule::from_code(py, &code, file_name, name)
}
