//! After a FlashInfer fp4 module executes: make the built JIT module reachable under
//! torch.compile without the JIT machinery, and the kernel an opaque operator. The mechanism
//! is documented in `hooks/fp4_opaque.py`.

use pyo3::prelude::*;

use crate::embedded;

const SOURCE: &str = include_str!("../../../hooks/fp4_opaque.py");

/// `DYNAFOLD_FP4_OPAQUE`, read once: a bad value must be reported once.
pub fn enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(dynafold_core::config::fp4_opaque)
}

/// The special path instead of FlashInfer's own declaration (measurement only, issue 12 item 5).
pub fn special() -> bool {
    std::env::var_os("DYNAFOLD_FP4_SPECIAL").is_some_and(|v| v == "1")
}

/// Whether `name` is one of the modules whose namespace may define the fp4 kernel getter.
pub fn is_target(name: &str) -> bool {
    matches!(
        name,
        "flashinfer.fp4_quantization" | "flashinfer.quantization.fp4_quantization"
    )
}

/// Installs into `module` when it defines `get_fp4_quantization_module`; logs what it did or
/// why not. Errors come back for the caller's guard to log.
pub fn install(py: Python<'_>, name: &str, module: &Bound<'_, PyAny>) -> PyResult<()> {
    if !enabled() || !special() {
        return Ok(());
    }
    let started = std::time::Instant::now();
    let helper = embedded::module(
        py,
        SOURCE,
        c"<dynafold>/hooks/fp4_opaque.py",
        c"_dynafold_fp4_opaque",
    )?;
    match helper.call_method1("install", (module,)) {
        Ok(done) if done.is_none() => {}
        Ok(done) => log::info!(
            "{name}: {done} ({:.2} ms)",
            started.elapsed().as_secs_f64() * 1e3
        ),
        Err(e) => {
            let unsupported = helper.getattr("Unsupported")?;
            if e.is_instance(py, &unsupported) {
                log::warn!(
                    "{name}: fp4 kernel left as it is ({}); fp4_quantize will not trace under fullgraph=True",
                    e.value(py)
                );
            } else {
                return Err(e);
            }
        }
    }
    Ok(())
}
