//! `DynafoldFinder`: first on `sys.meta_path`, it answers `None` at once for every module that
//! is not its business, and for its targets asks the finders behind it for the ordinary spec
//! and swaps in its own loader.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use crate::{guard, keep_first, overhead, post_import, spec_loaders};

/// What the finder does with a module it is asked about.
enum Target {
    /// A FlashInfer module the rewriter has rules for.
    Rewrite,
    /// A module after whose import something must be started (the graph-break observer,
    /// the recording of FlashInfer's op declarations).
    Observe,
}

fn classify(name: &str) -> Option<Target> {
    if dynafold_core::rewrite::is_target(name) {
        Some(Target::Rewrite)
    } else if post_import::is_target(name) {
        Some(Target::Observe)
    } else {
        None
    }
}

#[pyclass(module = "dynafold", frozen)]
pub struct DynafoldFinder;

#[pymethods]
impl DynafoldFinder {
    #[pyo3(signature = (fullname, path=None, target=None))]
    fn find_spec(
        slf: &Bound<'_, Self>,
        fullname: &Bound<'_, PyAny>,
        path: Option<&Bound<'_, PyAny>>,
        target: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Py<PyAny>>> {
        let py = slf.py();
        overhead::count_find_spec();
        let Some(name) = fullname
            .cast::<PyString>()
            .ok()
            .and_then(|n| n.to_cow().ok())
        else {
            return Ok(None);
        };
        let Some(kind) = classify(&name) else {
            return Ok(None);
        };
        let found = guard::propagating(py, &format!("find_spec({name})"), || {
            if dynafold_core::config::test_fault("find_spec") {
                return Err(pyo3::exceptions::PyRuntimeError::new_err(
                    "fault injected by DYNAFOLD_TEST_FAULT",
                ));
            }
            let Some(spec) = spec_from_others(slf, fullname, path, target)? else {
                return Ok(None);
            };
            let wrapped = match kind {
                Target::Rewrite => spec_loaders::rewriting(py, &name, &spec)?,
                Target::Observe => spec_loaders::observing(py, &name, &spec)?,
            };
            Ok(wrapped.then(|| spec.unbind()))
        })?;
        Ok(found.flatten())
    }

    /// dynafold's own time in this process so far, by part (see `overhead.rs`).
    fn overhead<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for (name, value) in overhead::snapshot() {
            out.set_item(name, value)?;
        }
        Ok(out)
    }

    fn __repr__(&self) -> &'static str {
        "<DynafoldFinder>"
    }
}

/// The spec the rest of `sys.meta_path` would have produced, skipping ourselves.
fn spec_from_others<'py>(
    slf: &Bound<'py, DynafoldFinder>,
    fullname: &Bound<'py, PyAny>,
    path: Option<&Bound<'py, PyAny>>,
    target: Option<&Bound<'py, PyAny>>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let py = slf.py();
    let meta_path = py.import("sys")?.getattr("meta_path")?;
    // A snapshot: a finder may edit sys.meta_path while we iterate.
    let finders: Vec<Bound<'py, PyAny>> = meta_path.try_iter()?.collect::<PyResult<_>>()?;
    for finder in finders {
        if finder.is(slf) || !finder.hasattr("find_spec")? {
            continue;
        }
        let spec = finder.call_method1("find_spec", (fullname, path, target))?;
        if !spec.is_none() {
            return Ok(Some(spec));
        }
    }
    Ok(None)
}

/// Puts one finder at `sys.meta_path[0]`, unless one is there already (after `os.fork` the
/// child inherits it), and remembers it so `keep_first` can keep it there.
pub fn install(py: Python<'_>) -> PyResult<()> {
    let meta_path = py.import("sys")?.getattr("meta_path")?;
    let meta_path = meta_path.cast::<PyList>()?;
    let existing = meta_path
        .iter()
        .find(|f| f.is_instance_of::<DynafoldFinder>());
    let finder: Bound<'_, PyAny> = match existing {
        Some(f) => f,
        None => Bound::new(py, DynafoldFinder)?.into_any(),
    };
    keep_first::remember(finder.clone().unbind().into_ptr());
    keep_first::move_first(&finder)?;
    log::debug!("finder installed at sys.meta_path[0]");
    Ok(())
}
