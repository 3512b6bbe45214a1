//! glibc allocator tuning for libtorch workloads.
//!
//! libtorch frees and re-allocates activation buffers of several MB every
//! step. With glibc's dynamic mmap threshold these go back to the kernel and
//! fault in again each step (4x the page faults of the Python process); a
//! fixed 32 MB mmap threshold and a 1 GB trim threshold keep them in the heap.
//! Measured: tch went from ~10% slower than PyTorch to parity on the small
//! models.
//!
//! ImageNet-sized models allocate activations of 100 MB and more, above any
//! mmap threshold, so every step still faults them in page by page (a third
//! of a ResNet-50 step's time here went to the kernel). PyTorch's own switch
//! for that, `THP_MEM_ALLOC_ENABLE=1`, makes libtorch back tensors of 2 MB
//! and more with transparent huge pages (512 times fewer faults). With it the
//! fixed thresholds above cost memory (2 MB-aligned blocks kept in the heap:
//! a ResNet-50 SAM step peaked 30% higher), so a process where the user set
//! it keeps glibc's defaults. On the small models huge pages do not pay
//! (the Fashion-MNIST CNN's steps took 3-47% longer), which is why they are
//! not the default.

/// `M_MMAP_THRESHOLD`: allocations below 32 MB come from the heap.
const MMAP_THRESHOLD_BYTES: i32 = 32 * 1024 * 1024;
/// `M_TRIM_THRESHOLD`: return freed heap top to the kernel only beyond 1 GB.
const TRIM_THRESHOLD_BYTES: i32 = 1024 * 1024 * 1024;

/// PyTorch's variable (read by c10's CPU allocator at libtorch's first
/// allocation) that backs CPU tensors of 2 MB and more with transparent
/// huge pages.
pub const HUGE_PAGES_VARIABLE: &str = "THP_MEM_ALLOC_ENABLE";

/// Whether this process asked libtorch for huge pages (`THP_MEM_ALLOC_ENABLE=1`,
/// the value c10 reads as on).
pub fn huge_pages_requested() -> bool {
    std::env::var(HUGE_PAGES_VARIABLE).is_ok_and(|value| value.trim() == "1")
}

/// What [`tune_allocator`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocatorTuning {
    /// glibc's fixed mmap and trim thresholds are set.
    Thresholds,
    /// Huge pages were asked for: glibc keeps its defaults.
    HugePages,
    /// Nothing: not glibc, or glibc rejected a setting.
    Untouched,
}

/// Sets glibc's mmap and trim thresholds (see the module doc), unless huge
/// pages were asked for. Call once at start-up, before the first tensor is
/// allocated.
pub fn tune_allocator() -> AllocatorTuning {
    if huge_pages_requested() {
        return AllocatorTuning::HugePages;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only changes allocator parameters; it is safe to call
        // at any time, and we call it before other threads allocate.
        let accepted = unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
                && libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1
        };
        match accepted {
            true => AllocatorTuning::Thresholds,
            false => AllocatorTuning::Untouched,
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = (MMAP_THRESHOLD_BYTES, TRIM_THRESHOLD_BYTES);
        AllocatorTuning::Untouched
    }
}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn glibc_accepts_the_settings() {
        use super::*;
        let expected = match huge_pages_requested() {
            true => AllocatorTuning::HugePages,
            false => AllocatorTuning::Thresholds,
        };
        assert_eq!(tune_allocator(), expected);
    }
}
