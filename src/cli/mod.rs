//! The subcommands of the `dynafold` binary, as library code so they can be tested.

pub mod api_table;
pub mod bench_rewrite;
pub mod doctor;
pub mod live_table;
pub mod progress;
pub mod report;
pub mod report_dir;
pub mod rewrite;
pub mod run;
pub mod setting;
pub mod signals;
