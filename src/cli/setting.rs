//! `dynafold run`'s options that have a variable twin. A bad value on the command line is a
//! usage error; the same value in a variable is what every process would meet, so it gets
//! what the processes give it (one warning and the default), said once here, and the variable
//! is taken out of the command's environment so that no process says it again.

use std::convert::Infallible;

use crate::config;
use crate::cuda::CudaVersion;

/// A value as given, and what it reads as: `Ok(None)` is empty (unset).
#[derive(Clone, Debug)]
pub struct Checked<T> {
    pub raw: String,
    pub parsed: Result<Option<T>, String>,
}

/// Where clap found a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    CommandLine,
    Variable,
}

/// A resolved setting: the value to pass on (None: leave the default), and the warning given
/// for a bad variable, which also means the variable must be removed from the command's
/// environment.
#[derive(Debug, PartialEq, Eq)]
pub struct Resolved<T> {
    pub value: Option<T>,
    pub warning: Option<String>,
}

/// A checked value, from `source`; `Err` only for a bad value on the command line. A bad
/// variable's warning is the one every process gives (`config::warning`).
pub fn resolve<T>(
    checked: Checked<T>,
    var: &str,
    flag: &str,
    source: Source,
) -> Result<Resolved<T>, String> {
    match (checked.parsed, source) {
        (Ok(value), _) => Ok(Resolved {
            value,
            warning: None,
        }),
        (Err(why), Source::CommandLine) => Err(format!("--{flag}={:?} {why}", checked.raw)),
        (Err(why), Source::Variable) => Ok(Resolved {
            value: None,
            warning: Some(
                config::warning(var, &checked.raw)
                    .unwrap_or_else(|| format!("{var}={:?} {why}", checked.raw)),
            ),
        }),
    }
}

fn checked<T>(raw: &str, parsed: Result<Option<T>, String>) -> Result<Checked<T>, Infallible> {
    Ok(Checked {
        raw: raw.to_owned(),
        parsed,
    })
}

/// clap value parsers: they never fail, so that a bad variable reaches `resolve`.
pub fn yes_no(raw: &str) -> Result<Checked<bool>, Infallible> {
    checked(raw, dynafold_values::yes_no(raw))
}

pub fn log_filter(raw: &str) -> Result<Checked<String>, Infallible> {
    checked(
        raw,
        dynafold_values::log_filter(raw).map(|f| f.map(str::to_owned)),
    )
}

pub fn cuda_version(raw: &str) -> Result<Checked<CudaVersion>, Infallible> {
    checked(raw, config::parse_cuda_version(raw))
}

pub fn nvcc_timeout(raw: &str) -> Result<Checked<u64>, Infallible> {
    checked(raw, config::parse_seconds(raw))
}

/// A path option with a variable twin (`--lib`, `--report-dir`, `--cache-dir`). clap's own
/// path parser refuses an empty value as "a value is required for '--lib <PATH>'", naming an
/// option nobody passed; an empty variable is an unset one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptionalPath(pub Option<std::path::PathBuf>);

pub fn path(raw: &str) -> Result<OptionalPath, Infallible> {
    Ok(OptionalPath((!raw.is_empty()).then(|| raw.into())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn go(raw: &str, source: Source) -> Result<Resolved<bool>, String> {
        resolve(yes_no(raw).unwrap(), "DYNAFOLD_DISABLE", "disable", source)
    }

    #[test]
    fn a_bad_variable_warns_and_a_bad_option_is_refused() {
        let w = go("maybe", Source::Variable).unwrap();
        assert_eq!(w.value, None);
        assert_eq!(
            w.warning.as_deref(),
            Some("DYNAFOLD_DISABLE=\"maybe\" is not one of 1/0/true/false/yes/no/on/off; using the default (0)")
        );
        let e = go("maybe", Source::CommandLine).unwrap_err();
        assert!(e.starts_with("--disable=\"maybe\" is not one of"), "{e}");
    }

    #[test]
    fn any_case_reads_and_empty_is_unset() {
        for (raw, v) in [("TRUE", Some(true)), ("Off", Some(false)), ("", None)] {
            for source in [Source::Variable, Source::CommandLine] {
                let r = go(raw, source).unwrap();
                assert_eq!((r.value, r.warning), (v, None), "{raw}");
            }
        }
    }

    #[test]
    fn the_other_checks() {
        assert!(nvcc_timeout("0").unwrap().parsed.is_err());
        assert_eq!(nvcc_timeout("600").unwrap().parsed, Ok(Some(600)));
        assert!(cuda_version("12.8\"); x").unwrap().parsed.is_err());
        assert_eq!(log_filter("OFF").unwrap().parsed, Ok(Some("OFF".into())));
        assert!(log_filter("loud").unwrap().parsed.is_err());
        assert_eq!(path("").unwrap(), OptionalPath(None));
        assert_eq!(path("/x").unwrap(), OptionalPath(Some("/x".into())));
    }
}
