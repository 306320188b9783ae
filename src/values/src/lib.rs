//! The one reading of dynafold's yes/no and log-level values, for every reader: the preload
//! library (libc only, so this crate has no dependency), the pyo3 library and the CLI's
//! `run` and `doctor`. Case does not matter, an empty value is an unset one, and a bad value
//! is one warning and the default, the same wherever it is read.

/// The accepted spellings, for messages.
pub const YES_NO: &str = "1/0/true/false/yes/no/on/off";

/// The log levels, quietest first.
const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// `Ok(None)` for an empty value (unset), `Ok(Some(_))` for a yes or a no, else why not.
pub fn yes_no(raw: &str) -> Result<Option<bool>, String> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "" => Ok(None),
        "1" | "true" | "yes" | "on" => Ok(Some(true)),
        "0" | "false" | "no" | "off" => Ok(Some(false)),
        _ => Err(format!("is not one of {YES_NO}")),
    }
}

/// A yes/no variable's value (`raw` is None when unset), and the warning to give when it was
/// bad, naming the variable and the default used instead.
pub fn flag(name: &str, raw: Option<&str>, default: bool) -> (bool, Option<String>) {
    match raw.map(yes_no) {
        None | Some(Ok(None)) => (default, None),
        Some(Ok(Some(v))) => (v, None),
        Some(Err(why)) => (
            default,
            Some(format!(
                "{name}={:?} {why}; using the default ({})",
                raw.unwrap_or_default(),
                if default { 1 } else { 0 }
            )),
        ),
    }
}

/// An `env_logger` filter: `Ok(None)` when empty (unset), the filter when every
/// comma-separated item is a level or `target=level`, else why not. A bare word must be a
/// level: env_logger would take a typo like `inof` for a module name and log nothing.
pub fn log_filter(raw: &str) -> Result<Option<&str>, String> {
    let v = raw.trim();
    if v.is_empty() {
        return Ok(None);
    }
    let target = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    };
    let valid = v.split(',').all(|item| match item.split_once('=') {
        Some((t, l)) => target(t) && level(l).is_some(),
        None => level(item).is_some(),
    });
    if valid {
        Ok(Some(v))
    } else {
        Err("is not a log filter (e.g. info, dynafold=debug)".into())
    }
}

/// Position of `s` in LEVELS, case-insensitively.
fn level(s: &str) -> Option<usize> {
    LEVELS.iter().position(|l| l.eq_ignore_ascii_case(s))
}

/// Whether a valid filter hides dynafold's warnings, as env_logger would decide for the target
/// `dynafold`: the longest `target=level` whose target prefixes it, else the bare level, else
/// nothing is shown.
pub fn hides_warnings(filter: &str) -> bool {
    let mut bare = None;
    let mut best: Option<(usize, usize)> = None;
    for item in filter.split(',') {
        match item.split_once('=') {
            Some((t, l)) if "dynafold".starts_with(t) => {
                if best.is_none_or(|(len, _)| t.len() >= len) {
                    best = level(l).map(|lv| (t.len(), lv));
                }
            }
            Some(_) => {}
            None => bare = level(item),
        }
    }
    let warn = 2;
    best.map(|(_, lv)| lv).or(bare).is_none_or(|lv| lv < warn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yes_no_in_any_case_empty_is_unset() {
        for y in ["1", "true", "TRUE", "Yes", "ON", " on "] {
            assert_eq!(yes_no(y), Ok(Some(true)), "{y}");
        }
        for n in ["0", "false", "False", "NO", "off", "OFF"] {
            assert_eq!(yes_no(n), Ok(Some(false)), "{n}");
        }
        assert_eq!(yes_no(""), Ok(None));
        for bad in ["maybe", "2", "y", "tru"] {
            assert!(yes_no(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_bad_flag_warns_once_and_takes_the_default() {
        assert_eq!(flag("X", None, true), (true, None));
        assert_eq!(flag("X", Some(""), false), (false, None));
        assert_eq!(flag("X", Some("TRUE"), false), (true, None));
        let (v, warning) = flag("DYNAFOLD_DISABLE", Some("maybe"), false);
        assert!(!v);
        assert_eq!(
            warning.as_deref(),
            Some("DYNAFOLD_DISABLE=\"maybe\" is not one of 1/0/true/false/yes/no/on/off; using the default (0)")
        );
    }

    #[test]
    fn log_filters() {
        for ok in [
            "warn",
            "INFO",
            "OFF",
            "dynafold=debug",
            "dynafold=DEBUG,warn",
        ] {
            assert!(matches!(log_filter(ok), Ok(Some(_))), "{ok}");
        }
        assert_eq!(log_filter(""), Ok(None));
        for bad in [
            "loud",
            "a=b",
            "x=debug,",
            "dynafold = debug",
            "=info",
            "a b",
            "dynafold",
        ] {
            assert!(log_filter(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn quiet_filters_hide_warnings_in_any_case() {
        for quiet in [
            "off",
            "OFF",
            "error",
            "Error",
            "dynafold=off,info",
            "other=warn",
        ] {
            assert!(hides_warnings(quiet), "{quiet}");
        }
        for loud in [
            "warn",
            "WARN",
            "info",
            "error,dynafold=warn",
            "dynafold=info",
        ] {
            assert!(!hides_warnings(loud), "{loud}");
        }
    }
}
