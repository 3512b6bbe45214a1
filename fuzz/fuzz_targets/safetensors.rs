//! Safetensors weights import (`csam train --init`, loading a run's model)
//! into `csam_fuzz::tiny_mlp` on arbitrary bytes: errors are fine; panics,
//! aborts and unbounded allocations (a header claiming 10^12 bytes) are not.
#![no_main]

use std::path::Path;

use csam_nn::model::weights;
use libfuzzer_sys::fuzz_target;
use tch::nn::VarStore;

thread_local! {
    static MODEL: VarStore = csam_fuzz::tiny_mlp();
}

fuzz_target!(|data: &[u8]| {
    MODEL.with(|vs| {
        let _ = weights::load_safetensors(vs, data, Path::new("fuzz.safetensors"));
    });
});
