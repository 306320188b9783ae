//! Parsing and the facts the rules need, as plain owned data.
//!
//! Deep trees: ruff's parser grows its own stack, but visiting or dropping a deeply nested
//! tree (`1+1+1+...`, `not not not ...`) recurses once per level, and a stack overflow aborts
//! the host Python process instead of unwinding. So the visitor refuses to go deeper than
//! `MAX_DEPTH` and such a tree is leaked instead of dropped (it is never real FlashInfer code,
//! and the input size cap bounds the leak). The work runs on the calling thread only when it
//! has `ON_THREAD_MIN_STACK` left, else on a helper thread whose stack is known; a panic in
//! either becomes a skip.
//!
//! Only the top-level statements that mention a relevant name are parsed (`toplevel`): the
//! facts about those names are the same as a full parse gives whenever the full source
//! parses, but a syntax error in a statement not read goes unseen here. The loader's
//! `compile()` of the rewritten module then fails as the original's would, and it loads the
//! original.

use ruff_python_ast::token::TokenKind;
use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{Expr, Stmt};
use ruff_text_size::{Ranged, TextRange};

use super::stack;
use super::toplevel::{self, Sparse};

/// Ten times the largest real target module (about 110 kB); anything bigger is not FlashInfer.
pub const MAX_SOURCE_BYTES: usize = 1 << 20;
/// Statement plus expression nesting we visit; real FlashInfer code stays under 40.
pub(super) const MAX_DEPTH: usize = 1000;
/// Room for `MAX_DEPTH` levels at about 2 KiB each (debug builds) and the parser's own frames
/// before it switches to heap-allocated stack segments. Only touched pages are committed.
const PARSE_STACK_BYTES: usize = 64 << 20;
/// Stack the calling thread must have left to parse on it. Parsing, visiting and dropping the
/// deepest trees `MAX_DEPTH` lets through need under 2 MiB in a debug build and under 256 KiB
/// in release (`tests::stack_needed_at_max_depth` asserts half of this suffices; ruff's parser
/// moves its own recursion to the heap when the stack runs low). A Python main thread under
/// the usual 8 MiB limit still qualifies.
pub(super) const ON_THREAD_MIN_STACK: usize = 4 << 20;

/// Byte range, `start..end`, into the source that was analysed.
pub type Span = std::ops::Range<usize>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decorator {
    pub span: Span,
    /// The decorator expression's tokens, whitespace and comments dropped.
    pub normalized: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Function {
    pub name: String,
    pub is_async: bool,
    pub decorators: Vec<Decorator>,
    /// `def` keyword (or `async`) to the end of the last body statement.
    pub def_span: Span,
    /// First body statement's start to the last one's end.
    pub body_span: Span,
    /// The sole parameter's name when the signature is exactly one plain positional parameter
    /// (annotation allowed; no default, no `/`, `*`, `**`).
    pub single_param: Option<String>,
    /// The whole function's tokens (decorators excluded), whitespace and comments dropped.
    pub normalized: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportFrom {
    /// With its leading dots for relative imports, e.g. `.jit.cpp_ext`.
    pub module: String,
    pub name: String,
    /// Whether the name is bound under its own name (no `as`).
    pub plain: bool,
}

/// A call `name(<one string literal>)` with no keywords.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StrCall {
    pub callee: String,
    pub span: Span,
    /// The literal's source text, quotes and any prefix included.
    pub literal_source: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Facts {
    /// Top-level `def`s, in source order.
    pub functions: Vec<Function>,
    /// Top-level `from X import Y` statements.
    pub imports: Vec<ImportFrom>,
    /// Names bound at top level other than by `def` and `from ... import` (assignments,
    /// classes, plain imports): a call-site rule must not trust a callee rebound this way.
    pub other_bindings: Vec<String>,
    pub str_calls: Vec<StrCall>,
}

/// Parses `source` and extracts the facts about `relevant` names (with `definitions_only`,
/// only `functions` and `imports`), or says why not in one line. Other facts may be missing:
/// only the top-level statements mentioning a relevant name are parsed when the source can be
/// cut into statements with certainty. Only the functions named in `wanted` get their
/// normalised text (the shape matchers read nothing else).
pub fn analyze(
    source: &str,
    wanted: &[&str],
    relevant: &[&str],
    definitions_only: bool,
) -> Result<Facts, String> {
    on_big_stack(
        || match toplevel::sparse(source, relevant, definitions_only) {
            Some(Sparse::Nothing) => Ok(Facts::default()),
            // Any complaint about the sparse copy is answered by the full source, so that a wrong
            // guess by the scanner costs time, never a different result.
            Some(Sparse::Source(sparse)) => {
                analyze_here(&sparse, wanted).or_else(|_| analyze_here(source, wanted))
            }
            None => analyze_here(source, wanted),
        },
    )
}

/// The full parse's facts, for the tests that compare it with `analyze`.
#[doc(hidden)]
pub fn analyze_full(source: &str, wanted: &[&str]) -> Result<Facts, String> {
    on_big_stack(|| analyze_here(source, wanted))
}

/// Whether `source` parses without errors (the tests check every output with it).
#[cfg(test)]
pub fn parses(source: &str) -> bool {
    on_big_stack(|| {
        let parsed = parse(source);
        let mut calls = CallCollector::new(source);
        calls.visit_body(&parsed.syntax().body);
        let ok = parsed.has_valid_syntax() && !calls.too_deep;
        if calls.too_deep {
            std::mem::forget(parsed);
        }
        Ok(ok)
    })
    .unwrap_or(false)
}

fn on_big_stack<T: Send>(f: impl FnOnce() -> Result<T, String> + Send) -> Result<T, String> {
    if stack::remaining().is_some_and(|left| left >= ON_THREAD_MIN_STACK) {
        // A parser bug must cost one module's fold, never the host process.
        return std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            .unwrap_or_else(|_| Err("the Python parser panicked".to_string()));
    }
    std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .name("dynafold-parse".into())
            .stack_size(PARSE_STACK_BYTES)
            .spawn_scoped(scope, || {
                // A parser bug must cost one module's fold, never the host process.
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
                    .unwrap_or_else(|_| Err("the Python parser panicked".to_string()))
            })
            .map_err(|e| format!("could not start the parser thread: {e}"))?;
        handle
            .join()
            .unwrap_or_else(|_| Err("the parser thread panicked".to_string()))
    })
}

