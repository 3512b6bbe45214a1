//! Loopback ports a test owns.
//!
//! Binding port 0 and releasing it races: between the release and the
//! rendezvous store's own bind, the kernel may hand the same ephemeral port to
//! any other socket on the machine. A [`PortLease`] instead takes a port below
//! the kernel's ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`),
//! which no socket is given unless it asks for that number, and holds an
//! exclusive `flock` on a file named after the port for as long as it lives,
//! so that concurrent tests, in this process or in another test binary, never
//! share one.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

/// The lowest port handed out: above the registered ports of common local
/// services (databases, caches) that a developer's machine may run.
const LOWEST: u16 = 20_000;

/// A port reserved for the holder until it is dropped.
#[derive(Debug)]
pub struct PortLease {
    port: u16,
    // The flock lives as long as the open file.
    _lock: File,
}

impl PortLease {
    /// The leased port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Reserves a free loopback port below the ephemeral range.
    ///
    /// # Panics
    /// When every candidate port is leased or bound: the machine is out of
    /// ports for tests, which no retry would mend.
    pub fn take() -> PortLease {
        let dir = lock_dir();
        std::fs::create_dir_all(&dir).expect("create the port lock directory");
        let highest = highest_port(ephemeral_start());
        let span = u32::from(highest - LOWEST);
        // Start at a place of this process's own, so that concurrent test
        // binaries rarely try the same ports first.
        let start = std::process::id() % span;
        (0..span)
            .map(|i| LOWEST + ((start + i) % span) as u16)
            .find_map(|port| lease(&dir, port))
            .expect("no free loopback port below the ephemeral range")
    }
}

/// The lease of `port`, if no other holder has it and nothing listens on it.
fn lease(dir: &std::path::Path, port: u16) -> Option<PortLease> {
    let path: PathBuf = dir.join(port.to_string());
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .ok()?;
    // SAFETY: flock on a descriptor this function owns; non-blocking.
    let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
    // A port some other program holds is not ours to lend.
    let free = locked && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
    free.then_some(PortLease { port, _lock: file })
}

/// The directory of the lock files, one per user: another user's files
/// (left in a shared temporary directory) cannot be opened for writing.
fn lock_dir() -> PathBuf {
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    std::env::temp_dir().join(format!("csam-test-ports-{uid}"))
}

/// The highest port to lend: the one below the ephemeral range, or, where
/// that range starts too low to leave a thousand ports above [`LOWEST`],
/// ten thousand ports from [`LOWEST`] (the bind check in [`lease`] still
/// skips any that a socket holds).
fn highest_port(ephemeral_start: u16) -> u16 {
    match ephemeral_start.checked_sub(1) {
        Some(below) if below > LOWEST + 1_000 => below,
        _ => LOWEST + 10_000,
    }
}

/// The first port of the kernel's ephemeral range (Linux's default 32768).
fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_leases_differ_and_a_released_port_can_be_leased_again() {
        let a = PortLease::take();
        let b = PortLease::take();
        assert_ne!(a.port(), b.port());
        assert!(a.port() >= LOWEST && a.port() <= highest_port(ephemeral_start()));
        let port = a.port();
        drop(a);
        let dir = lock_dir();
        assert!(lease(&dir, port).is_some(), "port {port} stayed leased");
        assert!(
            lease(&dir, b.port()).is_none(),
            "a held lease was lent twice"
        );
    }

    #[test]
    fn a_low_ephemeral_range_still_leaves_ports_to_lend() {
        assert_eq!(highest_port(32_768), 32_767);
        assert_eq!(highest_port(1_024), LOWEST + 10_000);
        assert_eq!(highest_port(LOWEST + 500), LOWEST + 10_000);
        assert_eq!(highest_port(0), LOWEST + 10_000);
    }
}
