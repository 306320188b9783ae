//! CUDA release numbers as FlashInfer compares them (`packaging.version.Version` over a purely
//! numeric release), without any of packaging's pre/post/dev/local machinery: a version that
//! needs it is not one we fold.

use std::fmt;

/// A purely numeric release such as `12.8`, kept with the text it was read from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CudaVersion {
    text: String,
    parts: Vec<u64>,
}

impl CudaVersion {
    /// `digits(.digits)*` in ASCII, exactly; `None` for anything else, including components
    /// too large for `u64` (packaging would accept those, but no CUDA release has them, so
    /// declining is safer than guessing).
    pub fn parse_release(s: &str) -> Option<CudaVersion> {
        if s.is_empty() {
            return None;
        }
        let mut parts = Vec::new();
        for piece in s.split('.') {
            if piece.is_empty() || !piece.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            parts.push(piece.parse::<u64>().ok()?);
        }
        Some(CudaVersion {
            text: s.to_owned(),
            parts,
        })
    }

    /// The strict form accepted from `DYNAFOLD_CUDA_VERSION`. The value ends up in generated
    /// Python source, so anything beyond `MAJOR.MINOR` is refused rather than cleaned up.
    pub fn parse_override(s: &str) -> Result<CudaVersion, String> {
        let expected = || {
            format!(
                "expected MAJOR.MINOR with 1-3 ASCII digits each (e.g. 12.8), \
                 nothing else (no spaces), got {s:?}"
            )
        };
        let (major, minor) = s.split_once('.').ok_or_else(expected)?;
        let ok = |p: &str| (1..=3).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit());
        if !ok(major) || !ok(minor) {
            return Err(expected());
        }
        CudaVersion::parse_release(s).ok_or_else(expected)
    }

    /// The text the version was read from, e.g. what nvcc printed.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The numeric components.
    pub fn parts(&self) -> &[u64] {
        &self.parts
    }

    /// `str(packaging.version.Version(text))`: components as integers, leading zeros gone,
    /// trailing zeros kept (`012.08` -> `12.8`, `12.0` -> `12.0`).
    pub fn canonical(&self) -> String {
        let strs: Vec<String> = self.parts.iter().map(|p| p.to_string()).collect();
        strs.join(".")
    }

    /// `Version(self) >= Version(other)`; packaging ignores trailing zero components when
    /// comparing, so `12.8.0 >= 12.8` and `12.8 >= 12.8.0` both hold.
    pub fn at_least(&self, other: &CudaVersion) -> bool {
        let n = self.parts.len().max(other.parts.len());
        for i in 0..n {
            let a = self.parts.get(i).copied().unwrap_or(0);
            let b = other.parts.get(i).copied().unwrap_or(0);
            if a != b {
                return a > b;
            }
        }
        true
    }
}

impl fmt::Display for CudaVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> CudaVersion {
        CudaVersion::parse_release(s).unwrap()
    }

    #[test]
    fn parse_release_accepts_numeric_releases() {
        assert_eq!(v("12.8").parts(), &[12, 8]);
        assert_eq!(v("13").parts(), &[13]);
        assert_eq!(v("12.8.93").parts(), &[12, 8, 93]);
        assert_eq!(v("012.08").canonical(), "12.8");
        assert_eq!(v("012.08").as_str(), "012.08");
        assert_eq!(v("12.0").canonical(), "12.0");
    }

    #[test]
    fn parse_release_rejects_everything_else() {
        for s in [
            "",
            ".",
            "12.",
            ".8",
            "12..8",
            "v12.8",
            " 12.8",
            "12.8 ",
            "12.8a1",
            "12,8",
            "１２.８",
            "٣.٤",
            "99999999999999999999999.1",
        ] {
            assert_eq!(CudaVersion::parse_release(s), None, "{s:?}");
        }
    }

    #[test]
    fn parse_override_is_strict() {
        assert_eq!(
            CudaVersion::parse_override("12.8").unwrap().as_str(),
            "12.8"
        );
        assert_eq!(CudaVersion::parse_override("1.0").unwrap().parts(), &[1, 0]);
        assert!(CudaVersion::parse_override("999.999").is_ok());
        for s in [
            "",
            "12",
            "12.8.1",
            "1234.1",
            "12.1234",
            " 12.8",
            "12.8\n",
            "12.8 ",
            "+12.8",
            "12.-8",
            "١٢.٨",
            "12.8\"); import os; os.system(\"touch X\")#",
        ] {
            let err = CudaVersion::parse_override(s).unwrap_err();
            assert!(err.contains("MAJOR.MINOR"), "{err}");
        }
    }

    #[test]
    fn at_least_follows_packaging() {
        assert!(v("12.8").at_least(&v("12.8")));
        assert!(v("12.9").at_least(&v("12.8")));
        assert!(v("13.0").at_least(&v("12.8")));
        assert!(!v("12.6").at_least(&v("12.8")));
        assert!(!v("12.10").at_least(&v("13")));
        assert!(v("12.10").at_least(&v("12.9")));
        assert!(v("12.8.0").at_least(&v("12.8")));
        assert!(v("12.8").at_least(&v("12.8.0")));
        assert!(!v("12.8").at_least(&v("12.8.1")));
        assert!(v("012.08").at_least(&v("12.8")));
    }

    #[test]
    fn display_is_the_source_text() {
        assert_eq!(v("12.8").to_string(), "12.8");
    }
}
