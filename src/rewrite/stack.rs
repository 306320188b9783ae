//! How much stack the calling thread has left, so the parse can skip the helper thread (about
//! 100 µs to spawn with a 64 MiB stack, as much as the sparse parse itself) when there is room.
//!
//! Cached per thread: for the main thread glibc's `pthread_getattr_np` parses
//! `/proc/self/maps`, which takes 0.7 ms once torch is loaded (500+ mappings), so the main
//! thread's bound is derived from `RLIMIT_STACK` and the stack top glibc records instead.
//! Any doubt answers `None`, and the caller uses the helper thread.

use std::cell::Cell;

thread_local! {
    /// This thread's stack as `low..high`; `Some(None)` once found unknowable.
    static STACK: Cell<Option<Option<(usize, usize)>>> = const { Cell::new(None) };
}

/// Bytes between a local of the caller's frame and the bottom of this thread's stack.
pub fn remaining() -> Option<usize> {
    let marker = 0u8;
    let here = std::ptr::addr_of!(marker) as usize;
    let (low, high) = STACK.with(|cell| match cell.get() {
        Some(known) => known,
        None => {
            let found = stack_bounds(here);
            cell.set(Some(found));
            found
        }
    })?;
    (low < here && here <= high).then(|| here - low)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn stack_bounds(here: usize) -> Option<(usize, usize)> {
    // SAFETY: plain libc calls on this thread's own ids. gettid through syscall(2): glibc has
    // the gettid() wrapper only from 2.30, and the wheel is built for glibc 2.28.
    let main = unsafe { libc::syscall(libc::SYS_gettid) == libc::c_long::from(libc::getpid()) };
    if !main {
        return thread_stack();
    }
    let bounds = main_stack()?;
    // A child forked from another thread has tid == pid on that thread's stack, which
    // pthread_getattr_np (cheap for it) knows.
    if bounds.0 < here && here <= bounds.1 {
        Some(bounds)
    } else {
        thread_stack()
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn stack_bounds(_here: usize) -> Option<(usize, usize)> {
    None
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn thread_stack() -> Option<(usize, usize)> {
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
        let low = (addr as usize).checked_add(guard)?;
        Some((low, (addr as usize).checked_add(size)?))
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn main_stack() -> Option<(usize, usize)> {
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
    Some((top.checked_sub(usable)?, top))
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    /// `remaining()` as seen from a new thread with a stack of `size` bytes.
    fn remaining_on_thread(size: usize) -> usize {
        std::thread::Builder::new()
            .stack_size(size)
            .spawn(super::remaining)
            .unwrap()
            .join()
            .unwrap()
            .expect("bounds of a std thread")
    }

    #[test]
    fn a_thread_knows_its_stack() {
        let left = remaining_on_thread(8 << 20);
        // glibc may hand out a cached stack up to four times the size asked for.
        assert!(left > 7 << 20 && left <= 32 << 20, "{left}");
        let small = remaining_on_thread(1 << 20);
        assert!(small < 4 << 20, "{small}");
    }
}
