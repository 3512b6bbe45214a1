//! Streaming holds a bounded number of batches, whatever the data set's
//! size: a slow consumer of a folder whose decoded batches take about 720
//! megabytes raises the process's peak memory by a number of batches that
//! does not grow with the folder, far below what an unbounded queue would
//! hold. Alone in its test binary so that the peak (`VmHWM`) is this
//! test's.

mod support;

use std::sync::Arc;
use std::time::Duration;

use csam_data::streaming::{ImageFiles, ImageTransform, StreamOptions, StreamingLoader};
use csam_data::Normalization;

/// The process's peak resident memory in bytes, from `/proc/self/status`.
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[test]
fn memory_stays_bounded_while_streaming_a_folder_larger_than_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    let (per_class, batch) = (600u32, 16usize);
    for class in ["a", "b"] {
        for k in 0..per_class {
            let path = dir.path().join(class).join(format!("{k:04}.jpg"));
            support::save_image(&path, 400, 300, 3, k);
        }
    }
    let files = Arc::new(ImageFiles::list(dir.path(), "big", None).unwrap());
    let batch_bytes = (batch * 3 * 224 * 224 * 4) as u64;
    let all_bytes = files.len() as u64 * 3 * 224 * 224 * 4;
    let options = StreamOptions {
        prefetch: 2,
        ..StreamOptions::training(batch, ImageTransform::training(224), 0, 2, tch::Device::Cpu)
    };
    let loader =
        StreamingLoader::new(Arc::clone(&files), &Normalization::imagenet(), options).unwrap();
    let Some(before) = peak_rss() else {
        eprintln!("skipped: no /proc/self/status");
        return;
    };
    let mut seen = 0;
    for batch in loader.epoch(0) {
        let (xs, _) = batch.unwrap();
        seen += xs.size()[0];
        // A consumer slower than the workers: an unbounded queue would fill.
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(seen as usize, files.len());
    let grown = peak_rss().unwrap().saturating_sub(before);
    eprintln!(
        "peak grew by {:.1} MB streaming {:.1} MB of batches ({:.1} MB each)",
        grown as f64 / 1e6,
        all_bytes as f64 / 1e6,
        batch_bytes as f64 / 1e6
    );
    // Behind a consumer this slow, an unbounded queue holds most of the
    // epoch's 75 batches (about all_bytes). The bounded loader holds the queue
    // (2), one batch per worker (2), the batch being consumed and what the
    // allocator keeps of freed buffers in the threads' arenas: a count of
    // batches set by the threads, not by the folder (about 10 on glibc). Half
    // the folder separates the two whatever the allocator's slack.
    assert!(grown < all_bytes / 2, "peak memory grew by {grown} bytes");
}
