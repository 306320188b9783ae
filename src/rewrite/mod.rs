//! The rewriter: FlashInfer module source in, line-preserving rewritten source and the list of
//! edits out. Pure: no I/O, no Python. Rules are data (`src/rewrite/rules/*.toml`, embedded at build time).
//!
//! Contract (relied on by the loader in `src/python` and by `dynafold rewrite`):
//! - `is_target` is an exact, allocation-free match on the dotted module name.
//! - `rewrite` returns `Err(Skip)` with a one-line reason whenever anything is not exactly as
//!   the rules expect; callers then load the original module untouched.
//! - On success the output has exactly as many lines as the input and every statement stays
//!   on its line; values never appear in the generated text, only the names of module globals
//!   listed in `Rewritten::globals`, which the loader sets before executing the module. The
//!   only literals generated are `True` / `False`.
//! - The output parses whenever the input does. Only the top-level statements that mention a
//!   name the rules look at are parsed, so a syntax error elsewhere goes unseen and the output
//!   carries it; the loader's `compile()` then fails as the original's would, and it loads the
//!   original.
//!
//! Parsing uses `ruff_python_parser` (on those statements only, the rest blanked in place; see
//! `toplevel`): it follows CPython's grammar (so what it accepts is what the interpreter will
//! accept, f-strings and `match` included) and gives every node byte ranges, which is what
//! replacing exactly a function body or a call, and nothing else, needs.
//! Functions are recognised by shape (their name and what their source says), never by line
//! numbers or release numbers, so an unknown release either matches a known shape or is left
//! alone.

mod cpp_ext;
mod diff;
mod edits;
mod fp4;
mod rules;
mod shape;
mod stack;
mod syntax;
#[cfg(test)]
mod tests;
mod toplevel;

use crate::cuda::{CudaVersion, Outcome, PathRecipe, VersionRecipe};

pub use cpp_ext::{PATH_ERROR_GLOBAL, PATH_GLOBAL, VERSION_ERROR_GLOBAL, VERSION_GLOBAL};
pub use diff::unified_diff;
pub use syntax::MAX_SOURCE_BYTES;

/// The dotted names of the modules dynafold rewrites.
pub const TARGETS: [&str; 4] = [
    "flashinfer.jit.cpp_ext",
    "flashinfer.fp4_quantization",
    "flashinfer.jit.fp4_quantization",
    "flashinfer.quantization.fp4_quantization",
];

/// What the rewriter may ask about the process it is folding for.
pub trait FoldContext {
    fn cuda_path(&self, recipe: PathRecipe) -> Outcome<String>;
    fn cuda_version(&self, version: VersionRecipe, path: PathRecipe) -> Outcome<CudaVersion>;
    /// The version `flashinfer.jit.cpp_ext` was folded with in this process, if it was:
    /// call sites elsewhere fold only to that value, so every module agrees.
    fn folded_cuda_version(&self) -> Option<CudaVersion>;
}

/// One change, for `__dynafold__`, logs and `--diff`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edit {
    /// The rule's name, e.g. `cpp_ext.get_cuda_version`.
    pub rule: String,
    /// 1-based, inclusive.
    pub first_line: u32,
    pub last_line: u32,
    /// What it did, e.g. `body -> return __dynafold_cuda_version__`.
    pub summary: String,
}

/// A module global the loader must define before executing the rewritten source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Global {
    pub name: String,
    pub value: GlobalValue,
    /// Where the value came from (e.g. `nvcc --version at /usr/local/cuda/bin/nvcc`).
    pub provenance: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GlobalValue {
    /// Build with the module's own `Version` (packaging.version.Version).
    Version(CudaVersion),
    Str(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rewritten {
    pub source: String,
    pub edits: Vec<Edit>,
    pub globals: Vec<Global>,
    /// Set when this module's fold fixed the process's CUDA version (cpp_ext).
    pub cuda_version: Option<CudaVersion>,
}

/// Why a module is loaded untouched: one line, for the warning, and what kind of reason it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skip(pub String, pub SkipKind);

/// Whether a skip deserves a warning: a source the rules do not recognise does; a module with
/// nothing to fold (FlashInfer 0.7's `flashinfer.fp4_quantization` is a re-export stub) is
/// loaded unchanged as it should be, which is not worth a warning in every process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SkipKind {
    Unrecognised,
    NothingToFold,
}

/// How a nothing-to-fold reason reads.
pub const NOTHING_TO_FOLD: &str = "nothing to fold";

impl Skip {
    /// A source the rules do not recognise.
    pub fn unrecognised(reason: String) -> Skip {
        Skip(reason, SkipKind::Unrecognised)
    }

    /// Whether the module was left unchanged because it has nothing to fold, not because its
    /// source was not recognised.
    pub fn is_nothing_to_fold(&self) -> bool {
        self.1 == SkipKind::NothingToFold
    }

    /// The reason without its leading `module: `, for a line that names the module already.
    pub fn why<'a>(&'a self, module: &str) -> &'a str {
        self.0
            .strip_prefix(module)
            .and_then(|r| r.strip_prefix(": "))
            .unwrap_or(&self.0)
    }
}

/// Whether `module` (a dotted name) is one dynafold rewrites. Called for every import, so it
/// only compares against the fixed list.
pub fn is_target(module: &str) -> bool {
    // Every target lives under `flashinfer.`: most imports are rejected on the first bytes.
    module.starts_with("flashinfer.") && TARGETS.contains(&module)
}

