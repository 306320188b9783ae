//! `DynafoldLoader`: executes a target module from rewritten source, compiled under the
//! module's own file name, or hands the module back to the ordinary loader.
//!
//! The rewritten code is never written to the normal `__pycache__`: this loader does not
//! implement `get_code`/`source_to_code` overrides, so the ordinary loader's cache only ever
//! sees the original source; the rewritten code goes to dynafold's own cache (`cache.rs`).
//! Attributes it does not define (get_source, get_filename, is_package, resource readers) are
//! the ordinary loader's, so tracebacks, `inspect` and `importlib.resources` keep working on
//! the unchanged file.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use dynafold_core::rewrite::{self, FoldContext, GlobalValue, Rewritten, Skip};

use crate::cache;
use crate::context::ProcessContext;
use crate::guard;
use crate::overhead;

#[pyclass(module = "dynafold", frozen)]
pub struct DynafoldLoader {
    inner: Py<PyAny>,
    name: String,
}

/// Swaps our loader into `spec` when it is an ordinary source module; false otherwise.
pub fn wrap(py: Python<'_>, name: &str, spec: &Bound<'_, PyAny>) -> PyResult<bool> {
    let origin = spec.getattr("origin")?;
    let inner = spec.getattr("loader")?;
    let is_source = origin.extract::<String>().is_ok_and(|o| o.ends_with(".py"));
    if !is_source || !inner.hasattr("get_data")? || !inner.hasattr("exec_module")? {
        log::info!("{name}: not a plain source module; loaded unchanged");
        return Ok(false);
    }
    let ours = DynafoldLoader {
        inner: inner.unbind(),
        name: name.to_owned(),
    };
    spec.setattr("loader", Bound::new(py, ours)?)?;
    Ok(true)
}

#[pymethods]
impl DynafoldLoader {
    fn create_module(&self, _spec: &Bound<'_, PyAny>) -> Option<Py<PyAny>> {
        None
    }

    fn exec_module(&self, module: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = module.py();
        let done = guard::guarded(py, &format!("rewriting {}", self.name), || {
            self.exec_rewritten(module)
        });
        if done != Some(true) {
            self.inner.bind(py).call_method1("exec_module", (module,))?;
        }
        if crate::fp4_opaque::is_target(&self.name) {
            let _timer = overhead::Timer::start(overhead::Part::Fp4Path);
            guard::guarded(py, &format!("fp4 path of {}", self.name), || {
                crate::fp4_opaque::install(py, &self.name, module)
            });
        }
        Ok(())
    }

    fn __getattr__(&self, py: Python<'_>, attr: &str) -> PyResult<Py<PyAny>> {
        Ok(self.inner.bind(py).getattr(attr)?.unbind())
    }

    fn __repr__(&self) -> String {
        format!("<DynafoldLoader for {}>", self.name)
    }
}

