//! FlashInfer's dormant op declarations, woken for Dynamo only. The mechanism is documented
//! in `hooks/dormant_ops.py`; this side decides whether to run it and logs what it did.

use std::sync::OnceLock;

use pyo3::prelude::*;
use pyo3::types::PyModule;

use crate::embedded;

const SOURCE: &str = include_str!("../../../hooks/dormant_ops.py");
const MODULE: &std::ffi::CStr = c"_dynafold_dormant_ops";
/// The hooks `dormant_ops.py` imports, loaded before it: (source, file name, module name).
const PARTS: [(&str, &std::ffi::CStr, &std::ffi::CStr); 8] = [
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
        include_str!("../../../hooks/method_boundaries.py"),
        c"<dynafold>/hooks/method_boundaries.py",
        c"_dynafold_method_boundaries",
    ),
    (
        include_str!("../../../hooks/op_corrections.py"),
        c"<dynafold>/hooks/op_corrections.py",
        c"_dynafold_op_corrections",
    ),
    (
        include_str!("../../../hooks/op_fakes.py"),
        c"<dynafold>/hooks/op_fakes.py",
        c"_dynafold_op_fakes",
    ),
    (
        include_str!("../../../hooks/op_narrowing.py"),
        c"<dynafold>/hooks/op_narrowing.py",
        c"_dynafold_op_narrowing",
    ),
    (
        include_str!("../../../hooks/partial_methods.py"),
        c"<dynafold>/hooks/partial_methods.py",
        c"_dynafold_partial_methods",
    ),
    (
        include_str!("../../../hooks/stream_scratch.py"),
        c"<dynafold>/hooks/stream_scratch.py",
        c"_dynafold_stream_scratch",
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
    let helper = embedded::module(py, SOURCE, c"<dynafold>/hooks/dormant_ops.py", MODULE)?;
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

/// A post-import call into `hooks/dormant_ops.py`: its method, what stays as FlashInfer ships
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
    if let Ok(helper) = modules.get_item(MODULE.to_string_lossy().as_ref()) {
        helper.call_method0("arm")?;
    }
    Ok(())
}
