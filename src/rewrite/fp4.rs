//! The fp4 modules: `is_cuda_version_at_least("<release>")` calls become `True` / `False`.

use super::edits::{line_of, Replacement};
use super::rules::ModuleRules;
use super::syntax::Facts;
use super::{Edit, FoldContext, Skip, SkipKind, NOTHING_TO_FOLD};
use crate::cuda::CudaVersion;

pub struct Plan {
    pub replacements: Vec<Replacement>,
    pub edits: Vec<Edit>,
}

pub fn plan(
    rules: &'static ModuleRules,
    source: &str,
    facts: &Facts,
    ctx: &dyn FoldContext,
) -> Result<Plan, Skip> {
    let module = rules.module.as_str();
    let mut plan = Plan {
        replacements: Vec::new(),
        edits: Vec::new(),
    };
    for rule in &rules.call_sites {
        let sites: Vec<_> = facts
            .str_calls
            .iter()
            .filter(|c| c.callee == rule.callee)
            .filter_map(|c| {
                let text = source.get(c.span.clone())?;
                // One line only: the replacement must not change where anything else sits.
                let literal = release_literal(&c.literal_source)?;
                (!text.contains('\n') && !text.contains('\r')).then_some((c, literal))
            })
            .collect();
        if sites.is_empty() {
            continue;
        }
        let imported = facts
            .imports
            .iter()
            .any(|i| i.plain && i.name == rule.callee && i.module == rule.import_from);
        let rebound = facts.functions.iter().any(|f| f.name == rule.callee)
            || facts.other_bindings.iter().any(|b| b == &rule.callee);
        if !imported || rebound {
            return Err(Skip::unrecognised(format!(
                "{module}: {} is not (only) `from {} import {}`",
                rule.callee, rule.import_from, rule.callee
            )));
        }
        let Some(folded) = ctx.folded_cuda_version() else {
            return Err(Skip::unrecognised(format!(
                "{module}: cuda_version was not folded in this process"
            )));
        };
        for (call, literal) in sites {
            let Some(wanted) = CudaVersion::parse_release(literal) else {
                continue;
            };
            let value = if folded.at_least(&wanted) {
                "True"
            } else {
                "False"
            };
            plan.replacements.push(Replacement {
                span: call.span.clone(),
                text: value.to_string(),
            });
            let line = line_of(source, call.span.start);
            plan.edits.push(Edit {
                rule: rule.rule.clone(),
                first_line: line,
                last_line: line,
                summary: format!("{}(\"{literal}\") -> {value}", rule.callee),
            });
        }
    }
    if plan.edits.is_empty() {
        let named = rules
            .call_sites
            .iter()
            .any(|rule| source.contains(rule.callee.as_str()));
        if !named {
            return Err(Skip(
                format!(
                    "{module}: {NOTHING_TO_FOLD}: it never names {}",
                    rules
                        .call_sites
                        .iter()
                        .map(|r| r.callee.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                SkipKind::NothingToFold,
            ));
        }
        return Err(Skip::unrecognised(format!("{module}: no rule matched")));
    }
    Ok(plan)
}

/// The release in a plain one-quote string literal like `"12.8"`: no prefix, no triple
/// quotes, no escapes, contents `^\d+(\.\d+)*$`.
fn release_literal(literal_source: &str) -> Option<&str> {
    let quote = literal_source
        .chars()
        .next()
        .filter(|q| *q == '"' || *q == '\'')?;
    let inner = literal_source.strip_prefix(quote)?.strip_suffix(quote)?;
    let release = !inner.is_empty()
        && inner
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    release.then_some(inner)
}

#[cfg(test)]
mod tests {
    use super::release_literal;

    #[test]
    fn release_literals() {
        assert_eq!(release_literal("\"12.8\""), Some("12.8"));
        assert_eq!(release_literal("'12'"), Some("12"));
        for bad in [
            "r\"12.8\"",
            "\"\"\"12.8\"\"\"",
            "\"12.\"",
            "\"\"",
            "\"12.8'",
            "\"1a\"",
            "\"\"",
        ] {
            assert_eq!(release_literal(bad), None, "{bad}");
        }
    }
}
