//! Python helpers shipped inside the library (from `hooks/*.py`), run once per process as
//! private modules. Their compiled code goes through dynafold's bytecode cache: compiling the
//! observer alone costs 10+ ms, paid by every process that imports `torch._dynamo`.

use std::ffi::CStr;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyModule};

use crate::cache;

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
    let file = file_name.to_string_lossy();
    let code = code(py, source, &file, &key)?;
    let module = PyModule::new(py, &key)?;
    module.setattr("__file__", file.as_ref())?;
    // In sys.modules while it runs, as an import would have it; taken out again if it fails,
    // so the next call starts afresh.
    modules.set_item(key.as_ref(), &module)?;
    let globals = module.getattr("__dict__")?;
    let ran = py
        .import("builtins")?
        .getattr("exec")?
        .call1((code, globals.cast::<PyDict>()?));
    if let Err(e) = ran {
        let _ = modules.del_item(key.as_ref());
        return Err(e);
    }
    Ok(module)
}

fn code<'py>(py: Python<'py>, source: &str, file: &str, name: &str) -> PyResult<Bound<'py, PyAny>> {
    let bytes = PyBytes::new(py, source.as_bytes());
    let entry = cache::Entry::new(py, name, file, &bytes, "", cache::Place::UserCache);
    if let Some(code) = entry.as_ref().and_then(|e| e.load(py)) {
        return Ok(code);
    }
    let code = py
        .import("builtins")?
        .getattr("compile")?
        .call1((source, file, "exec", 0, true))?;
    if let Some(e) = &entry {
        e.store(py, &code);
    }
    Ok(code)
}
