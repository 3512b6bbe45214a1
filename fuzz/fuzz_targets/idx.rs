//! IDX images + labels pair (each possibly gzipped) on arbitrary bytes, split
//! by `csam_fuzz::split_pair`: errors are fine; panics, aborts and unbounded
//! allocations (a header claiming 2^32 images) are not.
#![no_main]

use std::path::Path;

use csam_data::parse::{self, InMemory};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (images, labels) = csam_fuzz::split_pair(data);
    let _ = parse::idx(
        InMemory {
            name: Path::new("images"),
            bytes: images,
        },
        InMemory {
            name: Path::new("labels"),
            bytes: labels,
        },
    );
});
