//! FlashInfer's dormant op declarations, woken for Dynamo only. The mechanism is documented
//! in `hooks/dormant_ops.py`; this side decides whether to run it and logs what it did.

use std::sync::OnceLock;

use pyo3::prelude::*;
use pyo3::types::PyModule;

use crate::embedded;

const SOURCE: &str = include_str!("../../../hooks/dormant_ops.py");
const MODULE: &std::ffi::CStr = c"_dynafold_dormant_ops";
/// The hooks `dormant_ops.py` imports, loaded before it: (source, file name, module name).
const PARTS: [(&str, &std::ffi::CStr, &std::ffi::CStr); 3] = [
    (
        include_str!("../../../hooks/attention_plans.py"),
        c"<dynafold>/hooks/attention_plans.py",
        c"_dynafold_attention_plans",
    ),
    (
        include_str!("../../../hooks/fake_check.py"),
        c"<dynafold>/hooks/fake_check.py",
        c"_dynafold_fake_check",
    ),
    (
        include_str!("../../../hooks/op_narrowing.py"),
        c"<dynafold>/hooks/op_narrowing.py",
        c"_dynafold_op_narrowing",
    ),
];

/// `DYNAFOLD_OPS`, read once: a bad value must be reported once.
fn enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(dynafold_core::config::ops)
}

fn helper(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    for (source, file, name) in PARTS {
        embedded::module(py, source, file, name)?;
    }
    embedded::module(py, SOURCE, c"<dynafold>/hooks/dormant_ops.py", MODULE)
}

/// After `flashinfer.utils` executed: record the declarations from now on.
pub fn install(py: Python<'_>, utils: &Bound<'_, PyAny>) -> PyResult<()> {
    let left = "op declarations left dormant";
    let why = "FlashInfer ops other than fp4_quantize will not trace under fullgraph=True";
    if let Some(done) = call_hook(py, "install_utils", utils, left, why)? {
        log::debug!("flashinfer.utils: {done}");
    }
    Ok(())
}

/// After `flashinfer.api_logging` executed: with FLASHINFER_LOGLEVEL >= 1, keep its
/// logging wrappers out of traced code.
pub fn install_api_logging(py: Python<'_>, api_logging: &Bound<'_, PyAny>) -> PyResult<()> {
    let left = "logging wrappers left as shipped";
    let why = "with FLASHINFER_LOGLEVEL set, FlashInfer ops will not trace under fullgraph=True";
    if let Some(done) = call_hook(py, "install_api_logging", api_logging, left, why)? {
        log::info!("flashinfer.api_logging: {done}");
    }
    Ok(())
}

/// After a module defining FlashInfer's attention wrappers executed: their plans are kept in
/// a form Dynamo can pass to the woken run operators.
pub fn install_planners(py: Python<'_>, module: &Bound<'_, PyAny>) -> PyResult<()> {
    let left = "attention wrappers left as shipped";
    let why = "their run() will not trace under fullgraph=True";
    if let Some(done) = call_hook(py, "install_planners", module, left, why)? {
        log::debug!("{done}");
    }
    Ok(())
}

/// Calls `hooks/dormant_ops.py`'s `method(module)`: its line for the log (None when it has
/// nothing to say, or when dynafold is told to leave the ops alone). A FlashInfer that does
/// not look as expected (`Unsupported`) gets one warning naming what was `left` and `why` it
/// matters.
fn call_hook(
    py: Python<'_>,
    method: &str,
    module: &Bound<'_, PyAny>,
    left: &str,
    why: &str,
) -> PyResult<Option<String>> {
    if !enabled() {
        return Ok(None);
    }
    let helper = helper(py)?;
    match helper.call_method1(method, (module,)) {
        Ok(done) if done.is_none() => Ok(None),
        Ok(done) => Ok(Some(done.to_string())),
        Err(e) if e.is_instance(py, &helper.getattr("Unsupported")?) => {
            let name = module
                .getattr("__name__")
                .map(|n| n.to_string())
                .unwrap_or_default();
            log::warn!("{name}: {left} ({}); {why}", e.value(py));
            Ok(None)
        }
        Err(e) => Err(e),
    }
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
