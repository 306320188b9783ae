//! Log lines on stderr that say who speaks: `dynafold[pid] LEVEL: message`.

use std::io::Write;

pub fn init() {
    let filter = dynafold_core::config::log_filter();
    let _ = env_logger::Builder::new()
        .parse_filters(&filter)
        .format(|buf, record| {
            // The pid is read per line: forked workers must not print their parent's.
            writeln!(
                buf,
                "dynafold[{}] {}: {}",
                std::process::id(),
                record.level(),
                record.args()
            )
        })
        .target(env_logger::Target::Stderr)
        .try_init();
}
