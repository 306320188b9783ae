//! The native half of `hooks/glue/loaders.py`'s `RewritingLoader`: reads a target module, folds it
//! on a thread of its own (the fold may wait for `nvcc --version`, which must not hold the
//! GIL), and hands back the code compiled under the module's own file name with the globals
//! it refers to. The Python half waits, executes, and falls back to the ordinary loader.
//!
//! No module body runs beneath a frame of this file: see `hooks/glue/loaders.py` for why.
//!
//! The rewritten code is never written to the normal `__pycache__` nor anywhere in the module's
//! package: the ordinary loader's cache only ever sees the original source; the rewritten code
//! goes to dynafold's own cache folder (`cache.rs`).

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex, PoisonError};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyModule, PyTuple};

use dynafold_core::cuda::CudaVersion;
use dynafold_core::rewrite::{self, FoldContext, GlobalValue, Rewritten, Skip};

use crate::context::ProcessContext;
use crate::overhead::{Part, Timer};
use crate::{cache, guard};

/// Enough for the parser to run on the fold thread itself (it wants 4 MiB; see syntax.rs).
const FOLD_STACK_BYTES: usize = 16 << 20;

/// The functions `RewritingLoader` calls, into its `_native` table.
pub fn add_natives(native: &Bound<'_, PyModule>) -> PyResult<()> {
    native.add_function(wrap_pyfunction!(read, native)?)?;
    native.add_function(wrap_pyfunction!(reads_torch_cuda_home, native)?)?;
    native.add_function(wrap_pyfunction!(begin, native)?)?;
    native.add_function(wrap_pyfunction!(finish, native)?)?;
    native.add_function(wrap_pyfunction!(after_exec, native)?)
}

/// A fold in progress. Its thread closes the write end of the pipe when the result is in,
/// so the Python side waits on `fd` with the GIL released.
#[pyclass(module = "dynafold", frozen)]
pub struct Job {
    read_end: OwnedFd,
    result: Arc<Mutex<Option<Result<Rewritten, Skip>>>>,
    name: String,
    origin: String,
    data: Py<PyAny>,
    source: Arc<str>,
    /// Set by `finish`, read by `after_exec` once the module body has run.
    folded: Mutex<Option<(Option<CudaVersion>, String)>>,
}

#[pymethods]
impl Job {
    #[getter]
    fn fd(&self) -> i32 {
        self.read_end.as_raw_fd()
    }
}

/// The module's source bytes, or None (logged) when they cannot be read: the ordinary loader
/// then meets the same error and raises it as it would have.
#[pyfunction]
fn read(
    py: Python<'_>,
    name: &str,
    inner: &Bound<'_, PyAny>,
    module: &Bound<'_, PyAny>,
) -> PyResult<Option<Py<PyAny>>> {
    let _timer = Timer::start(Part::Loader);
    guard::propagating(py, &format!("rewriting {name}"), || {
        if dynafold_core::config::test_fault("exec_module") {
            return Err(PyRuntimeError::new_err(
                "fault injected by DYNAFOLD_TEST_FAULT",
            ));
        }
        let origin = module.getattr("__spec__")?.getattr("origin")?;
        Ok(inner.call_method1("get_data", (origin,))?.unbind())
    })
}

/// FlashInfer 0.2/0.3 import torch's `cpp_extension.CUDA_HOME`; only then must the resolver ask
/// torch for it (the Python side does, since that is an import). Later releases import other
/// names from `cpp_extension` inside functions and read `CUDA_HOME` from the environment:
/// asking torch there would import `cpp_extension` (and setuptools, seconds of start-up on a
/// small machine) where FlashInfer itself never does at import.
#[pyfunction]
fn reads_torch_cuda_home(data: &Bound<'_, PyAny>) -> bool {
    data.cast::<PyBytes>()
        .is_ok_and(|bytes| imports_torch_cuda_home(bytes.as_bytes()))
}

