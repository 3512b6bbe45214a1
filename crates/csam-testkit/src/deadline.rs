//! Deadlines for tests that could hang.

use std::time::Duration;

/// Runs `work` on its own thread and returns its result, failing the calling
/// test when it has not finished within `limit` (a deadlock or a wait that
/// never ends then reports instead of hanging the suite; the stuck thread is
/// left behind, and the test binary ends with the failure).
///
/// # Panics
/// When `limit` passes first, naming `what`; and with `work`'s own panic.
pub fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (send, receive) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || {
        // The receiver may be gone after a timeout; nothing to tell then.
        let _ = send.send(work());
    });
    match receive.recv_timeout(limit) {
        Ok(value) => value,
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("the worker ended without sending"),
        },
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: not finished after {limit:?} (a hang or deadlock)")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quick_closure_returns_and_a_stuck_one_fails() {
        assert_eq!(within(Duration::from_secs(5), "quick", || 7), 7);
        let stuck = std::panic::catch_unwind(|| {
            within(Duration::from_millis(50), "stuck", || {
                std::thread::sleep(Duration::from_secs(2))
            })
        });
        assert!(stuck.is_err());
        let failing = std::panic::catch_unwind(|| {
            within(Duration::from_secs(5), "failing", || panic!("inner"))
        });
        assert!(failing.is_err());
    }
}
