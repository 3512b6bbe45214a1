//! `.npy` reader on arbitrary bytes: any input may be refused with an error,
//! none may panic, abort or allocate without bound.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = csam_calib::io::npy::read_from(data, data.len() as u64, Path::new("fuzz.npy"));
});