/// Whether a `from torch.utils.cpp_extension import ...` statement names `CUDA_HOME`.
fn imports_torch_cuda_home(source: &[u8]) -> bool {
    const IMPORT: &[u8] = b"from torch.utils.cpp_extension import";
    let mut rest = source;
    while let Some(at) = rest.windows(IMPORT.len()).position(|w| w == IMPORT) {
        let after = &rest[at + IMPORT.len()..];
        let names = after.trim_ascii_start();
        // A parenthesised list runs to its `)`, a plain one to the end of the line.
        let end = if names.first() == Some(&b'(') {
            names.iter().position(|&c| c == b')')
        } else {
            names.iter().position(|&c| c == b'\n')
        }
        .unwrap_or(names.len());
        let statement = &names[..end];
        let is_word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
        let named = statement
            .split(|&c| !is_word(c))
            .any(|word| word == b"CUDA_HOME");
        if named {
            return true;
        }
        rest = after;
    }
    false
}

/// Starts folding `data`; None (logged) when it cannot start.
#[pyfunction]
fn begin(
    py: Python<'_>,
    name: &str,
    module: &Bound<'_, PyAny>,
    data: &Bound<'_, PyAny>,
    torch_home: Option<(Option<String>,)>,
) -> PyResult<Option<Job>> {
    let _timer = Timer::start(Part::Loader);
    guard::propagating(py, &format!("rewriting {name}"), || {
        let origin: String = module.getattr("__spec__")?.getattr("origin")?.extract()?;
        let source: String = py
            .import("importlib.util")?
            .call_method1("decode_source", (data,))?
            .extract()?;
        let source: Arc<str> = source.into();
        let ctx = ProcessContext::get(py, torch_home.map(|(home,)| home));
        let (read_end, write_end) = pipe()?;
        let result = Arc::new(Mutex::new(None));
        let work = {
            let (name, source, result) =
                (name.to_owned(), Arc::clone(&source), Arc::clone(&result));
            move || {
                let _timer = Timer::start(Part::Loader);
                let folded = std::panic::catch_unwind(|| rewrite::rewrite(&name, &source, &ctx))
                    .unwrap_or_else(|_| {
                        Err(Skip::unrecognised("internal panic in the rewriter".into()))
                    });
                *result.lock().unwrap_or_else(PoisonError::into_inner) = Some(folded);
                drop(write_end);
            }
        };
        let spawned = std::thread::Builder::new()
            .name("dynafold-fold".into())
            .stack_size(FOLD_STACK_BYTES)
            .spawn(work);
        if let Err(e) = spawned {
            return Err(PyRuntimeError::new_err(format!(
                "cannot start the fold thread: {e}"
            )));
        }
        Ok(Job {
            read_end,
            result,
            name: name.to_owned(),
            origin,
            data: data.clone().unbind(),
            source,
            folded: Mutex::new(None),
        })
    })
}

/// The code and the globals to define, or None (logged) when the module loads unchanged.
#[pyfunction]
fn finish<'py>(py: Python<'py>, job: &Bound<'py, Job>) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let job = job.get();
    let _timer = Timer::start(Part::Loader);
    guard::propagating(py, &format!("rewriting {}", job.name), || {
        let done = job
            .result
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(done) = done else {
            return Err(PyRuntimeError::new_err(
                "internal: the fold thread left no result",
            ));
        };
        let rewritten = match done {
            Ok(r) => r,
            Err(skip) => {
                let quiet = skip.is_nothing_to_fold();
                let Skip(reason, _) = skip;
                // fp4 call sites fold only to cpp_ext's folded version: when there is none,
                // cpp_ext's own warning already said why, once for the process.
                let ctx = ProcessContext::get(py, None);
                if quiet
                    || job.name != "flashinfer.jit.cpp_ext" && ctx.folded_cuda_version().is_none()
                {
                    log::info!("{}: loaded unchanged: {reason}", job.name);
                } else {
                    log::warn!("{}: loaded unchanged: {reason}", job.name);
                }
                return Ok(None);
            }
        };
        let started = std::time::Instant::now();
        let data = job.data.bind(py);
        let entry = data.cast::<PyBytes>().ok().and_then(|bytes| {
            cache::Entry::new(py, &job.name, &job.origin, bytes, &rewritten.source)
        });
        let (code, from_cache) = cache::code(py, entry.as_ref(), &rewritten.source, &job.origin)?;
        // Operators asking where start-up time goes get dynafold's own share per module.
        log::debug!(
            "{}: code {:.2} ms ({}) for {} bytes of source",
            job.name,
            started.elapsed().as_secs_f64() * 1e3,
            if from_cache {
                "dynafold cache"
            } else {
                "compile()"
            },
            job.source.len(),
        );
        let values = globals_for(py, &rewritten)?;
        let summary = rewritten
            .edits
            .iter()
            .map(|e| format!("{} (line {})", e.rule, e.first_line))
            .collect::<Vec<_>>()
            .join(", ");
        *job.folded.lock().unwrap_or_else(PoisonError::into_inner) = Some((
            rewritten.cuda_version.clone(),
            format!("folded {} site(s): {summary}", rewritten.edits.len()),
        ));
        Ok(Some(PyTuple::new(py, [code, values.into_any()])?))
    })
    .map(Option::flatten)
}

