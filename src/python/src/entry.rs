//! The two C entry points `libdynafold.so` looks up with dlsym.

use std::ffi::c_int;
use std::panic::catch_unwind;

use pyo3::prelude::*;

use crate::{finder, guard, keep_first, logging, overhead};

/// Installs the finder in this (main) interpreter. 0: installed; 1: declined; -1: failed.
/// Called from the audit hook, GIL held, interpreter initialised.
#[no_mangle]
pub extern "C" fn dynafold_install() -> c_int {
    catch_unwind(|| {
        Python::attach(|py| {
            let _timer = overhead::Timer::start(overhead::Part::Install);
            logging::init();
            if !main_interpreter() {
                log::debug!("not the main interpreter; staying out");
                return 1;
            }
            match guard::guarded(py, "installing the finder", || finder::install(py)) {
                Some(()) => 0,
                None => -1,
            }
        })
    })
    .unwrap_or(-1)
}

/// Called by the audit hook on every `import` event once installed.
#[no_mangle]
pub extern "C" fn dynafold_on_import() {
    let _ = catch_unwind(keep_first::check);
}

fn main_interpreter() -> bool {
    // SAFETY: GIL held; the current interpreter state is valid for the call.
    unsafe { pyo3::ffi::PyInterpreterState_GetID(pyo3::ffi::PyInterpreterState_Get()) == 0 }
}
