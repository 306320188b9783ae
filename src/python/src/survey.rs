//! Survey mode (`DYNAFOLD_SURVEY`): runs `hooks/survey/fullgraph_survey.py` as module
//! `_dynafold_survey` once `torch._dynamo` is imported, so that a compile asking for
//! fullgraph=True carries on past its graph breaks and the observer records every one of them.
//! Off by default; off, nothing of it runs.

use std::sync::OnceLock;

use pyo3::prelude::*;

const SURVEY_SRC: &str = include_str!("../../../hooks/survey/fullgraph_survey.py");

/// `DYNAFOLD_SURVEY`, read once: a bad value must be reported once.
fn enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(dynafold_core::config::survey)
}

/// Starts survey mode when it is asked for. A torch whose compile entry does not look as
/// expected gets one warning: its fullgraph compiles then stop at their first break, as
/// without dynafold.
pub fn install(py: Python<'_>) -> PyResult<()> {
    if !enabled() {
        return Ok(());
    }
    let module = crate::embedded::module(
        py,
        SURVEY_SRC,
        c"<dynafold>/hooks/survey/fullgraph_survey.py",
        c"_dynafold_survey",
    )?;
    let warn = wrap_pyfunction!(survey_warning, py)?;
    let why = module.call_method1("install", (warn,))?;
    if !why.is_none() {
        log::warn!("survey mode (DYNAFOLD_SURVEY) is off in this process: {why}; a fullgraph=True compile stops at its first graph break");
    }
    Ok(())
}

/// The survey's one line per process, through dynafold's log like every other warning.
#[pyfunction]
fn survey_warning(line: &str) {
    log::warn!("{line}");
}
