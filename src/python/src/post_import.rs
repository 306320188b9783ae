//! Work to start right after a module finishes importing: the graph-break observer once
//! `torch._dynamo` is loaded, the recording of FlashInfer's op declarations once
//! `flashinfer.utils` is, of its API-logging wrappers once `flashinfer.api_logging` is, and of
//! its attention wrappers' plans once a module defining them is. The loader is
//! `hooks/glue/loaders.py`'s `ObservingLoader` (put in by `spec_loaders.rs`), so that the module's
//! own body runs beneath no Rust frame.

use pyo3::prelude::*;

use crate::overhead::{Part, Timer};

const DYNAMO: &str = "torch._dynamo";
const FLASHINFER_UTILS: &str = "flashinfer.utils";
const FLASHINFER_API_LOGGING: &str = "flashinfer.api_logging";

/// The modules that define FlashInfer's attention wrappers (classes whose `plan()` stores
/// `_plan_info` for `run()`), across 0.5-0.7, and those defining the wrappers whose methods
/// are dynafold's boundaries.
const FLASHINFER_PLANNERS: &[&str] = &[
    "flashinfer.decode",
    "flashinfer.prefill",
    "flashinfer.sparse",
    "flashinfer.pod",
    "flashinfer.attention",
    "flashinfer.attention._core",
    "flashinfer.mla",
    "flashinfer.mla._core",
    "flashinfer.mla._batch_mla._wrapper",
    // Wrapper classes whose methods are dynafold's boundaries (the op records in
    // hooks/ops/registry/ declaring a `Class.method`, hooks/ops/mechanisms/method_boundaries.py).
    "flashinfer.fused_moe.cute_dsl.fused_moe",
    "flashinfer.fused_moe.cute_dsl.b12x_moe",
    "flashinfer.gemm.cake_grouped_fp8_gemm",
    "flashinfer.gemm.cake_grouped_fp8_fused_silu_quant",
    "flashinfer.kda",
];

pub fn is_target(name: &str) -> bool {
    matches!(name, DYNAMO | FLASHINFER_UTILS | FLASHINFER_API_LOGGING)
        || (name.starts_with("flashinfer.") && FLASHINFER_PLANNERS.contains(&name))
}

/// Called by `ObservingLoader` once `name` has executed.
#[pyfunction]
pub fn after_import(py: Python<'_>, name: &str, module: &Bound<'_, PyAny>) -> PyResult<()> {
    match name {
        DYNAMO => {
            step(
                py,
                Part::Observer,
                "starting the graph-break observer",
                || crate::reporter::install_observer(py),
            )?;
            step(py, Part::Observer, "starting survey mode", || {
                crate::survey::install(py)
            })?;
            step(py, Part::Ops, "arming FlashInfer's op declarations", || {
                crate::dormant_ops::arm(py)
            })
        }
        FLASHINFER_UTILS => step(
            py,
            Part::Ops,
            "recording FlashInfer's op declarations",
            || crate::dormant_ops::install(py, &crate::dormant_ops::UTILS, module),
        ),
        FLASHINFER_API_LOGGING => step(py, Part::Ops, "FlashInfer's API logging", || {
            crate::dormant_ops::install(py, &crate::dormant_ops::API_LOGGING, module)
        }),
        _ if FLASHINFER_PLANNERS.contains(&name) => {
            step(py, Part::Ops, "FlashInfer's attention wrappers", || {
                crate::dormant_ops::install(py, &crate::dormant_ops::PLANNERS, module)
            })
        }
        _ => Ok(()),
    }
}

/// One piece of post-import work, timed as `part` (each step ends its own timer, so no part
/// counts another's time) and guarded as `what`.
fn step(py: Python<'_>, part: Part, what: &str, f: impl FnOnce() -> PyResult<()>) -> PyResult<()> {
    let _timer = Timer::start(part);
    crate::guard::propagating(py, what, f)?;
    Ok(())
}
