//! `flashinfer.jit.cpp_ext`: fold the CUDA path / version functions to module globals.

use super::edits::{keep_lines, line_of, Replacement};
use super::rules::{ModuleRules, PathSource, Role, Shape};
use super::shape::{imports, match_function};
use super::syntax::{Facts, Function};
use super::{Edit, FoldContext, Global, GlobalValue, Skip};
use crate::cuda::{CudaVersion, Outcome, PathRecipe};

pub const PATH_GLOBAL: &str = "__dynafold_cuda_path__";
pub const PATH_ERROR_GLOBAL: &str = "__dynafold_cuda_path_error__";
pub const VERSION_GLOBAL: &str = "__dynafold_cuda_version__";
pub const VERSION_ERROR_GLOBAL: &str = "__dynafold_cuda_version_error__";

/// The only exception the generated `raise` may name: it is a builtin, so the rewritten
/// module needs no extra import, and FlashInfer raises nothing else from these functions
/// that callers catch by type.
const FOLDABLE_EXCEPTION: &str = "RuntimeError";

#[derive(Default)]
pub struct Plan {
    pub replacements: Vec<Replacement>,
    pub edits: Vec<Edit>,
    pub globals: Vec<Global>,
    pub cuda_version: Option<CudaVersion>,
}

struct Matched<'a> {
    function: &'a Function,
    shape: &'static Shape,
    rule: &'static str,
}

pub fn plan(
    rules: &'static ModuleRules,
    source: &str,
    facts: &Facts,
    ctx: &dyn FoldContext,
) -> Result<Plan, Skip> {
    let module = rules.module.as_str();
    let skip = |why: String| Skip::unrecognised(format!("{module}: {why}"));

    let mut by_role: Vec<(Role, Matched)> = Vec::new();
    for rule in &rules.functions {
        let mut defs = facts.functions.iter().filter(|f| f.name == rule.name);
        let Some(function) = defs.next() else {
            continue;
        };
        if defs.next().is_some() {
            return Err(skip(format!("{} is defined more than once", rule.name)));
        }
        match match_function(rule, function, facts).map_err(skip)? {
            Some(shape) => by_role.push((
                rule.role,
                Matched {
                    function,
                    shape,
                    rule: &rule.rule,
                },
            )),
            None => {
                return Err(skip(format!(
                    "{} has an unknown shape (known: {})",
                    rule.name,
                    rule.shapes
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )))
            }
        }
    }
    if by_role.is_empty() {
        let names: Vec<&str> = rules.functions.iter().map(|f| f.name.as_str()).collect();
        return Err(skip(format!(
            "no rule matched: none of {} is defined at module level",
            names.join(", ")
        )));
    }
    if let Some(missing) = rules.imports.iter().find(|i| !imports(facts, i)) {
        return Err(skip(format!(
            "no rule matched: `from {} import {}` is missing",
            missing.from, missing.name
        )));
    }
    let find = |role: Role| by_role.iter().find(|(r, _)| *r == role).map(|(_, m)| m);

    let mut plan = Plan::default();
    let mut module_path_recipe: Option<PathRecipe> = None;

    if let Some(m) = find(Role::Path) {
        let recipe = m
            .shape
            .path_source()
            .and_then(|s| match s {
                PathSource::Fixed(r) => Some(r),
                PathSource::Module => None,
            })
            .ok_or_else(|| {
                skip(format!(
                    "{}: shape {} has no path recipe",
                    m.rule, m.shape.name
                ))
            })?;
        module_path_recipe = Some(recipe);
        match ctx.cuda_path(recipe) {
            Outcome::Value(path, provenance) => {
                fold_value(&mut plan, source, m, PATH_GLOBAL);
                plan.globals.push(Global {
                    name: PATH_GLOBAL.to_string(),
                    value: GlobalValue::Str(path),
                    provenance: provenance.0,
                });
            }
            Outcome::Raise { exception, message } => {
                if exception == FOLDABLE_EXCEPTION {
                    fold_raise(&mut plan, source, m, PATH_ERROR_GLOBAL);
                    plan.globals.push(Global {
                        name: PATH_ERROR_GLOBAL.to_string(),
                        value: GlobalValue::Str(message),
                        provenance: format!("get_cuda_path ({recipe:?}) raises RuntimeError"),
                    });
                }
            }
            Outcome::Unfoldable(reason) => {
                return Err(skip(format!("get_cuda_path cannot be folded: {reason}")))
            }
        }
    }

    let mut version_folded = false;
    if let Some(m) = find(Role::Version) {
        let version_recipe = m
            .shape
            .version_recipe
            .as_deref()
            .and_then(super::rules::version_recipe)
            .ok_or_else(|| {
                skip(format!(
                    "{}: shape {} has no version recipe",
                    m.rule, m.shape.name
                ))
            })?;
        let path_recipe = match m.shape.path_source() {
            Some(PathSource::Fixed(r)) => r,
            Some(PathSource::Module) => module_path_recipe.ok_or_else(|| {
                skip(format!(
                    "get_cuda_version ({}) calls get_cuda_path, which is not defined here",
                    m.shape.name
                ))
            })?,
            None => {
                return Err(skip(format!(
                    "{}: shape {} has no path recipe",
                    m.rule, m.shape.name
                )))
            }
        };
        match ctx.cuda_version(version_recipe, path_recipe) {
            Outcome::Value(version, provenance) => {
                fold_value(&mut plan, source, m, VERSION_GLOBAL);
                plan.globals.push(Global {
                    name: VERSION_GLOBAL.to_string(),
                    value: GlobalValue::Version(version.clone()),
                    provenance: provenance.0,
                });
                plan.cuda_version = Some(version);
                version_folded = true;
            }
            Outcome::Raise { exception, message } => {
                if exception == FOLDABLE_EXCEPTION {
                    fold_raise(&mut plan, source, m, VERSION_ERROR_GLOBAL);
                    plan.globals.push(Global {
                        name: VERSION_ERROR_GLOBAL.to_string(),
                        value: GlobalValue::Str(message),
                        provenance: format!(
                            "get_cuda_version ({version_recipe:?}, {path_recipe:?}) raises RuntimeError"
                        ),
                    });
                }
            }
            Outcome::Unfoldable(reason) => {
                return Err(skip(format!("get_cuda_version cannot be folded: {reason}")))
            }
        }
    }

    // Only a folded value can be compared without calling get_cuda_version; after a folded
    // error the original body already raises it.
    if let (Some(m), true) = (find(Role::AtLeast), version_folded) {
        if let Some(param) = &m.function.single_param {
            let body = format!("return {VERSION_GLOBAL} >= Version({param})");
            replace_body(&mut plan, source, m, &body, None);
        }
    }
    Ok(plan)
}

