//! Subcommands of the `dynafold` binary; `src/main.rs` parses arguments and calls these.

pub mod report;
