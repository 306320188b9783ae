//! Signal forwarding for `dynafold run`: every signal another process sends the wrapper is
//! passed on, unchanged, to the command, which is what a supervisor meant to reach (SGLang
//! and uvicorn act on more than TERM and INT: USR1, USR2, HUP, WINCH, real-time signals).

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};

/// Signals kept as they are: SIGKILL and SIGSTOP cannot be caught; SIGCHLD is about the
/// wrapper's own child; a fault (SEGV, BUS, FPE, ILL, TRAP, SYS) or an abort raised in the
/// wrapper would fault again after a handler returned; the job-control signals (TSTP, TTIN,
/// TTOU, CONT) must stop and continue the wrapper itself, or the shell never sees the job
/// stopped; SIGPIPE is ignored by the Rust runtime, so how the launcher left it is not known
/// (std gives the command the default action).
const KEPT: [libc::c_int; 15] = [
    libc::SIGKILL,
    libc::SIGSTOP,
    libc::SIGCHLD,
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGTRAP,
    libc::SIGSYS,
    libc::SIGABRT,
    libc::SIGTSTP,
    libc::SIGTTIN,
    libc::SIGTTOU,
    libc::SIGCONT,
    libc::SIGPIPE,
];

/// Highest signal number on Linux (SIGRTMAX); a bit per signal fits a u64.
const MAX_SIGNAL: libc::c_int = 64;

static CHILD: AtomicI32 = AtomicI32::new(0);

/// Every signal forwarded: all but KEPT, and not the real-time signals glibc keeps for itself
/// (32 up to SIGRTMIN), which sigaction refuses.
pub fn forwarded() -> impl Iterator<Item = libc::c_int> {
    let rt_min = libc::SIGRTMIN();
    let max = libc::SIGRTMAX().min(MAX_SIGNAL);
    (1..=max).filter(move |s| !KEPT.contains(s) && !(32..rt_min).contains(s))
}

/// The pid signals go to from now on; 0 stops forwarding.
pub fn forward_to(pid: u32) {
    CHILD.store(i32::try_from(pid).unwrap_or(0), Ordering::Relaxed);
}

extern "C" fn forward(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    let pid = CHILD.load(Ordering::Relaxed);
    if pid <= 0 {
        return;
    }
    // A signal from the terminal (Ctrl-C, a resize) already reached the child, which shares
    // our process group; only signals sent to us by another process (kill, sigqueue, tgkill:
    // si_code <= 0) need forwarding.
    // SAFETY: `info` is provided by the kernel for SA_SIGINFO handlers.
    let from_process = info.is_null() || unsafe { (*info).si_code } <= 0;
    if from_process {
        // SAFETY: kill is async-signal-safe.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

fn bit(sig: libc::c_int) -> u64 {
    1u64 << (sig - 1)
}

/// The signal state the child must start from, captured before this process changes it.
#[derive(Clone, Copy)]
pub struct SignalState {
    /// This process's mask before the forwarded signals were blocked.
    mask: libc::sigset_t,
    /// Bit `sig - 1` set: `sig` got our handler. The others were ignored (nohup, a
    /// supervisor's choice) and stay so.
    handled: u64,
}

/// Blocks the forwarded signals, then installs the forwarding handler. Blocked until the
/// child's pid is known (`unblock`), a signal stays pending instead of being lost.
pub fn install_forwarding() -> SignalState {
    // SAFETY: sigset and sigaction calls on zeroed locals; the handler only calls kill().
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in forwarded() {
            libc::sigaddset(&mut set, sig);
        }
        let mut state = SignalState {
            mask: std::mem::zeroed(),
            handled: 0,
        };
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut state.mask);
        for sig in forwarded() {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
                continue;
            }
            // An ignored signal (nohup, a supervisor's choice) stays ignored for the child.
            if old.sa_sigaction == libc::SIG_IGN {
                continue;
            }
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = forward as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            if libc::sigaction(sig, &sa, std::ptr::null_mut()) == 0 {
                state.handled |= bit(sig);
            }
        }
        state
    }
}

pub fn unblock(state: &SignalState) {
    // SAFETY: restores the mask saved by install_forwarding.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &state.mask, std::ptr::null_mut());
    }
}

/// Resets the signals that got our handler to their default action. No allocation and no
/// lock: it also runs between fork and exec.
fn reset_handled(state: &SignalState) {
    for sig in 1..=MAX_SIGNAL {
        if state.handled & bit(sig) != 0 {
            // SAFETY: resetting a disposition to SIG_DFL has no preconditions.
            unsafe {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
    }
}

/// Once the child is gone there is nobody to forward to, and the handler would swallow the
/// signal: Ctrl-C or SIGTERM could then not stop a slow merge or a write blocked on a full
/// stderr pipe. The signals that were ignored when we started stay ignored.
pub fn restore_defaults(state: &SignalState) {
    reset_handled(state);
}

/// Between fork and exec the child still has our handlers and our mask; std does not reset
/// the mask, so without this the command would start with every signal blocked. It also
/// asks for SIGTERM when `dynafold run` itself dies (SIGKILL cannot be forwarded), so the
/// command does not live on as an orphan nobody supervises.
pub fn prepare_child(cmd: &mut Command, state: SignalState) {
    // SAFETY: getpid is called before the fork.
    let parent = unsafe { libc::getpid() };
    // SAFETY: only async-signal-safe calls (signal, pthread_sigmask, prctl, getppid) run
    // between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            reset_handled(&state);
            libc::pthread_sigmask(libc::SIG_SETMASK, &state.mask, std::ptr::null_mut());
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died before prctl took effect.
            if libc::getppid() != parent {
                return Err(std::io::Error::other(
                    "dynafold run exited before the command started",
                ));
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_catchable_signal_but_the_kept_ones_is_forwarded() {
        let all: Vec<_> = forwarded().collect();
        for sig in [
            libc::SIGHUP,
            libc::SIGINT,
            libc::SIGQUIT,
            libc::SIGTERM,
            libc::SIGUSR1,
            libc::SIGUSR2,
            libc::SIGWINCH,
            libc::SIGALRM,
            libc::SIGURG,
            libc::SIGRTMIN(),
            libc::SIGRTMAX(),
        ] {
            assert!(all.contains(&sig), "{sig} not forwarded");
        }
        for sig in KEPT {
            assert!(!all.contains(&sig), "{sig} forwarded");
        }
        assert!(!all.contains(&libc::SIGPIPE) && !all.contains(&32));
    }
}
