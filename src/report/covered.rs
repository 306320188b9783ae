//! Whether a dynafold rule covers a site: with dynafold active the traced code would never
//! reach the break, because a function on its path is folded to a constant.

use super::record::{Frame, Record};

/// (file suffix, functions) folded by dynafold's rules. The fp4 modules' call sites of
/// `is_cuda_version_at_least("..")` are listed too: a break reached through them is inside
/// `cpp_ext.is_cuda_version_at_least` and matches the first entry as well.
const FOLDED: &[(&str, &[&str])] = &[
    (
        "flashinfer/jit/cpp_ext.py",
        &[
            "get_cuda_path",
            "get_cuda_version",
            "is_cuda_version_at_least",
        ],
    ),
    (
        "flashinfer/fp4_quantization.py",
        &["gen_fp4_quantization_module"],
    ),
    (
        "flashinfer/jit/fp4_quantization.py",
        &["gen_fp4_quantization_module"],
    ),
    (
        "flashinfer/quantization/fp4_quantization.py",
        &["gen_fp4_quantization_module"],
    ),
];

/// True when any frame on the record's path is in a function dynafold folds. For the fp4
/// generators only the version check inside them is folded, so they count only when the
/// next frame inward is `is_cuda_version_at_least` (or unknown: the stack was cut).
pub fn is_covered(record: &Record) -> bool {
    let frames = record.frames();
    frames
        .iter()
        .enumerate()
        .any(|(i, f)| match folded_functions(f) {
            Some(FoldKind::Whole) => true,
            Some(FoldKind::CallSite) => frames
                .get(i + 1)
                .map(|next| next.function == "is_cuda_version_at_least")
                .unwrap_or(false),
            None => false,
        })
}

enum FoldKind {
    Whole,
    CallSite,
}

fn folded_functions(frame: &Frame) -> Option<FoldKind> {
    let file = frame.file.replace('\\', "/");
    FOLDED.iter().enumerate().find_map(|(i, (suffix, funcs))| {
        let hit = file.ends_with(suffix) && funcs.contains(&frame.function.as_str());
        match (hit, i) {
            (true, 0) => Some(FoldKind::Whole),
            (true, _) => Some(FoldKind::CallSite),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(stack: &[&str]) -> Record {
        Record {
            break_type: "gb0007".into(),
            stack: stack.iter().map(|s| s.to_string()).collect(),
            ..Record::default()
        }
    }

    #[test]
    fn cpp_ext_version_checks_are_covered() {
        let r = rec(&[
            "/srv/model.py:10 in forward",
            "/sp/flashinfer/fp4_quantization.py:80 in gen_fp4_quantization_module",
            "/sp/flashinfer/jit/cpp_ext.py:90 in is_cuda_version_at_least",
            "/sp/flashinfer/jit/cpp_ext.py:70 in get_cuda_version",
            "/usr/lib/python3.11/subprocess.py:828 in __init__",
        ]);
        assert!(is_covered(&r));
    }

    #[test]
    fn other_flashinfer_breaks_are_not() {
        let r = rec(&[
            "/srv/model.py:10 in forward",
            "/sp/flashinfer/fp4_quantization.py:120 in gen_fp4_quantization_module",
            "/sp/flashinfer/jit/core.py:300 in gen_jit_spec",
        ]);
        assert!(!is_covered(&r));
        assert!(!is_covered(&rec(&["/srv/model.py:10 in forward"])));
    }
}