pub(super) fn analyze_here(source: &str, wanted: &[&str]) -> Result<Facts, String> {
    let parsed = parse(source);
    // Measured first: a tree too deep to visit is too deep to drop.
    let mut calls = CallCollector::new(source);
    calls.visit_body(&parsed.syntax().body);
    if calls.too_deep {
        std::mem::forget(parsed);
        return Err(format!("nested deeper than {MAX_DEPTH} levels"));
    }
    if let Some(e) = parsed.errors().first() {
        return Err(format!("does not parse: {}", one_line(&e.to_string())));
    }
    let tokens: &[ruff_python_ast::token::Token] = parsed.tokens();
    let mut facts = Facts::default();
    for stmt in &parsed.syntax().body {
        match stmt {
            Stmt::FunctionDef(def) => {
                let def_start = to_usize(def.range().start());
                let body_start = def.body.first().map(|s| to_usize(s.range().start()));
                let body_end = def.body.last().map(|s| to_usize(s.range().end()));
                let (Some(body_start), Some(body_end)) = (body_start, body_end) else {
                    continue;
                };
                // The def's own range starts at its first decorator.
                let keyword_start = def
                    .decorator_list
                    .last()
                    .and_then(|d| next_token_start(tokens, to_usize(d.range().end())))
                    .unwrap_or(def_start);
                let is_wanted = wanted.contains(&def.name.as_str());
                let p = &def.parameters;
                let single_param = (p.posonlyargs.is_empty()
                    && p.vararg.is_none()
                    && p.kwonlyargs.is_empty()
                    && p.kwarg.is_none()
                    && p.args.len() == 1)
                    .then(|| p.args.first())
                    .flatten()
                    .filter(|a| a.default.is_none())
                    .map(|a| a.parameter.name.as_str().to_string());
                facts.functions.push(Function {
                    name: def.name.as_str().to_string(),
                    is_async: def.is_async,
                    decorators: def
                        .decorator_list
                        .iter()
                        .map(|d| Decorator {
                            span: span(d.range()),
                            normalized: if is_wanted {
                                normalized(source, tokens, d.expression.range())
                            } else {
                                String::new()
                            },
                        })
                        .collect(),
                    def_span: keyword_start..body_end,
                    body_span: body_start..body_end,
                    single_param,
                    normalized: if is_wanted {
                        normalized(
                            source,
                            tokens,
                            TextRange::new(
                                ruff_text_size::TextSize::try_from(keyword_start)
                                    .unwrap_or(def.range().start()),
                                def.range().end(),
                            ),
                        )
                    } else {
                        String::new()
                    },
                });
            }
            Stmt::ImportFrom(imp) => {
                let module = format!(
                    "{}{}",
                    ".".repeat(usize::try_from(imp.level).unwrap_or(0).min(64)),
                    imp.module.as_ref().map(|m| m.as_str()).unwrap_or("")
                );
                for alias in &imp.names {
                    facts.imports.push(ImportFrom {
                        module: module.clone(),
                        name: alias.name.as_str().to_string(),
                        plain: alias.asname.is_none(),
                    });
                    if let Some(asname) = &alias.asname {
                        facts.other_bindings.push(asname.as_str().to_string());
                    }
                }
            }
            Stmt::ClassDef(class) => facts.other_bindings.push(class.name.as_str().to_string()),
            Stmt::Assign(assign) => {
                for target in &assign.targets {
                    if let Expr::Name(name) = target {
                        facts.other_bindings.push(name.id.as_str().to_string());
                    }
                }
            }
            Stmt::AnnAssign(assign) => {
                if let Expr::Name(name) = assign.target.as_ref() {
                    facts.other_bindings.push(name.id.as_str().to_string());
                }
            }
            Stmt::Import(imp) => {
                for alias in &imp.names {
                    let bound = alias.asname.as_ref().unwrap_or(&alias.name);
                    facts.other_bindings.push(bound.as_str().to_string());
                }
            }
            _ => {}
        }
    }
    facts.str_calls = calls.calls;
    Ok(facts)
}

