//! CIFAR-10 and CIFAR-100 binary batches on arbitrary bytes: errors are fine;
//! panics, aborts and unbounded allocations are not.
#![no_main]

use std::path::Path;

use csam_data::parse::{self, InMemory};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let batch = InMemory {
        name: Path::new("batch.bin"),
        bytes: data,
    };
    let _ = parse::cifar10_batch(batch);
    let _ = parse::cifar100_batch(batch);
});
