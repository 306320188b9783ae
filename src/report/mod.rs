//! Graph-break records: the model, the per-process JSON-lines sink, the merge across
//! processes and the table people read.
