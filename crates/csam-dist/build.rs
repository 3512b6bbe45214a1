//! Bakes an rpath to libtorch into this package's tests (see
//! build-support/libtorch_link.rs) and compiles the C++ shim over libtorch's
//! c10d process groups (csrc/process_group.cpp, csrc/gradient_buckets.cpp) against libtorch's headers
//! (build-support/libtorch_shim.rs) and the Gloo headers the wheel leaves
//! out (vendor/README.md).

include!("../../build-support/libtorch_link.rs");
include!("../../build-support/libtorch_shim.rs");

fn main() {
    link_libtorch();
    println!("cargo:rerun-if-changed=../../build-support/shim_errors.h");
    println!("cargo:rerun-if-changed=csrc/process_group.cpp");
    println!("cargo:rerun-if-changed=csrc/gradient_buckets.cpp");
    println!("cargo:rerun-if-changed=vendor");
    libtorch_cpp_build()
        .include("vendor")
        // ProcessGroupGloo.hpp declares its class only when torch was built
        // with Gloo, as every Linux wheel is.
        .flag("-DUSE_C10D_GLOO")
        .file("csrc/process_group.cpp")
        .file("csrc/gradient_buckets.cpp")
        .compile("csam_dist");
}
