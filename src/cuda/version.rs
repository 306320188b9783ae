//! Placeholder so this branch compiles; the real version type replaces it on merge. Same API.

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CudaVersion {
    text: String,
    parts: Vec<u64>,
}

impl CudaVersion {
    pub fn parse_override(s: &str) -> Result<CudaVersion, String> {
        Self::parse_release(s).ok_or_else(|| "expected MAJOR.MINOR".into())
    }

    /// A pure numeric release, `digits(.digits)*`.
    pub fn parse_release(s: &str) -> Option<CudaVersion> {
        let mut parts = Vec::new();
        for p in s.split('.') {
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            parts.push(p.parse::<u64>().ok()?);
        }
        Some(CudaVersion {
            text: s.to_string(),
            parts,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// packaging.version ordering for pure releases: trailing zeros do not count.
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
