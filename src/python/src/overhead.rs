//! dynafold's own time in this process, by part. Start-up overhead is the figure operators ask
//! about and the one a whole-process timing cannot resolve (a torch import varies by hundreds
//! of milliseconds between runs), so the parts that can cost more than a microsecond account
//! for themselves. Read through `sys.meta_path[0].overhead()`; `scripts/bench` reports it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

#[derive(Clone, Copy)]
pub enum Part {
    /// Loading the finder into the interpreter (the audit hook's first `import` event).
    Install,
    /// A target module: reading its source, folding, and getting its code (cache or
    /// `compile()`); the module's own execution is not ours and is left out.
    Loader,
    /// The graph-break observer started after `torch._dynamo` is imported.
    Observer,
    /// Recording FlashInfer's op declarations (after `flashinfer.utils`) and arming their
    /// waking (after `torch._dynamo`); the waking itself happens inside compiles.
    Ops,
}

const NAMES: [&str; 4] = ["install_ms", "loader_ms", "observer_ms", "ops_ms"];
static NANOS: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];
static FIND_SPEC_CALLS: AtomicU64 = AtomicU64::new(0);

/// Adds the time from `start` to drop (early returns and errors included) to its part.
pub struct Timer(Part, Instant);

impl Timer {
    pub fn start(part: Part) -> Timer {
        Timer(part, Instant::now())
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        let nanos = u64::try_from(self.1.elapsed().as_nanos()).unwrap_or(u64::MAX);
        NANOS[self.0 as usize].fetch_add(nanos, Ordering::Relaxed);
    }
}

/// Counted, not timed: the finder answers most imports in well under a microsecond, less
/// than reading a clock twice would cost.
pub fn count_find_spec() {
    FIND_SPEC_CALLS.fetch_add(1, Ordering::Relaxed);
}

/// `(name, value)` pairs: milliseconds per part, their total, and the finder's call count.
pub fn snapshot() -> Vec<(&'static str, f64)> {
    let mut out: Vec<(&'static str, f64)> = NAMES
        .iter()
        .zip(&NANOS)
        .map(|(name, n)| (*name, n.load(Ordering::Relaxed) as f64 / 1e6))
        .collect();
    let total = out.iter().map(|(_, v)| v).sum();
    out.push(("total_ms", total));
    out.push((
        "find_spec_calls",
        FIND_SPEC_CALLS.load(Ordering::Relaxed) as f64,
    ));
    out
}
