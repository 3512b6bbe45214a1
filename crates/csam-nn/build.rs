//! Bakes an rpath to libtorch into this package's binaries and tests (see
//! build-support/libtorch_link.rs) and compiles the C++ shims over libtorch's
//! TorchScript modules (csrc/script_module.cpp) and its per-device autocast
//! (csrc/autocast.cpp), which need libtorch's headers: they sit in
//! `include/` beside the `lib/` torch-sys reports.

include!("../../build-support/libtorch_link.rs");

/// The C++ standard library ABI of libtorch. PyTorch's Linux wheels have been
/// built with the C++11 ABI since 2.7 (csam pins 2.11.0); a mismatch fails at
/// link time (undefined `std::__cxx11` symbols), never silently.
const CXX11_ABI: &str = "1";

fn main() {
    link_libtorch();
    compile_script_shim();
}

fn compile_script_shim() {
    println!("cargo:rerun-if-changed=csrc/script_module.cpp");
    println!("cargo:rerun-if-changed=csrc/autocast.cpp");
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
        .include(root.join("include"))
        .include(root.join("include/torch/csrc/api/include"))
        .flag("-std=c++17")
        .flag(format!("-D_GLIBCXX_USE_CXX11_ABI={CXX11_ABI}"))
        .flag("-DGLOG_USE_GLOG_EXPORT")
        .file("csrc/script_module.cpp")
        .file("csrc/autocast.cpp")
        .compile("csam_script");
}
