//! How much stack the calling thread has left, so the parse can skip the helper thread (about
//! 100 µs to spawn with a 64 MiB stack, as much as the sparse parse itself) when there is room.
//!
//! Cached per thread: for the main thread glibc's `pthread_getattr_np` parses
//! `/proc/self/maps`, which takes 0.7 ms once torch is loaded (500+ mappings), so the main
//! thread's bound is derived from `RLIMIT_STACK` and the stack top glibc records instead.
//! Any doubt answers `None`, and the caller uses the helper thread.

use std::cell::Cell;

thread_local! {
    /// Lowest usable address of this thread's stack; `Some(None)` once found unknowable.
    static STACK_LOW: Cell<Option<Option<usize>>> = const { Cell::new(None) };
}

/// Bytes between a local of the caller's frame and the bottom of this thread's stack.
pub fn remaining() -> Option<usize> {
    let marker = 0u8;
    let here = std::ptr::addr_of!(marker) as usize;
    let low = STACK_LOW.with(|cell| match cell.get() {
        Some(known) => known,
        None => {
            let found = stack_low();
            cell.set(Some(found));
            found
        }
    })?;
    here.checked_sub(low)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn stack_low() -> Option<usize> {
    // SAFETY: plain libc calls on this thread's own ids.
    let main = unsafe { libc::getpid() == libc::gettid() };
    if main {
        main_stack_low()
    } else {
        thread_stack_low()
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn stack_low() -> Option<usize> {
    None
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn thread_stack_low() -> Option<usize> {
    // SAFETY: `attr` is initialised by pthread_getattr_np before use and destroyed once; the
    // out-pointers are valid locals.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let rc = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
        let mut guard: libc::size_t = 0;
        let rc_guard = libc::pthread_attr_getguardsize(&attr, &mut guard);
        libc::pthread_attr_destroy(&mut attr);
        if rc != 0 || rc_guard != 0 || addr.is_null() {
            return None;
        }
        // glibc reports the guard pages as part of the stack.
        (addr as usize).checked_add(guard)
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn main_stack_low() -> Option<usize> {
    extern "C" {
        /// Set by the dynamic loader near the top of the main thread's stack (what glibc's own
        /// `pthread_getattr_np` starts from).
        static __libc_stack_end: *mut libc::c_void;
    }
    // SAFETY: reads a pointer-sized glibc global written once before `main`; getrlimit fills
    // a valid local.
    let (top, limit) = unsafe {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_STACK, &mut limit) != 0 {
            return None;
        }
        (__libc_stack_end as usize, limit.rlim_cur)
    };
    // Unlimited or huge limits let the kernel place mappings right under the stack.
    if top == 0 || limit == libc::RLIM_INFINITY || limit > (1 << 30) {
        return None;
    }
    // The arguments and environment above `top` count against the limit too, and Linux lets
    // them take up to a quarter of it.
    let limit = usize::try_from(limit).ok()?;
    let usable = (limit / 4 * 3).checked_sub(64 << 10)?;
    top.checked_sub(usable)
}
