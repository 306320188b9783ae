//! Unified diffs for `dynafold rewrite --diff` and logs.

use similar::TextDiff;

/// A unified diff (3 lines of context) with `a/` and `b/` headers naming `module_path`;
/// empty when the texts are equal.
pub fn unified_diff(module_path: &str, before: &str, after: &str) -> String {
    if before == after {
        return String::new();
    }
    TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{module_path}"), &format!("b/{module_path}"))
        .to_string()
}
