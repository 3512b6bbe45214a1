//! An SVHN MAT-file (`svhn:DIR`'s `test_32x32.mat`): the level 5 MAT-file
//! reader, zlib elements included, and the SVHN checks, on arbitrary bytes:
//! errors are fine; panics, aborts and unbounded allocations are not.
#![no_main]

use std::path::Path;

use csam_data::parse::{self, InMemory};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = parse::svhn_mat(InMemory {
        name: Path::new("test_32x32.mat"),
        bytes: data,
    });
});
