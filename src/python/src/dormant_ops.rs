//! FlashInfer's dormant op declarations, woken for Dynamo only. The mechanism is documented
//! in `hooks/dormant_ops.py`; this side decides whether to run it and logs what it did.

use std::sync::OnceLock;

use pyo3::prelude::*;
use pyo3::types::PyModule;

use crate::embedded;

const SOURCE: &str = include_str!("../../../hooks/dormant_ops.py");
const MODULE: &std::ffi::CStr = c"_dynafold_dormant_ops";

/// `DYNAFOLD_OPS`, read once: a bad value must be reported once.
fn enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(dynafold_core::config::ops)
}

fn helper(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    embedded::module(py, SOURCE, c"<dynafold>/hooks/dormant_ops.py", MODULE)
}

/// After `flashinfer.utils` executed: record the declarations from now on.
pub fn install(py: Python<'_>, utils: &Bound<'_, PyAny>) -> PyResult<()> {
    if !enabled() {
        return Ok(());
    }
    let helper = helper(py)?;
    match helper.call_method1("install_utils", (utils,)) {
        Ok(done) => log::debug!("flashinfer.utils: {done}"),
        Err(e) if e.is_instance(py, &helper.getattr("Unsupported")?) => log::warn!(
            "flashinfer.utils: op declarations left dormant ({}); FlashInfer ops other than \
             fp4_quantize will not trace under fullgraph=True",
            e.value(py)
        ),
        Err(e) => return Err(e),
    }
    Ok(())
}

/// After `flashinfer.api_logging` executed: with FLASHINFER_LOGLEVEL >= 1, keep its
/// logging wrappers out of traced code.
pub fn install_api_logging(py: Python<'_>, api_logging: &Bound<'_, PyAny>) -> PyResult<()> {
    if !enabled() {
        return Ok(());
    }
    let helper = helper(py)?;
    match helper.call_method1("install_api_logging", (api_logging,)) {
        Ok(done) if done.is_none() => {}
        Ok(done) => log::info!("flashinfer.api_logging: {done}"),
        Err(e) if e.is_instance(py, &helper.getattr("Unsupported")?) => log::warn!(
            "flashinfer.api_logging: logging wrappers left as shipped ({}); with \
             FLASHINFER_LOGLEVEL set, FlashInfer ops will not trace under fullgraph=True",
            e.value(py)
        ),
        Err(e) => return Err(e),
    }
    Ok(())
}

/// After `torch._dynamo` executed: register the compile-start callback if FlashInfer's
/// declarations are being recorded.
pub fn arm(py: Python<'_>) -> PyResult<()> {
    if !enabled() {
        return Ok(());
    }
    let modules = py.import("sys")?.getattr("modules")?;
    if let Ok(helper) = modules.get_item(MODULE.to_string_lossy().as_ref()) {
        helper.call_method0("arm")?;
    }
    Ok(())
}