/// After the module body ran: records what was folded. `job` is None when the ordinary loader
/// ran the module.
#[pyfunction]
#[pyo3(signature = (name, job=None))]
fn after_exec(py: Python<'_>, name: &str, job: Option<&Bound<'_, Job>>) -> PyResult<()> {
    if let Some(job) = job {
        let folded = job
            .get()
            .folded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some((version, summary)) = folded {
            if let Some(v) = version {
                ProcessContext::get(py, None).set_folded_version(v);
            }
            log::info!("{name}: {summary}");
        }
    }
    Ok(())
}

/// A close-on-exec pipe: (read end, write end).
fn pipe() -> PyResult<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills both slots on success; each fd is then owned exactly once.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(PyRuntimeError::new_err(format!(
            "pipe2: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: both fds were just created and are owned by nothing else.
    let (r, w) = unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) };
    Ok((r.into(), w.into()))
}

/// The globals the rewritten text refers to, and `__dynafold__`, which says what was folded,
/// where, to what, and where each value came from.
fn globals_for<'py>(py: Python<'py>, rewritten: &Rewritten) -> PyResult<Bound<'py, PyDict>> {
    // FlashInfer's module imports packaging.version itself a few lines in: importing it here
    // first moves that cost, it does not add to it.
    let version_type = if rewritten
        .globals
        .iter()
        .any(|g| matches!(g.value, GlobalValue::Version(_)))
    {
        Some(py.import("packaging.version")?.getattr("Version")?)
    } else {
        None
    };
    let globals = PyDict::new(py);
    let values = PyDict::new(py);
    for g in &rewritten.globals {
        let (value, shown) = match &g.value {
            GlobalValue::Version(v) => {
                let version_type = version_type.as_ref().ok_or_else(|| {
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
    globals.set_item("__dynafold__", info)?;
    Ok(globals)
}

#[cfg(test)]
mod tests {
    use super::imports_torch_cuda_home;

    #[test]
    fn only_an_import_naming_cuda_home_counts() {
        // FlashInfer 0.3.1's cpp_ext.py: a module-level import of CUDA_HOME.
        let v031 = b"import torch\nfrom torch.utils.cpp_extension import (\n    _TORCH_PATH,\n    CUDA_HOME,\n    _get_num_workers,\n)\n";
        assert!(imports_torch_cuda_home(v031));
        assert!(imports_torch_cuda_home(
            b"from torch.utils.cpp_extension import CUDA_HOME\n"
        ));
        // 0.6/0.7: other names, inside a function, and CUDA_HOME from the environment.
        let v074 = b"    cuda_home = os.environ.get(\"CUDA_HOME\")\n\ndef f():\n    from torch.utils.cpp_extension import check_compiler_is_gcc, get_cxx_compiler\n";
        assert!(!imports_torch_cuda_home(v074));
        assert!(!imports_torch_cuda_home(
            b"from torch.utils.cpp_extension import CUDA_HOME_X\n"
        ));
        assert!(!imports_torch_cuda_home(b""));
    }
}
