//! csam-train's `.npy` images + labels pair (`npy:IMAGES,LABELS`) on
//! arbitrary bytes, split by `csam_fuzz::split_pair`: errors are fine;
//! panics, aborts and unbounded allocations are not.
#![no_main]

use std::path::Path;

use csam_data::parse::{self, InMemory};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (images, labels) = csam_fuzz::split_pair(data);
    let _ = parse::npy(
        InMemory {
            name: Path::new("images.npy"),
            bytes: images,
        },
        InMemory {
            name: Path::new("labels.npy"),
            bytes: labels,
        },
        None,
    );
});
