// Shared by the build scripts of the packages that compile a C++ shim over
// libtorch (csam-nn, csam-dist), via `include!`: the compiler set up for
// libtorch's headers, which sit in `include/` beside the `lib/` torch-sys
// reports (`DEP_TCH_LIBTORCH_LIB`, see libtorch_link.rs).

/// The C++ standard library ABI of libtorch. PyTorch's Linux wheels have been
/// built with the C++11 ABI since 2.7 (csam pins 2.11.0); a mismatch fails at
/// link time (undefined `std::__cxx11` symbols), never silently.
const CXX11_ABI: &str = "1";

/// A C++17 build against libtorch's headers with its ABI, for a shim's files
/// (which report errors through build-support/shim_errors.h).
fn libtorch_cpp_build() -> cc::Build {
    let Ok(lib_dir) = std::env::var("DEP_TCH_LIBTORCH_LIB") else {
        panic!("DEP_TCH_LIBTORCH_LIB not set: torch-sys did not report libtorch's location");
    };
    let root = std::path::Path::new(&lib_dir)
        .parent()
        .expect("libtorch's lib directory has a parent");
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .pic(true)
        .warnings(false)
        .include(concat!(env!("CARGO_MANIFEST_DIR"), "/../../build-support"))
        .include(root.join("include"))
        .include(root.join("include/torch/csrc/api/include"))
        .flag("-std=c++17")
        .flag(format!("-D_GLIBCXX_USE_CXX11_ABI={CXX11_ABI}"))
        .flag("-DGLOG_USE_GLOG_EXPORT");
    build
}
