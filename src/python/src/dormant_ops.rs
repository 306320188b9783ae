//! FlashInfer's dormant op declarations, woken for Dynamo only. The mechanism is documented
//! in `hooks/ops/engine/wake.py`; this side decides whether to run it and logs what it did.

use std::sync::OnceLock;

use pyo3::prelude::*;
use pyo3::types::PyModule;

use crate::engine_package;

/// The engine's entry module (hooks/ops/engine/wake.py); it imports the rest itself.
const MODULE: &str = "_dynafold_ops.engine.wake";

/// `DYNAFOLD_OPS`, read once: a bad value must be reported once.
fn enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(dynafold_core::config::ops)
}

fn helper(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    let helper = engine_package::import(py, MODULE)?;
    if let Some(why) = fp4_left_alone() {
        helper
            .getattr("LEFT_ALONE")?
            .set_item("flashinfer::fp4_quantize_sm100", why)?;
    }
    Ok(helper)
}

/// Why fp4_quantize's kernel declaration stays as FlashInfer ships it, if it does:
/// `DYNAFOLD_FP4_OPAQUE`, read once (a bad value must be reported once).
fn fp4_left_alone() -> Option<&'static str> {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    (!*ENABLED.get_or_init(dynafold_core::config::fp4_opaque)).then_some("DYNAFOLD_FP4_OPAQUE=0")
}

/// A post-import call into `hooks/ops/engine/wake.py`: its method, what stays as FlashInfer ships
/// it when FlashInfer does not look as expected, why that matters, and the level of the line
/// saying what it did.
pub struct Hook {
    method: &'static str,
    left: &'static str,
    why: &'static str,
    level: log::Level,
}

/// After `flashinfer.utils` executed: record the declarations from now on.
pub const UTILS: Hook = Hook {
    method: "install_utils",
    left: "op declarations left dormant",
    why: "FlashInfer ops, fp4_quantize's kernel included, will not trace under fullgraph=True",
    level: log::Level::Debug,
};

/// After `flashinfer.api_logging` executed: with FLASHINFER_LOGLEVEL >= 1, keep its logging
/// wrappers out of traced code.
pub const API_LOGGING: Hook = Hook {
    method: "install_api_logging",
    left: "logging wrappers left as shipped",
    why: "with FLASHINFER_LOGLEVEL set, FlashInfer ops will not trace under fullgraph=True",
    level: log::Level::Info,
};

/// After a module defining FlashInfer's attention wrappers executed: their plans are kept in
/// a form Dynamo can pass to the woken run operators; after one defining a wrapper whose
/// method is a dynafold boundary, that method goes through its operator under compile.
pub const PLANNERS: Hook = Hook {
    method: "install_planners",
    left: "attention wrappers left as shipped",
    why: "their run() will not trace under fullgraph=True",
    level: log::Level::Debug,
};

/// Runs `hook` on `module`, which has just executed, and logs what it did.
pub fn install(py: Python<'_>, hook: &Hook, module: &Bound<'_, PyAny>) -> PyResult<()> {
    if let Some(done) = call_hook(py, hook.method, module, hook.left, hook.why)? {
        log::log!(hook.level, "{}: {done}", module_name(module));
    }
    Ok(())
}

fn module_name(module: &Bound<'_, PyAny>) -> String {
    module
        .getattr("__name__")
        .map(|n| n.to_string())
        .unwrap_or_default()
}

/// Calls `hooks/ops/engine/wake.py`'s `method(module)`: its line for the log (None when it has
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
            log::warn!("{}: {left} ({}); {why}", module_name(module), e.value(py));
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
    if let Ok(helper) = modules.get_item(MODULE) {
        helper.call_method0("arm")?;
    }
    Ok(())
}
