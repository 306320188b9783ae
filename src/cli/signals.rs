//! Signal forwarding for `dynafold run`: every signal another process sends the wrapper is
//! passed on, unchanged, to the command, which is what a supervisor meant to reach (SGLang
//! and uvicorn act on more than TERM and INT: USR1, USR2, HUP, WINCH, real-time signals).
//!
//! The command must get each signal as often as it would without the wrapper: once.
//! - It starts with the dispositions the wrapper inherited: a signal the launcher ignored
//!   (`&` in a script ignores INT and QUIT, nohup HUP) is ignored at exec, as it would be.
//! - Every signal sent to the wrapper is forwarded, an inherited-ignored one too: the
//!   command's own handlers decide (CPython installs none for an ignored INT; a server that
//!   sets its own still hears it).
//! - A signal sent to a process group reaches the command from the kernel already; a second,
//!   forwarded copy would make a server count two Ctrl-Cs and exit without its graceful
//!   shutdown. The siginfo of a kill() does not say whether it named the process or its group,
//!   so the wrapper is kept out of the group instead (`leave_group`): when it shares its
//!   parent's group (a script's `&`, a supervisor's plain spawn), it moves into a group of its
//!   own once the command is started in the old one, so a group signal (`kill -TERM -PGID`,
//!   a script's `kill 0`, a terminal's Ctrl-C) reaches the command's processes once, as
//!   without the wrapper, and never the wrapper; a signal sent to the wrapper's pid is
//!   forwarded. When the wrapper leads its own group (an interactive shell's job, setsid)
//!   it stays there, where the shell's job control expects it: a terminal's signals are
//!   recognised by si_code and not forwarded, but a kill() aimed at that group by another
//!   process reaches the command twice (nothing tells it from a kill() of the wrapper's pid).

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
    /// Bit `sig - 1` set: `sig` got our handler.
    handled: u64,
    /// Bit `sig - 1` set: `sig` was ignored when we started (nohup, a script's `&`), and is
    /// ignored again in the child and after it.
    ignored: u64,
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
            ignored: 0,
        };
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut state.mask);
        for sig in forwarded() {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
                continue;
            }
            // An ignored signal (nohup, a script's `&`) is forwarded too, and ignored again
            // in the child before exec.
            let ignored = old.sa_sigaction == libc::SIG_IGN;
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = forward as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            if libc::sigaction(sig, &sa, std::ptr::null_mut()) == 0 {
                state.handled |= bit(sig);
                if ignored {
                    state.ignored |= bit(sig);
                }
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

/// Gives the signals that got our handler back the disposition we inherited: the default
/// action, or ignored. No allocation and no lock: it also runs between fork and exec.
fn reset_handled(state: &SignalState) {
    for sig in 1..=MAX_SIGNAL {
        if state.handled & bit(sig) != 0 {
            let action = if state.ignored & bit(sig) != 0 {
                libc::SIG_IGN
            } else {
                libc::SIG_DFL
            };
            // SAFETY: setting a disposition to SIG_DFL or SIG_IGN has no preconditions.
            unsafe {
                libc::signal(sig, action);
            }
        }
    }
}

/// Once the child is gone there is nobody to forward to, and the handler would swallow the
/// signal: Ctrl-C or SIGTERM could then not stop a slow merge or a write blocked on a full
/// stderr pipe. The signals that were ignored when we started are ignored again.
pub fn restore_defaults(state: &SignalState) {
    reset_handled(state);
}

/// The process group the wrapper left (`leave_group`), to go back to.
pub struct LeftGroup(libc::pid_t);

/// Moves the wrapper out of the process group it shares with its parent, leaving the child
/// (already started) in it, so that a signal sent to that group reaches the child once from
/// the kernel and is not forwarded again (see the module's comment). Not when the wrapper
/// leads its group: a job-control shell made that group for it and watches it.
pub fn leave_group() -> Option<LeftGroup> {
    // SAFETY: getters without preconditions; setpgid on ourselves.
    unsafe {
        let group = libc::getpgrp();
        if group == libc::getpid() || libc::getpgid(libc::getppid()) != group {
            return None;
        }
        (libc::setpgid(0, 0) == 0).then_some(LeftGroup(group))
    }
}

/// Back into the group left, once the child is gone: the summary is written from the group
/// the launcher started us in (a background group writing to a terminal with `tostop` would
/// be stopped). The group may be gone by then; nothing to do.
pub fn rejoin(left: Option<LeftGroup>) {
    if let Some(LeftGroup(group)) = left {
        // SAFETY: setpgid on ourselves; a failure leaves us where we are.
        unsafe {
            libc::setpgid(0, group);
        }
    }
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
