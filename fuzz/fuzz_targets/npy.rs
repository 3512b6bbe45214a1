//! `.npy` reader on arbitrary bytes, through both of its paths (elements
//! widened, and `uint8` image arrays as bytes): any input may be refused with
//! an error, none may panic, abort or allocate without bound.
#![no_main]

use std::path::Path;

use csam_calib::io::npy::{self, NpyInput};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let source = Path::new("fuzz.npy");
    let _ = npy::read_from(data, data.len() as u64, source);
    let _ = NpyInput::new(data, data.len() as u64, source).and_then(NpyInput::read_u8);
});
