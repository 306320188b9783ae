// placeholder, replaced by the cuda branch
