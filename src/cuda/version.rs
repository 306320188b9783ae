// placeholder, replaced by the cuda branch
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CudaVersion {
    text: String,
    parts: Vec<u64>,
}
impl CudaVersion {
    pub fn parse_release(s: &str) -> Option<CudaVersion> {
        let parts: Option<Vec<u64>> = s.split('.').map(|p| p.parse().ok()).collect();
        Some(CudaVersion { text: s.into(), parts: parts? })
    }
    pub fn parse_override(s: &str) -> Result<CudaVersion, String> {
        Self::parse_release(s).ok_or_else(|| "expected MAJOR.MINOR".into())
    }
    pub fn as_str(&self) -> &str {
        &self.text
    }
    pub fn at_least(&self, other: &CudaVersion) -> bool {
        self.parts >= other.parts
    }
}
