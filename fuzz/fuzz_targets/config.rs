//! Saved run specification (`config.toml`, nested or flat) on arbitrary UTF-8 text:
//! parse, validate, write back what parsed and check that the written text
//! reads back to the same configuration (compared as text, so a NaN in an
//! unused setting compares equal). Errors are fine; panics (including the
//! "serialises to TOML" invariant of `to_toml`), aborts and unbounded
//! allocations are not.
#![no_main]

use csam_train::spec::RunSpec;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(config) = RunSpec::from_saved_toml(text, "fuzz") else {
        return;
    };
    let _ = config.validate();
    let written = config.to_toml();
    let reread = RunSpec::from_saved_toml(&written, "written")
        .unwrap_or_else(|e| panic!("written config does not parse: {e}\n{written}"));
    assert_eq!(
        reread.to_toml(),
        written,
        "config changed on a save/load round trip"
    );
});