fn fold_value(plan: &mut Plan, source: &str, m: &Matched, global: &str) {
    let comment = m
        .function
        .decorators
        .first()
        .map(|d| format!("@{} removed, value folded", d.normalized));
    replace_body(plan, source, m, &format!("return {global}"), comment);
}

fn fold_raise(plan: &mut Plan, source: &str, m: &Matched, global: &str) {
    replace_body(
        plan,
        source,
        m,
        &format!("raise {FOLDABLE_EXCEPTION}({global})"),
        None,
    );
}

/// Replaces the body by `body` on its first line (following lines left empty) and, when
/// `decorator_note` is given, each decorator by a `# dynafold:` comment in its place.
fn replace_body(
    plan: &mut Plan,
    source: &str,
    m: &Matched,
    body: &str,
    decorator_note: Option<String>,
) {
    let f = m.function;
    let old_body = source.get(f.body_span.clone()).unwrap_or("");
    plan.replacements.push(Replacement {
        span: f.body_span.clone(),
        text: keep_lines(body, old_body),
    });
    let mut first = f.def_span.start;
    let mut summary = format!("body -> {body}");
    if let Some(note) = decorator_note {
        for d in &f.decorators {
            let old = source.get(d.span.clone()).unwrap_or("");
            // Decorator spans start after `@`'s indentation, so the comment keeps it.
            plan.replacements.push(Replacement {
                span: d.span.clone(),
                text: keep_lines(
                    &format!("# dynafold: @{} removed, value folded", d.normalized),
                    old,
                ),
            });
            first = first.min(d.span.start);
        }
        summary = format!("{summary}; {note}");
    }
    plan.edits.push(Edit {
        rule: m.rule.to_string(),
        first_line: line_of(source, first),
        last_line: line_of(source, f.body_span.end),
        summary,
    });
}
