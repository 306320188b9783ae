//! The op engine (`hooks/ops/`) as the real package `_dynafold_ops`: a finder at the end of
//! `sys.meta_path` answers for the package and its modules from the table build.rs embeds, and
//! its loader runs each through dynafold's bytecode cache. Python's own import system does the
//! rest, so the engine's modules import each other with plain `import` statements, in whatever
//! order they need, and nothing outside this library can shadow or serve them.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyModule, PyString};

use crate::cache;

/// One embedded module: its name, the file name its code and tracebacks carry, whether it is
/// a package, and its source.
pub struct EngineFile {
    pub module: &'static str,
    pub file: &'static str,
    pub package: bool,
    pub source: &'static str,
}

include!(concat!(env!("OUT_DIR"), "/engine_files.rs"));

fn lookup(name: &str) -> Option<&'static EngineFile> {
    FILES.iter().find(|f| f.module == name)
}

#[pyclass(module = "dynafold", frozen)]
pub struct EngineFinder;

#[pymethods]
impl EngineFinder {
    #[pyo3(signature = (fullname, path=None, target=None))]
    fn find_spec(
        &self,
        py: Python<'_>,
        fullname: &Bound<'_, PyAny>,
        path: Option<&Bound<'_, PyAny>>,
        target: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Py<PyAny>>> {
        let _ = (path, target);
        let Some(file) = fullname
            .cast::<PyString>()
            .ok()
            .and_then(|n| n.to_cow().ok())
            .and_then(|n| lookup(&n))
        else {
            return Ok(None);
        };
        let kwargs = PyDict::new(py);
        kwargs.set_item("origin", file.file)?;
        kwargs.set_item("is_package", file.package)?;
        let spec = py
            .import("importlib.machinery")?
            .getattr("ModuleSpec")?
            .call((file.module, Py::new(py, EngineLoader)?), Some(&kwargs))?;
        Ok(Some(spec.unbind()))
    }

    fn __repr__(&self) -> &'static str {
        "<dynafold EngineFinder>"
    }
}

#[pyclass(module = "dynafold", frozen)]
pub struct EngineLoader;

#[pymethods]
impl EngineLoader {
    fn create_module(&self, _spec: &Bound<'_, PyAny>) -> Option<Py<PyAny>> {
        None
    }

    fn exec_module(&self, py: Python<'_>, module: &Bound<'_, PyAny>) -> PyResult<()> {
        let name: String = module.getattr("__name__")?.extract()?;
        let Some(file) = lookup(&name) else {
            return Err(pyo3::exceptions::PyImportError::new_err(format!(
                "{name} is not a module of dynafold's engine"
            )));
        };
        // As embedded modules always had it: tracebacks and inspect name the hook's file.
        module.setattr("__file__", file.file)?;
        let bytes = PyBytes::new(py, file.source.as_bytes());
        let entry = cache::Entry::new(py, file.module, file.file, &bytes, "");
        let (code, _) = cache::code(py, entry.as_ref(), file.source, file.file)?;
        let globals = module.getattr("__dict__")?;
        py.import("builtins")?
            .getattr("exec")?
            .call1((code, globals.cast::<PyDict>()?))?;
        Ok(())
    }
}

/// The engine's module `name`, imported through the finder (installed on first use, once).
pub fn import<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyModule>> {
    let meta_path = py.import("sys")?.getattr("meta_path")?;
    let installed = meta_path
        .try_iter()?
        .any(|f| f.is_ok_and(|f| f.is_instance_of::<EngineFinder>()));
    if !installed {
        meta_path.call_method1("append", (Py::new(py, EngineFinder)?,))?;
    }
    py.import(name)
}
