//! CPython's `posixpath` string functions, for paths as FlashInfer and `subprocess` build
//! them: pure text, no filesystem, and exactly CPython's edge cases (`//`, trailing slashes,
//! the empty path).

/// `posixpath.dirname`.
pub(crate) fn dirname(p: &str) -> String {
    let i = p.rfind('/').map_or(0, |i| i + 1);
    let head = p.get(..i).unwrap_or_default();
    if !head.is_empty() && !head.bytes().all(|b| b == b'/') {
        head.trim_end_matches('/').to_owned()
    } else {
        head.to_owned()
    }
}

/// `posixpath.join(a, b)`.
pub(crate) fn join(a: &str, b: &str) -> String {
    if b.starts_with('/') {
        b.to_owned()
    } else if a.is_empty() || a.ends_with('/') {
        format!("{a}{b}")
    } else {
        format!("{a}/{b}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirname_as_cpython() {
        assert_eq!(dirname("/usr/local/cuda/bin/nvcc"), "/usr/local/cuda/bin");
        assert_eq!(dirname("/usr/local/cuda/bin"), "/usr/local/cuda");
        assert_eq!(dirname("/nvcc"), "/");
        assert_eq!(dirname("//nvcc"), "//");
        assert_eq!(dirname("a//b"), "a");
        assert_eq!(dirname("nvcc"), "");
        assert_eq!(dirname(""), "");
        assert_eq!(dirname("/a/b/"), "/a/b");
    }

    #[test]
    fn join_as_cpython() {
        assert_eq!(join("", "bin/nvcc"), "bin/nvcc");
        assert_eq!(join("/x/", "bin/nvcc"), "/x/bin/nvcc");
        assert_eq!(join("/x", "bin/nvcc"), "/x/bin/nvcc");
        assert_eq!(join("/x", "/abs"), "/abs");
    }
}
