// placeholder, replaced by the cuda branch
use std::path::PathBuf;
pub struct TorchFacts {
    pub cuda_version: Option<Option<String>>,
    pub cuda_home: Option<Option<String>>,
}
impl TorchFacts {
    pub fn from_torch_install(_site_dirs: &[PathBuf]) -> TorchFacts {
        TorchFacts { cuda_version: None, cuda_home: None }
    }
}