impl DynafoldLoader {
    /// Ok(true): executed from rewritten source. Ok(false): nothing to fold, the caller runs
    /// the ordinary loader. Err: something broke, the caller logs and does the same.
    fn exec_rewritten(&self, module: &Bound<'_, PyAny>) -> PyResult<bool> {
        let py = module.py();
        let timer = overhead::Timer::start(overhead::Part::Loader);
        if dynafold_core::config::test_fault("exec_module") {
            return Err(PyRuntimeError::new_err(
                "fault injected by DYNAFOLD_TEST_FAULT",
            ));
        }
        let origin: String = module.getattr("__spec__")?.getattr("origin")?.extract()?;
        let data = self.inner.bind(py).call_method1("get_data", (&origin,))?;
        let source: String = py
            .import("importlib.util")?
            .call_method1("decode_source", (&data,))?
            .extract()?;
        let started = std::time::Instant::now();
        let ctx = ProcessContext::get(py, reads_torch_cuda_home(&source));
        let rewritten = match rewrite::rewrite(&self.name, &source, &ctx) {
            Ok(r) => r,
            Err(Skip(reason)) => {
                // fp4 call sites fold only to cpp_ext's folded version: when there is none,
                // cpp_ext's own warning already said why, once for the process.
                if self.name != "flashinfer.jit.cpp_ext" && ctx.folded_cuda_version().is_none() {
                    log::info!("{}: loaded unchanged: {reason}", self.name);
                } else {
                    log::warn!("{}: loaded unchanged: {reason}", self.name);
                }
                return Ok(false);
            }
        };
        let rewrite_ms = started.elapsed().as_secs_f64() * 1e3;
        let entry = data.cast::<PyBytes>().ok().and_then(|bytes| {
            cache::Entry::new(
                py,
                &self.name,
                &origin,
                bytes,
                &rewritten.source,
                cache::Place::BesideSource(&origin),
            )
        });
        let (code, from_cache) = cache::code(py, entry.as_ref(), &rewritten.source, &origin)?;
        // Operators asking where start-up time goes get dynafold's own share per module.
        log::debug!(
            "{}: rewrite {rewrite_ms:.2} ms (CUDA resolution included), code {:.2} ms ({})",
            self.name,
            started.elapsed().as_secs_f64() * 1e3 - rewrite_ms,
            if from_cache {
                "dynafold cache"
            } else {
                "compile()"
            }
        );
        let globals = module.getattr("__dict__")?;
        let globals = globals.cast::<PyDict>()?;
        // FlashInfer's module imports packaging.version itself a few lines in: importing it
        // here first moves that cost, it does not add to it, so it is not dynafold's time.
        drop(timer);
        let version_type = if rewritten
            .globals
            .iter()
            .any(|g| matches!(g.value, GlobalValue::Version(_)))
        {
            Some(py.import("packaging.version")?.getattr("Version")?)
        } else {
            None
        };
        let timer = overhead::Timer::start(overhead::Part::Loader);
        define_globals(py, globals, &rewritten, version_type.as_ref())?;
        // The module's own execution is FlashInfer's time, not dynafold's.
        drop(timer);
        py.import("builtins")?
            .getattr("exec")?
            .call1((code, globals))?;
        if let Some(v) = rewritten.cuda_version.clone() {
            ctx.set_folded_version(v);
        }
        log::info!(
            "{}: folded {} site(s): {}",
            self.name,
            rewritten.edits.len(),
            rewritten
                .edits
                .iter()
                .map(|e| format!("{} (line {})", e.rule, e.first_line))
                .collect::<Vec<_>>()
                .join(", ")
        );
        Ok(true)
    }
}

/// FlashInfer 0.2/0.3 read torch's `cpp_extension.CUDA_HOME`; only then must the resolver ask
/// torch for it.
fn reads_torch_cuda_home(source: &str) -> bool {
    source.contains("from torch.utils.cpp_extension import") && source.contains("CUDA_HOME")
}

/// Sets the globals the rewritten text refers to, and `__dynafold__`, which says what was
/// folded, where, to what, and where each value came from.
fn define_globals(
    py: Python<'_>,
    globals: &Bound<'_, PyDict>,
    rewritten: &Rewritten,
    version_type: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    let values = PyDict::new(py);
    for g in &rewritten.globals {
        let (value, shown) = match &g.value {
            GlobalValue::Version(v) => {
                let version_type = version_type.ok_or_else(|| {
                    PyRuntimeError::new_err("internal: a version global without its type")
                })?;
                (version_type.call1((v.as_str(),))?, v.as_str().to_owned())
            }
            GlobalValue::Str(s) => (s.into_pyobject(py)?.into_any(), s.clone()),
        };
        globals.set_item(&g.name, value)?;
        let entry = PyDict::new(py);
        entry.set_item("value", shown)?;
        entry.set_item("source", &g.provenance)?;
        values.set_item(&g.name, entry)?;
    }
    let rules = PyList::empty(py);
    for e in &rewritten.edits {
        let entry = PyDict::new(py);
        entry.set_item("rule", &e.rule)?;
        entry.set_item("lines", (e.first_line, e.last_line))?;
        entry.set_item("summary", &e.summary)?;
        rules.append(entry)?;
    }
    let info = PyDict::new(py);
    info.set_item("version", env!("CARGO_PKG_VERSION"))?;
    info.set_item("rules", rules)?;
    info.set_item("values", values)?;
    globals.set_item("__dynafold__", info)
}
