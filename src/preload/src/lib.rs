//! `libdynafold.so`, the library users put in `LD_PRELOAD`.
//!
//! It links nothing but libc on purpose: every process of an SGLang server tree loads it,
//! nvcc, ninja, gcc and sh included, and a library that referenced Python symbols would make
//! the dynamic linker kill those (`undefined symbol: _Py_NoneStruct`). Python is therefore
//! found at run time with `dlsym(RTLD_DEFAULT, ..)`; where it is absent the constructor
//! returns and the library is inert.
//!
//! In a Python process the constructor registers a C audit hook (allowed before
//! `Py_Initialize`). The first `import` / `cpython.run_*` event after initialisation loads the
//! pyo3 library that sits beside this one and lets it install the finder (see `activate`).

mod activate;
mod audit;
mod python;

#[ctor::ctor(unsafe)]
fn dynafold_preload_init() {
    // A panic must never unwind into the dynamic loader.
    let _ = std::panic::catch_unwind(audit::register);
}
