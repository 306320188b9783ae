//! Recognising a function by its shape: name, decorators, imports it relies on, and
//! substrings its normalised source must and must not contain.

use super::rules::{FunctionRule, Import, Shape};
use super::syntax::{Facts, Function};

/// The one shape of `rule` that `function` has; `Ok(None)` when it has none.
pub fn match_function<'r>(
    rule: &'r FunctionRule,
    function: &Function,
    facts: &Facts,
) -> Result<Option<&'r Shape>, String> {
    let mut found = rule.shapes.iter().filter(|s| has_shape(s, function, facts));
    let first = found.next();
    if let (Some(a), Some(b)) = (first, found.next()) {
        return Err(format!(
            "{} matches more than one shape ({}, {})",
            function.name, a.name, b.name
        ));
    }
    Ok(first)
}

fn has_shape(shape: &Shape, function: &Function, facts: &Facts) -> bool {
    if function.is_async
        || function.decorators.len() != shape.decorators.len()
        || !function
            .decorators
            .iter()
            .zip(&shape.decorators)
            .all(|(d, want)| &d.normalized == want)
        || !shape.imports.iter().all(|i| imports(facts, i))
    {
        return false;
    }
    let text = &function.normalized;
    let requires_ok = shape.requires.iter().all(|p| {
        if p.contains("{param}") {
            function
                .single_param
                .as_ref()
                .is_some_and(|param| text.contains(&p.replace("{param}", param)))
        } else {
            text.contains(p.as_str())
        }
    });
    requires_ok && !shape.forbids.iter().any(|p| text.contains(p.as_str()))
}

/// Whether the module binds `import.name` from `import.from` under its own name.
pub fn imports(facts: &Facts, import: &Import) -> bool {
    facts
        .imports
        .iter()
        .any(|i| i.plain && i.module == import.from && i.name == import.name)
}
