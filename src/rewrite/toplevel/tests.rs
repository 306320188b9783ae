//! The scanner against inputs built to fool it. `kept` lists which lines survive blanking.

use super::{sparse, Sparse};

const NAME: &str = "is_cuda_version_at_least";

/// The 1-based lines of the sparse copy that still hold text, or `None` on a doubt.
fn kept(source: &str) -> Option<Vec<usize>> {
    match sparse(source, &[NAME], false)? {
        Sparse::Nothing => Some(Vec::new()),
        Sparse::Source(out) => {
            assert_eq!(out.len(), source.len(), "offsets moved");
            assert_eq!(out.matches('\n').count(), source.matches('\n').count());
            let blanked = |l: &str| matches!(l.trim(), "" | "#");
            let lines: Vec<usize> = out
                .split('\n')
                .enumerate()
                .filter(|(_, l)| !blanked(l))
                .map(|(i, _)| i + 1)
                .collect();
            // Every kept line is byte for byte the original.
            for (o, s) in out.split('\n').zip(source.split('\n')) {
                assert!(blanked(o) || o == s, "{o:?} vs {s:?}");
            }
            Some(lines)
        }
    }
}

#[test]
fn selects_statements_using_the_name_as_an_identifier() {
    let src = "import os\nx = is_cuda_version_at_least('1')\ny = my_is_cuda_version_at_least\nz = is_cuda_version_at_least_2\nw = 'is_cuda_version_at_least'  # is_cuda_version_at_least\n";
    assert_eq!(kept(src), Some(vec![2]));
    assert_eq!(kept("a = 1\nb = 2\n"), Some(vec![]));
    assert_eq!(sparse("a = 1\n", &[NAME], false), Some(Sparse::Nothing));
}

#[test]
fn docstring_with_column_zero_code_stays_inside_its_string() {
    // The column-0 code is string content: nothing uses the name.
    let src = "x = '''\ndef f():\n    is_cuda_version_at_least('12.8')\n'''\ny = 1\n";
    assert_eq!(kept(src), Some(vec![]));
    let src = "\"\"\"Doc.\n\nis_cuda_version_at_least\n\"\"\"\nimport os\n";
    assert_eq!(kept(src), Some(vec![]));
    let src = "\"\"\"Doc.\n\nis_cuda_version_at_least\n\"\"\"\nis_cuda_version_at_least = 1\n";
    assert_eq!(kept(src), Some(vec![5]));
    // Not mentioned: the column-0 `def` inside the docstring must not become a statement.
    let src = "x = '''\ndef f():\n    pass\n'''\ny = is_cuda_version_at_least\n";
    assert_eq!(kept(src), Some(vec![5]));
    // An escaped quote does not close a triple-quoted string.
    let src = "x = '''a\\'''\ndef is_cuda_version_at_least(): pass\n'''\ny = 1\n";
    assert_eq!(kept(src), Some(vec![]));
}

#[test]
fn fstrings_nest_same_quotes_and_format_specs() {
    let cases = [
        "x = f\"{d[\"k\"]:'>10}\"\ny = is_cuda_version_at_least\n",
        "x = f\"{x:'>10}\" + f'{y!r:>{w}}' + f\"{{\" + f\"}}\" + f\"{x=}\"\ny = is_cuda_version_at_least\n",
        "x = f\"{f\"{f\"{1}\"}\"}\"\ny = is_cuda_version_at_least\n",
        "x = f'''{\n1\n}'''\ny = is_cuda_version_at_least\n",
        "x = rf\"\\{1}\" + f\"\\N{BULLET} {x}\" + t\"{x}\" + Rb'\\\\' + 'x'\ny = is_cuda_version_at_least\n",
        "x = F\"{x:{'a'}{w}.{p}}\" + fR'{a}'\ny = is_cuda_version_at_least\n",
    ];
    for src in cases {
        let n = src.matches('\n').count();
        assert_eq!(kept(src), Some(vec![n]), "{src}");
    }
    // The mention inside a replacement field keeps its statement.
    let src = "a = 1\nx = f\"{is_cuda_version_at_least('12.8')}\"\n";
    assert_eq!(kept(src), Some(vec![2]));
    // A multi-line field in a single-quoted f-string (PEP 701): one statement.
    let src = "x = f\"{\n  is_cuda_version_at_least}\"\nb = 1\n";
    assert_eq!(kept(src), Some(vec![1, 2]));
}

