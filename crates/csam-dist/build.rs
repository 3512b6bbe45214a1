//! Bakes an rpath to libtorch into this package's tests (see
//! build-support/libtorch_link.rs) and compiles the C++ shim over libtorch's
//! c10d process groups (csrc/process_group.cpp, csrc/gradient_buckets.cpp) against libtorch's headers
//! (build-support/libtorch_shim.rs) and the Gloo headers the wheel leaves
//! out (vendor/README.md).

include!("../../build-support/libtorch_link.rs");
include!("../../build-support/libtorch_shim.rs");

fn main() {
    link_libtorch();
    // Cargo scans a watched folder's files, so a new shim file needs no line.
    for watched in ["../../build-support/shim_errors.h", "csrc", "vendor"] {
        println!("cargo:rerun-if-changed={watched}");
    }
    libtorch_cpp_build()
        .include("vendor")
        // ProcessGroupGloo.hpp declares its class only when torch was built
        // with Gloo, as every Linux wheel is.
        .flag("-DUSE_C10D_GLOO")
        .file("csrc/process_group.cpp")
        .file("csrc/gradient_buckets.cpp")
        .compile("csam_dist");
}
