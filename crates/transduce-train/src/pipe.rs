//! Output into a closed pipe (`transduce eval f1 … | head -3`).
//!
//! Rust ignores SIGPIPE, so a write to a closed pipe fails and `println!` panics with a
//! backtrace. A command-line tool should stop quietly instead, as `cat` or `grep` do: the
//! reader has all it wanted.

/// Restores the default SIGPIPE action: the process ends silently when its reader leaves.
pub fn stop_quietly_on_closed_pipe() {
    #[cfg(unix)]
    {
        // From <signal.h>: SIGPIPE is 13 and SIG_DFL is 0 on Linux and macOS.
        const SIGPIPE: i32 = 13;
        const SIG_DFL: usize = 0;
        unsafe extern "C" {
            fn signal(signum: i32, handler: usize) -> usize;
        }
        // SAFETY: called once, first thing in main, before any thread exists.
        unsafe {
            signal(SIGPIPE, SIG_DFL);
        }
    }
}
