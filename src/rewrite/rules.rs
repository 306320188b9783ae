//! The rule data in `src/rewrite/rules/*.toml`: embedded at build time, parsed once, validated on load.
//!
//! Rules are data so a new FlashInfer shape is a reviewed TOML change, not new Rust.

use std::sync::OnceLock;

use serde::Deserialize;

use super::syntax::normalize_pattern;
use crate::cuda::{PathRecipe, VersionRecipe};

const HOOK_FILES: &[(&str, &str)] = &[
    (
        "src/rewrite/rules/cpp_ext.toml",
        include_str!("rules/cpp_ext.toml"),
    ),
    (
        "src/rewrite/rules/fp4_quantization.toml",
        include_str!("rules/fp4_quantization.toml"),
    ),
    (
        "src/rewrite/rules/jit_fp4_quantization.toml",
        include_str!("rules/jit_fp4_quantization.toml"),
    ),
    (
        "src/rewrite/rules/quantization_fp4_quantization.toml",
        include_str!("rules/quantization_fp4_quantization.toml"),
    ),
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModuleRules {
    pub module: String,
    #[serde(default)]
    pub imports: Vec<Import>,
    #[serde(default)]
    pub functions: Vec<FunctionRule>,
    #[serde(default)]
    pub call_sites: Vec<CallSiteRule>,
}

/// `from <from> import <name>` at module level, bound under its own name.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Import {
    pub from: String,
    pub name: String,
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Path,
    Version,
    AtLeast,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionRule {
    pub name: String,
    pub role: Role,
    pub rule: String,
    pub shapes: Vec<Shape>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shape {
    pub name: String,
    /// A `PathRecipe` name, or `module` for "whatever this module's get_cuda_path matched".
    #[serde(default)]
    pub path_recipe: Option<String>,
    #[serde(default)]
    pub version_recipe: Option<String>,
    /// The only decorators allowed, whitespace-free; the function must carry all of them.
    pub decorators: Vec<String>,
    pub requires: Vec<String>,
    pub forbids: Vec<String>,
    #[serde(default)]
    pub imports: Vec<Import>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallSiteRule {
    pub rule: String,
    pub callee: String,
    pub import_from: String,
}

/// Where a version shape takes its path recipe from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathSource {
    Fixed(PathRecipe),
    /// The recipe of the module's own `get_cuda_path`.
    Module,
}

pub fn path_recipe(name: &str) -> Option<PathRecipe> {
    match name {
        "EnvWhichDefault" => Some(PathRecipe::EnvWhichDefault),
        "EnvWhichRaise" => Some(PathRecipe::EnvWhichRaise),
        "TorchHomeWhichRaise" => Some(PathRecipe::TorchHomeWhichRaise),
        _ => None,
    }
}

pub fn version_recipe(name: &str) -> Option<VersionRecipe> {
    match name {
        "NvccTorchFallback" => Some(VersionRecipe::NvccTorchFallback),
        "NvccTorchHome" => Some(VersionRecipe::NvccTorchHome),
        _ => None,
    }
}

impl Shape {
    pub fn path_source(&self) -> Option<PathSource> {
        match self.path_recipe.as_deref()? {
            "module" => Some(PathSource::Module),
            other => path_recipe(other).map(PathSource::Fixed),
        }
    }
}

/// All rule files, parsed and normalised, or the first problem found.
pub fn all() -> Result<&'static [ModuleRules], String> {
    static RULES: OnceLock<Result<Vec<ModuleRules>, String>> = OnceLock::new();
    RULES
        .get_or_init(|| HOOK_FILES.iter().map(|(n, t)| load(n, t)).collect())
        .as_deref()
        .map_err(Clone::clone)
}

pub fn for_module(module: &str) -> Result<Option<&'static ModuleRules>, String> {
    Ok(all()?.iter().find(|r| r.module == module))
}

fn load(file: &str, text: &str) -> Result<ModuleRules, String> {
    let mut rules: ModuleRules =
        toml::from_str(text).map_err(|e| format!("{file}: {}", e.message()))?;
    for function in &mut rules.functions {
        if function.shapes.is_empty() {
            return Err(format!("{file}: {} has no shapes", function.name));
        }
        for shape in &mut function.shapes {
            let where_ = format!("{file}: {}.{}", function.name, shape.name);
            let recipes_ok = match function.role {
                Role::Path => {
                    shape.version_recipe.is_none()
                        && matches!(shape.path_source(), Some(PathSource::Fixed(_)))
                }
                Role::Version => {
                    shape.path_source().is_some()
                        && shape
                            .version_recipe
                            .as_deref()
                            .and_then(version_recipe)
                            .is_some()
                }
                Role::AtLeast => shape.path_recipe.is_none() && shape.version_recipe.is_none(),
            };
            if !recipes_ok {
                return Err(format!("{where_}: recipes do not fit its role"));
            }
            if shape.requires.is_empty() {
                return Err(format!("{where_}: a shape needs at least one `requires`"));
            }
            for p in shape
                .requires
                .iter_mut()
                .chain(shape.forbids.iter_mut())
                .chain(shape.decorators.iter_mut())
            {
                *p = normalize_pattern(p);
                if p.is_empty() {
                    return Err(format!("{where_}: empty pattern"));
                }
            }
        }
    }
    Ok(rules)
}