#[test]
fn raw_strings_end_where_python_ends_them() {
    // `r"\"` does not end at its second quote: the string runs on to the next `"`.
    let src = "x = r\"\\\" is_cuda_version_at_least\"\ny = 1\n";
    assert_eq!(kept(src), Some(vec![]));
    let src = "x = r'\\\\'\ny = is_cuda_version_at_least\n";
    assert_eq!(kept(src), Some(vec![2]));
    // An unterminated raw string is a doubt, never a guess.
    assert_eq!(kept("x = r'\\'\ny = is_cuda_version_at_least\n"), None);
    // `ur` is no prefix: a name, then an ordinary string.
    let src = "x = ur\"\\\"\"\ny = is_cuda_version_at_least\n";
    assert_eq!(kept(src), Some(vec![2]));
}

#[test]
fn continuations_brackets_and_clauses_join_lines() {
    let src = "x = 1 + \\\nis_cuda_version_at_least\ny = 2\n";
    assert_eq!(kept(src), Some(vec![1, 2]));
    let src = "x = [\n1,\nis_cuda_version_at_least]\ny = 2\n";
    assert_eq!(kept(src), Some(vec![1, 2, 3]));
    let src =
        "if a:\n    x = 1\nelif b:\n    x = 2\nelse:\n    x = is_cuda_version_at_least\ny = 3\n";
    assert_eq!(kept(src), Some(vec![1, 2, 3, 4, 5, 6]));
    let src = "try:\n    import a\nexcept ImportError:\n    is_cuda_version_at_least = None\nfinally:\n    pass\nz = 1\n";
    assert_eq!(kept(src), Some(vec![1, 2, 3, 4, 5, 6]));
    // Comments and blank lines between statements do not split or join anything.
    let src = "x = 1\n# c\n\ny = is_cuda_version_at_least\n# d\nz = 3\n";
    assert_eq!(kept(src), Some(vec![4, 5]));
}

#[test]
fn decorators_glue_to_their_definition() {
    let src = "@functools.cache\n# note\n@other(\n  1)\ndef is_cuda_version_at_least(v):\n    return v\n\n\nx = 1\n";
    assert_eq!(kept(src), Some(vec![1, 2, 3, 4, 5, 6]));
    let src = "@is_cuda_version_at_least\nclass A:\n    pass\nx = 1\n";
    assert_eq!(kept(src), Some(vec![1, 2, 3]));
}

#[test]
fn doubts_fall_back() {
    for src in [
        "x = (\ny = is_cuda_version_at_least\n",
        "x = )\n",
        "x = [)\n",
        "x = 'abc\ny = is_cuda_version_at_least\n",
        "x = '''abc\n",
        "x = f\"{x\"\n",
        "x = f\"}\"\n",
        "x = f\"{x:abc\"\n",
        "  x = 1\n",
        "\\\nx = 1\n",
        "x = 1 \\ y\n",
        "x = 1 \\",
        "x = 1f\"a\"\n",
        "x = 1\n\x0cdef is_cuda_version_at_least(): pass\n",
    ] {
        assert_eq!(kept(src), None, "{src:?}");
    }
    let deep = format!("x = {}1{}\n", "f'{".repeat(300), "}'".repeat(300));
    assert_eq!(kept(&deep), None);
}

#[test]
fn non_ascii_names_are_selected_and_bytes_stay_valid() {
    // ruff NFKC-normalises identifiers: a fullwidth spelling may be the relevant name.
    let src = "é = 'ü'\nx = 1\ny = is_cuda_version_at_least\n";
    assert_eq!(kept(src), Some(vec![1, 3]));
    let src = "\u{feff}s = 'ünïcødé 🚀'\ny = is_cuda_version_at_least\r\n";
    assert_eq!(kept(src), Some(vec![2]));
    // The byte-order mark goes with the first statement, kept or blanked.
    let src = "\u{feff}y = is_cuda_version_at_least\nx = 1\n";
    assert_eq!(kept(src), Some(vec![1]));
    let Some(Sparse::Source(out)) = sparse("a\n\nis_cuda_version_at_least\n", &[NAME], false)
    else {
        panic!()
    };
    assert_eq!(out, "#\n\nis_cuda_version_at_least\n");
}

#[test]
fn definitions_only_keeps_defs_and_from_imports() {
    let src = "from a import is_cuda_version_at_least\nx = is_cuda_version_at_least\n@d\ndef is_cuda_version_at_least(v):\n    pass\nasync def f(): is_cuda_version_at_least\nclass is_cuda_version_at_least: pass\ndefault = is_cuda_version_at_least\nasync  def  is_cuda_version_at_least(): pass\ndef \\\n  g(): pass\n";
    let Some(Sparse::Source(out)) = sparse(src, &[NAME], true) else {
        panic!("nothing selected")
    };
    let kept: Vec<usize> = out
        .split('\n')
        .enumerate()
        .filter(|(_, l)| !matches!(l.trim(), "" | "#"))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(kept, vec![1, 3, 4, 5, 9, 10, 11]);
}
