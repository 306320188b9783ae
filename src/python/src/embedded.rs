//! Python helpers shipped inside the library (`hooks/glue/`, `hooks/observer/`, `hooks/survey/`),
//! run once per process as private modules. Their compiled code goes through dynafold's bytecode
//! cache: compiling the observer alone costs 10+ ms, paid by every process that imports
//! `torch._dynamo`.

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
    let bytes = PyBytes::new(py, source.as_bytes());
    let entry = cache::Entry::new(py, &key, &file, &bytes, "");
    let (code, _) = cache::code(py, entry.as_ref(), source, &file)?;
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
