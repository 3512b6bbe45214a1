//! Bakes an rpath to libtorch into this package's binaries and tests (see
//! build-support/libtorch_link.rs) and compiles the C++ shims over libtorch's
//! TorchScript modules (csrc/script_module.cpp), its per-device autocast
//! (csrc/autocast.cpp) and its memory formats (csrc/memory_format.cpp)
//! against libtorch's headers
//! (build-support/libtorch_shim.rs).

include!("../../build-support/libtorch_link.rs");
include!("../../build-support/libtorch_shim.rs");

fn main() {
    link_libtorch();
    // Cargo scans a watched folder's files, so a new shim file needs no line.
    for watched in ["../../build-support/shim_errors.h", "csrc"] {
        println!("cargo:rerun-if-changed={watched}");
    }
    libtorch_cpp_build()
        .file("csrc/script_module.cpp")
        .file("csrc/autocast.cpp")
        .file("csrc/memory_format.cpp")
        .compile("csam_script");
}
