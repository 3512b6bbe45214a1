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
    println!("cargo:rerun-if-changed=../../build-support/shim_errors.h");
    println!("cargo:rerun-if-changed=csrc/script_module.cpp");
    println!("cargo:rerun-if-changed=csrc/autocast.cpp");
    println!("cargo:rerun-if-changed=csrc/memory_format.cpp");
    libtorch_cpp_build()
        .file("csrc/script_module.cpp")
        .file("csrc/autocast.cpp")
        .file("csrc/memory_format.cpp")
        .compile("csam_script");
}
