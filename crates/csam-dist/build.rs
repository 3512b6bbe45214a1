//! Bakes an rpath to libtorch into this package's tests (see
//! build-support/libtorch_link.rs) and compiles the C++ shim over libtorch's
//! c10d process groups (csrc/process_group.cpp) against the headers in
//! libtorch's `include/` and the Gloo headers the wheel leaves out
//! (vendor/README.md).

include!("../../build-support/libtorch_link.rs");

/// The C++ standard library ABI of libtorch. PyTorch's Linux wheels have been
/// built with the C++11 ABI since 2.7 (csam pins 2.11.0); a mismatch fails at
/// link time (undefined `std::__cxx11` symbols), never silently.
const CXX11_ABI: &str = "1";

fn main() {
    link_libtorch();
    println!("cargo:rerun-if-changed=csrc/process_group.cpp");
    println!("cargo:rerun-if-changed=vendor");
    let Ok(lib_dir) = std::env::var("DEP_TCH_LIBTORCH_LIB") else {
        panic!("DEP_TCH_LIBTORCH_LIB not set: torch-sys did not report libtorch's location");
    };
    let root = std::path::Path::new(&lib_dir)
        .parent()
        .expect("libtorch's lib directory has a parent");
    cc::Build::new()
        .cpp(true)
        .pic(true)
        .warnings(false)
        .include("vendor")
        .include(root.join("include"))
        .include(root.join("include/torch/csrc/api/include"))
        .flag("-std=c++17")
        .flag(format!("-D_GLIBCXX_USE_CXX11_ABI={CXX11_ABI}"))
        .flag("-DGLOG_USE_GLOG_EXPORT")
        // ProcessGroupGloo.hpp declares its class only when torch was built with Gloo,
        // as every Linux wheel is.
        .flag("-DUSE_C10D_GLOO")
        .file("csrc/process_group.cpp")
        .compile("csam_dist");
}
