//! Delimited-text parser on arbitrary UTF-8 text: errors are fine, panics,
//! aborts and unbounded allocations are not.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = csam_calib::io::csv::parse(text);
    }
});
