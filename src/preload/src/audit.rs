//! The audit hook and its state machine.
//!
//! The hook runs for every audited operation of the process (hundreds at start-up), so its
//! fast path is one relaxed atomic load. Activation runs Python code that raises audit events
//! itself; the BUSY state makes those re-entrant calls return at once. The hook always returns
//! 0: a non-zero return would abort the operation being audited.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicPtr, AtomicU8, Ordering};

use crate::{activate, python};

const IDLE: u8 = 0;
const BUSY: u8 = 1;
const ACTIVE: u8 = 2;
const OFF: u8 = 3;

static STATE: AtomicU8 = AtomicU8::new(IDLE);
static IS_INITIALIZED: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static THREAD_STATE: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static INTERPRETER_OF: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static MAIN_INTERPRETER: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
/// `dynafold_on_import` of the pyo3 library once active: keeps the finder first.
static ON_IMPORT: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());

pub fn register() {
    let Some(py) = python::find() else { return };
    if activate::disabled_by_env() {
        return;
    }
    if let Err(why) = python::supported(&py) {
        activate::say(&format!("not activating: {why}"));
        return;
    }
    IS_INITIALIZED.store(py.is_initialized as *mut c_void, Ordering::Relaxed);
    THREAD_STATE.store(py.thread_state as *mut c_void, Ordering::Relaxed);
    INTERPRETER_OF.store(py.interpreter_of as *mut c_void, Ordering::Relaxed);
    MAIN_INTERPRETER.store(py.main_interpreter as *mut c_void, Ordering::Relaxed);
    // SAFETY: documented as callable before Py_Initialize; the hook is a plain C function.
    if unsafe { (py.add_audit_hook)(hook, std::ptr::null_mut()) } != 0 {
        activate::say("could not register the audit hook; not activating");
    }
}

extern "C" fn hook(event: *const c_char, _args: *mut c_void, _data: *mut c_void) -> c_int {
    match STATE.load(Ordering::Relaxed) {
        ACTIVE => {
            if is_event(event, b"import") && in_main_interpreter() {
                let f = ON_IMPORT.load(Ordering::Relaxed);
                if !f.is_null() {
                    // SAFETY: set from the pyo3 library's exported `extern "C" fn()`.
                    let f: extern "C" fn() = unsafe { std::mem::transmute(f) };
                    f();
                }
            }
            0
        }
        IDLE => {
            if (is_event(event, b"import") || starts_with(event, b"cpython.run_"))
                && initialized()
                && in_main_interpreter()
                && STATE
                    .compare_exchange(IDLE, BUSY, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                let next = match std::panic::catch_unwind(activate::load_and_install) {
                    Ok(Some(on_import)) => {
                        ON_IMPORT.store(on_import, Ordering::Relaxed);
                        ACTIVE
                    }
                    _ => OFF,
                };
                STATE.store(next, Ordering::Release);
            }
            0
        }
        _ => 0,
    }
}

fn initialized() -> bool {
    let f = IS_INITIALIZED.load(Ordering::Relaxed);
    if f.is_null() {
        return false;
    }
    // SAFETY: stored from dlsym("Py_IsInitialized"), a `int (void)` function.
    let f: unsafe extern "C" fn() -> c_int = unsafe { std::mem::transmute(f) };
    unsafe { f() != 0 }
}

/// Whether the event comes from the main interpreter. The finder and everything it holds
/// belong to that one: touching another interpreter's `sys.meta_path` with them, or attaching
/// to the main one from a subinterpreter's thread, deadlocks (3.9-3.11) or corrupts the heap
/// (3.12+). C audit hooks may also run with no thread state at all (finalisation).
fn in_main_interpreter() -> bool {
    let tstate = THREAD_STATE.load(Ordering::Relaxed);
    let interpreter_of = INTERPRETER_OF.load(Ordering::Relaxed);
    let main = MAIN_INTERPRETER.load(Ordering::Relaxed);
    if tstate.is_null() || interpreter_of.is_null() || main.is_null() {
        return false;
    }
    // SAFETY: all three stored from dlsym of CPython functions with these signatures; the
    // unchecked getter may return NULL, which is checked before it is used.
    unsafe {
        let tstate: unsafe extern "C" fn() -> *mut c_void = std::mem::transmute(tstate);
        let interpreter_of: unsafe extern "C" fn(*mut c_void) -> *mut c_void =
            std::mem::transmute(interpreter_of);
        let main: unsafe extern "C" fn() -> *mut c_void = std::mem::transmute(main);
        let ts = tstate();
        !ts.is_null() && interpreter_of(ts) == main()
    }
}

fn event_bytes<'a>(event: *const c_char) -> &'a [u8] {
    if event.is_null() {
        return &[];
    }
    // SAFETY: CPython passes a NUL-terminated event name valid for the call.
    unsafe { CStr::from_ptr(event) }.to_bytes()
}

fn is_event(event: *const c_char, name: &[u8]) -> bool {
    event_bytes(event) == name
}

fn starts_with(event: *const c_char, prefix: &[u8]) -> bool {
    event_bytes(event).starts_with(prefix)
}
