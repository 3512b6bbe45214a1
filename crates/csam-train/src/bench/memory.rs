//! Peak memory of a benchmark case: the process's resident-set high-water
//! mark (`VmHWM` in /proc/self/status), reset between cases by writing `5`
//! to /proc/self/clear_refs (Linux >= 4.0). On CUDA the host RSS says little;
//! the table then reports host RSS all the same, labelled as such.

/// Resets the resident-set high-water mark to the current RSS; false when
/// the kernel does not allow it (then peaks accumulate across cases).
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The resident-set high-water mark in bytes, None where /proc is missing.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_vm_hwm(&status)
}

/// Parses the `VmHWM:   1234 kB` line of /proc/PID/status.
fn parse_vm_hwm(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_kernel_format() {
        let status = "Name:\tcsam\nVmPeak:\t  900 kB\nVmHWM:\t    2048 kB\nVmRSS:\t 100 kB\n";
        assert_eq!(parse_vm_hwm(status), Some(2048 * 1024));
        assert_eq!(parse_vm_hwm("Name: x\n"), None);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn peak_grows_with_a_touched_allocation() {
        reset_peak_rss();
        let before = peak_rss_bytes().unwrap();
        let block = vec![1u8; 64 << 20];
        let after = peak_rss_bytes().unwrap();
        assert!(after >= before + (60 << 20), "{before} -> {after}");
        drop(block);
    }
}
