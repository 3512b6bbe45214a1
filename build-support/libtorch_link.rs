// Shared by the build scripts of every package that produces binaries or tests
// linking libtorch (csam-train, csam-cli), via `include!`.
//
// `cargo:rustc-link-arg` applies only to the targets of the package whose build
// script prints it, so each such package runs this itself. torch-sys tells its
// direct dependents where libtorch lives (`DEP_TCH_LIBTORCH_LIB`, because it
// declares `links = "tch"`), but its own rpath does not reach downstream
// binaries. We add an absolute rpath to that directory, and link `torch_cuda`
// explicitly: the linker would otherwise drop it as unused and CUDA would be
// invisible at run time.

fn link_libtorch() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    let Ok(lib_dir) = std::env::var("DEP_TCH_LIBTORCH_LIB") else {
        println!("cargo:warning=DEP_TCH_LIBTORCH_LIB not set: binaries will need LD_LIBRARY_PATH to find libtorch");
        return;
    };
    println!("cargo:rustc-link-arg=-Wl,-rpath,{lib_dir}");
    if std::path::Path::new(&lib_dir).join("libtorch_cuda.so").exists() {
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
        println!("cargo:rustc-link-arg=-ltorch_cuda");
        println!("cargo:rustc-link-arg=-Wl,--as-needed");
    }
}
