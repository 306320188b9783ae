//! Graph-break records: the model, the per-process JSON-lines sink, the merge across
//! processes and the table people read.

pub mod append;
pub mod covered;
pub mod merge;
pub mod record;
pub mod runs;
pub mod sink;
pub mod table;

pub use covered::is_covered;
pub use merge::{merge_dir, merge_newest_run, Merged, Site};
pub use record::{Frame, Gap, GapLine, Line, Process, ProcessLine, Record, SiteKey};
pub use sink::Recorder;
