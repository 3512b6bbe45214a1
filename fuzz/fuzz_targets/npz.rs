//! `.npz` reader on arbitrary bytes, both with no array name (the single or
//! preferred array) and with an explicit name: errors are fine, panics,
//! aborts and unbounded allocations are not.
#![no_main]

use std::io::Cursor;
use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let source = Path::new("fuzz.npz");
    let preferred = ["logits", "probs"];
    let _ = csam_calib::io::npz::read_from(Cursor::new(data), None, &preferred, source);
    let _ = csam_calib::io::npz::read_from(Cursor::new(data), Some("labels"), &[], source);
});
