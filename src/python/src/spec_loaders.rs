//! `hooks/glue/loaders.py`, the loaders the finder puts into the specs of its targets, and the
//! native functions they call: `loader.rs`'s fold for `RewritingLoader`, `post_import.rs`'s
//! work for `ObservingLoader`.
//!
//! Both of those are called from here and call nothing back, so the Python module and its
//! `_native` table sit above them rather than inside either.

use pyo3::prelude::*;
use pyo3::types::PyModule;

use crate::{embedded, loader, post_import};

const SOURCE: &str = include_str!("../../../hooks/glue/loaders.py");

/// `hooks/glue/loaders.py` as module `_dynafold_loaders`, its `_native` set on first use.
fn python_side(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    let module = embedded::module(
        py,
        SOURCE,
        c"<dynafold>/hooks/glue/loaders.py",
        c"_dynafold_loaders",
    )?;
    if module.getattr("_native")?.is_none() {
        let native = PyModule::new(py, "_dynafold_native")?;
        loader::add_natives(&native)?;
        native.add_function(wrap_pyfunction!(post_import::after_import, &native)?)?;
        module.setattr("_native", native)?;
    }
    Ok(module)
}

/// Swaps a `RewritingLoader` into `spec` when it is an ordinary source module; false
/// otherwise.
pub fn rewriting(py: Python<'_>, name: &str, spec: &Bound<'_, PyAny>) -> PyResult<bool> {
    let origin = spec.getattr("origin")?;
    let inner = spec.getattr("loader")?;
    let is_source = origin.extract::<String>().is_ok_and(|o| o.ends_with(".py"));
    if !is_source || !inner.hasattr("get_data")? || !inner.hasattr("exec_module")? {
        log::info!("{name}: not a plain source module; loaded unchanged");
        return Ok(false);
    }
    swap(py, "RewritingLoader", name, spec, inner)
}

/// Swaps an `ObservingLoader` into `spec`, so that `post_import::after_import` runs once the
/// module has executed.
pub fn observing(py: Python<'_>, name: &str, spec: &Bound<'_, PyAny>) -> PyResult<bool> {
    let inner = spec.getattr("loader")?;
    if !inner.hasattr("exec_module")? {
        return Ok(false);
    }
    swap(py, "ObservingLoader", name, spec, inner)
}

fn swap(
    py: Python<'_>,
    class: &str,
    name: &str,
    spec: &Bound<'_, PyAny>,
    inner: Bound<'_, PyAny>,
) -> PyResult<bool> {
    let ours = python_side(py)?.getattr(class)?.call1((inner, name))?;
    spec.setattr("loader", ours)?;
    Ok(true)
}