/// The names whose facts the plans read: every fact they use is keyed by one of these.
fn relevant_names(rules: &rules::ModuleRules) -> Vec<&str> {
    let mut names: Vec<&str> = rules
        .functions
        .iter()
        .map(|f| f.name.as_str())
        .chain(rules.call_sites.iter().map(|c| c.callee.as_str()))
        .chain(rules.imports.iter().map(|i| i.name.as_str()))
        .collect();
    for function in &rules.functions {
        for shape in &function.shapes {
            names.extend(shape.imports.iter().map(|i| i.name.as_str()));
        }
    }
    names.sort_unstable();
    names.dedup();
    names
}

/// The functions whose shapes the plans match: only they get normalised text.
fn wanted_names(rules: &rules::ModuleRules) -> Vec<&str> {
    rules.functions.iter().map(|f| f.name.as_str()).collect()
}

/// The facts about the relevant names. A source that never spells one has none, and the plan
/// then declines with its usual "no rule matched"; only ASCII sources qualify, because ruff
/// NFKC-normalises non-ASCII identifiers (`get_ｃｕｄａ_path` is `get_cuda_path`).
fn facts(rules: &rules::ModuleRules, source: &str) -> Result<syntax::Facts, String> {
    let relevant = relevant_names(rules);
    if source.is_ascii() && !relevant.iter().any(|n| source.contains(n)) {
        return Ok(syntax::Facts::default());
    }
    syntax::analyze(
        source,
        &wanted_names(rules),
        &relevant,
        definitions_only(rules),
    )
}

/// Whether the plan reads only `Facts::functions` and `Facts::imports` (cpp_ext's does; the
/// call-site plans also read calls and other bindings).
fn definitions_only(rules: &rules::ModuleRules) -> bool {
    rules.call_sites.is_empty()
}

/// Rewrites the source of target `module`, or says in one line why it must load untouched.
pub fn rewrite(module: &str, source: &str, ctx: &dyn FoldContext) -> Result<Rewritten, Skip> {
    if !is_target(module) {
        return Err(Skip::unrecognised(format!(
            "{module}: not a dynafold target"
        )));
    }
    let skip = |why: &str| Skip::unrecognised(format!("{module}: {why}"));
    if source.len() > MAX_SOURCE_BYTES {
        return Err(skip("source larger than dynafold handles"));
    }
    // Python ends a line at a lone `\r` too; the line-count contract is stated in `\n`s.
    if source
        .split('\r')
        .skip(1)
        .any(|rest| !rest.starts_with('\n'))
    {
        return Err(skip("source has bare carriage returns"));
    }
    let rules = rules::for_module(module)
        .map_err(|e| skip(&format!("rule data is invalid: {e}")))?
        .ok_or_else(|| skip("no rules for this module"))?;
    let facts = facts(rules, source).map_err(|e| skip(&e))?;

    let (replacements, edits, globals, cuda_version) = if rules.functions.is_empty() {
        let plan = fp4::plan(rules, source, &facts, ctx)?;
        (plan.replacements, plan.edits, Vec::new(), None)
    } else {
        let plan = cpp_ext::plan(rules, source, &facts, ctx)?;
        (
            plan.replacements,
            plan.edits,
            plan.globals,
            plan.cuda_version,
        )
    };
    if edits.is_empty() {
        return Err(skip("no rule matched: nothing could be folded"));
    }
    let output = edits::apply(source, replacements).map_err(|e| skip(&e))?;
    if edits::newlines(&output) != edits::newlines(source) {
        return Err(skip("internal: the rewrite changed the line count"));
    }
    // The replacements are fixed templates (a `return`/`raise` of a global, `True`, `False`,
    // a comment) placed at statement or expression boundaries, so the output is not parsed a
    // second time here: that doubled the cost, and the loader's `compile()` checks it anyway
    // and falls back to the original module if it ever failed. The tests re-parse every output.
    Ok(Rewritten {
        source: output,
        edits,
        globals,
        cuda_version,
    })
}

/// For the tests that compare the sparse parse with the full one; not an API.
#[doc(hidden)]
pub mod testing {
    use super::{rules, syntax};

    /// The facts about `module`'s relevant names as the rewriter computes them (sparse parse)
    /// and as a full parse does, rendered for comparison; `None` when the module has no rules
    /// or the full parse fails.
    pub fn sparse_and_full_facts(module: &str, source: &str) -> Option<(String, String)> {
        let rules = rules::for_module(module).ok()??;
        let relevant = super::relevant_names(rules);
        let full = syntax::analyze_full(source, &super::wanted_names(rules)).ok()?;
        let sparse = super::facts(rules, source);
        let definitions_only = super::definitions_only(rules);
        let render =
            |facts: syntax::Facts| format!("{:#?}", restrict(facts, &relevant, definitions_only));
        Some((
            sparse.map_or_else(|e| format!("error: {e}"), render),
            render(full),
        ))
    }

    /// What the module's plan can read.
    fn restrict(mut facts: syntax::Facts, names: &[&str], definitions_only: bool) -> syntax::Facts {
        let keep = |n: &str| names.contains(&n) && !definitions_only;
        facts.other_bindings.retain(|b| keep(b));
        facts.str_calls.retain(|c| keep(&c.callee));
        let keep = |n: &str| names.contains(&n);
        facts.functions.retain(|f| keep(&f.name));
        facts.imports.retain(|i| keep(&i.name));
        facts
    }
}
