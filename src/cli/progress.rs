//! A one-line progress note on stderr for a command that may take seconds (`doctor`).

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The step under way and whether the command is done, and the wake-up for the writer.
type Shared = Arc<(Mutex<(String, bool)>, Condvar)>;

/// The check under way, said on stderr (one line, rewritten) once the doctor has run for a
/// second: a cold interpreter and FlashInfer's import take seconds, and a silent terminal
/// reads as a hang. Only on a terminal (the caller decides): a pipe gets the report alone.
pub struct Progress {
    shared: Option<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    pub fn start(on: bool) -> Progress {
        if !on {
            return Progress {
                shared: None,
                thread: None,
            };
        }
        let shared = Arc::new((Mutex::new((String::new(), false)), Condvar::new()));
        let mine = shared.clone();
        let thread = std::thread::spawn(move || {
            use std::io::Write;
            let start = Instant::now();
            let (lock, wake) = &*mine;
            let mut shown = String::new();
            let Ok(mut state) = lock.lock() else {
                return;
            };
            loop {
                if state.1 {
                    break;
                }
                if start.elapsed() >= Duration::from_secs(1) && state.0 != shown {
                    shown = state.0.clone();
                    let mut err = std::io::stderr().lock();
                    let _ = write!(err, "\r\x1b[Kdynafold doctor: {shown}...");
                    let _ = err.flush();
                }
                state = match wake.wait_timeout(state, Duration::from_millis(100)) {
                    Ok((s, _)) => s,
                    Err(_) => return,
                };
            }
            if !shown.is_empty() {
                eprint!("\r\x1b[K");
            }
        });
        Progress {
            shared: Some(shared),
            thread: Some(thread),
        }
    }

    pub fn step(&self, what: &str) {
        if let Some(shared) = &self.shared {
            if let Ok(mut state) = shared.0.lock() {
                state.0 = what.to_owned();
            }
        }
    }

    pub fn finish(mut self) {
        if let Some(shared) = &self.shared {
            if let Ok(mut state) = shared.0.lock() {
                state.1 = true;
            }
            shared.1.notify_all();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