/// Never `parse_module`: on a syntax error it drops the tree itself, before we can measure it.
fn parse(source: &str) -> ruff_python_parser::Parsed<ruff_python_ast::ModModule> {
    ruff_python_parser::parse_unchecked_source(source, ruff_python_ast::PySourceType::Python)
}

struct CallCollector<'s> {
    source: &'s str,
    calls: Vec<StrCall>,
    depth: usize,
    too_deep: bool,
}

impl<'s> CallCollector<'s> {
    fn new(source: &'s str) -> Self {
        CallCollector {
            source,
            calls: Vec::new(),
            depth: 0,
            too_deep: false,
        }
    }

    /// False (and `too_deep` set) when going one level further would pass `MAX_DEPTH`.
    fn descend(&mut self) -> bool {
        if self.too_deep || self.depth >= MAX_DEPTH {
            self.too_deep = true;
            return false;
        }
        self.depth += 1;
        true
    }
}

impl<'a> Visitor<'a> for CallCollector<'_> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        if self.descend() {
            visitor::walk_stmt(self, stmt);
            self.depth -= 1;
        }
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        if !self.descend() {
            return;
        }
        if let Expr::Call(call) = expr {
            if let (Expr::Name(callee), [Expr::StringLiteral(lit)], true) = (
                call.func.as_ref(),
                call.arguments.args.as_ref(),
                call.arguments.keywords.is_empty(),
            ) {
                if let Some(text) = self.source.get(span(lit.range())) {
                    self.calls.push(StrCall {
                        callee: callee.id.as_str().to_string(),
                        span: span(call.range()),
                        literal_source: text.to_string(),
                    });
                }
            }
        }
        visitor::walk_expr(self, expr);
        self.depth -= 1;
    }
}

fn to_usize(offset: ruff_text_size::TextSize) -> usize {
    usize::try_from(u32::from(offset)).unwrap_or(usize::MAX)
}

fn span(range: TextRange) -> Span {
    to_usize(range.start())..to_usize(range.end())
}

fn next_token_start(tokens: &[ruff_python_ast::token::Token], offset: usize) -> Option<usize> {
    let idx = tokens.partition_point(|t| to_usize(t.start()) < offset);
    tokens
        .get(idx..)
        .unwrap_or(&[])
        .iter()
        .find(|t| !is_trivia(t.kind()))
        .map(|t| to_usize(t.start()))
}

fn is_trivia(kind: TokenKind) -> bool {
    matches!(
        kind,
        TokenKind::Comment
            | TokenKind::NonLogicalNewline
            | TokenKind::Newline
            | TokenKind::Indent
            | TokenKind::Dedent
    )
}

/// The tokens inside `range`, whitespace removed everywhere (string contents included) and
/// comments dropped, so shape patterns survive reformatting but not a changed comment.
fn normalized(source: &str, tokens: &[ruff_python_ast::token::Token], range: TextRange) -> String {
    let (start, end) = (to_usize(range.start()), to_usize(range.end()));
    let first = tokens.partition_point(|t| to_usize(t.start()) < start);
    let mut out = String::new();
    for token in tokens.get(first..).unwrap_or(&[]) {
        if to_usize(token.end()) > end {
            break;
        }
        if is_trivia(token.kind()) {
            continue;
        }
        if let Some(text) = source.get(span(token.range())) {
            out.extend(text.chars().filter(|c| !c.is_whitespace()));
        }
    }
    out
}

/// Removes whitespace the same way `normalized` does, for patterns read from the rules.
pub fn normalize_pattern(pattern: &str) -> String {
    pattern.chars().filter(|c| !c.is_whitespace()).collect()
}

fn one_line(text: &str) -> String {
    text.lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(200)
        .collect()
}
