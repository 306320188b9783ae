//! The graph-break reporter's Python side: runs `hooks/observer/dynamo_observer.py` as module
//! `_dynafold_observer` and gives it a sink that feeds the core's per-process `Recorder`.
//!
//! Called by the finder once `torch._dynamo` has finished importing:
//! `reporter::install_observer(py)`. Everything here swallows its errors into one log line:
//! the host is a production server and a report must never cost it a request.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use dynafold_core::report::{table, Record, Recorder};
use pyo3::prelude::*;

const OBSERVER_SRC: &str = include_str!("../../../hooks/observer/dynamo_observer.py");
/// Rows in the exit summary; `dynafold report` shows all of them.
const SUMMARY_SITES: usize = 10;

static RECORDER: OnceLock<Recorder> = OnceLock::new();
static ATEXIT_REGISTERED: AtomicBool = AtomicBool::new(false);
static BAD_RECORD_WARNED: AtomicBool = AtomicBool::new(false);

/// The process's recorder; the report directory is read from `DYNAFOLD_REPORT_DIR` once.
pub fn recorder() -> &'static Recorder {
    RECORDER.get_or_init(Recorder::from_env)
}

/// The callable handed to the observer's `install(sink)`: `sink(record: dict) -> None`.
/// It never raises: a record it cannot read is dropped with one warning per process.
#[pyclass(name = "DynafoldSink", module = "_dynafold_observer", frozen)]
pub struct Sink;

#[pymethods]
impl Sink {
    fn __call__(&self, py: Python<'_>, record: &Bound<'_, PyAny>) {
        match to_record(py, record) {
            Ok(rec) => {
                recorder().record(rec);
            }
            Err(why) => {
                if !BAD_RECORD_WARNED.swap(true, Ordering::Relaxed) {
                    log::warn!("dynafold: dropped a graph-break record: {why}");
                }
            }
        }
    }
}

/// The observer builds records from JSON types only, so `json.dumps` + serde is the whole
/// conversion, and a field the Rust side does not know yet is ignored rather than fatal.
fn to_record(py: Python<'_>, record: &Bound<'_, PyAny>) -> Result<Record, String> {
    let text: String = py
        .import("json")
        .and_then(|json| json.call_method1("dumps", (record,)))
        .and_then(|s| s.extract::<String>())
        .map_err(|e| e.to_string())?;
    serde_json::from_str(&text).map_err(|e| e.to_string())
}

/// Compiles and runs the observer as `_dynafold_observer` and calls `install(sink)`; also
/// registers the exit summary once. Errors come back as `PyErr` for the caller to log; no
/// Python exception is left set.
pub fn install_observer(py: Python<'_>) -> PyResult<()> {
    let module = crate::embedded::module(
        py,
        OBSERVER_SRC,
        c"<dynafold>/hooks/observer/dynamo_observer.py",
        c"_dynafold_observer",
    )?;
    let sink = Bound::new(py, Sink)?;
    let live: bool = module.call_method1("install", (sink,))?.is_truthy()?;
    if live {
        recorder().watch();
    } else {
        log::info!("dynafold: no Dynamo hook available; graph breaks are not reported");
    }
    if !ATEXIT_REGISTERED.swap(true, Ordering::AcqRel) {
        let cb = wrap_pyfunction!(dynafold_exit_summary, py)?;
        if let Err(e) = py
            .import("atexit")
            .and_then(|m| m.call_method1("register", (cb,)))
        {
            ATEXIT_REGISTERED.store(false, Ordering::Release);
            return Err(e);
        }
    }
    Ok(())
}

/// The short table for process exit, when at least one break was seen.
pub fn summary() -> Option<String> {
    let rec = RECORDER.get()?;
    if rec.total() == 0 {
        return None;
    }
    let mut sites = rec.sites();
    dynafold_core::report::merge::sort_sites(&mut sites);
    let mut text = table::render_summary(&sites, SUMMARY_SITES);
    if let Some(path) = rec.path() {
        let dir = path
            .parent()
            .map(|d| d.display().to_string())
            .unwrap_or_default();
        text.push_str(&format!(
            "  written to {}; merge a run with: dynafold report {dir}\n",
            path.display()
        ));
    }
    Some(text)
}

#[pyfunction]
fn dynafold_exit_summary() {
    if !log::log_enabled!(log::Level::Info) {
        return;
    }
    if let Some(text) = summary() {
        log::info!("{}", text.trim_end());
    }
}
