//! Bakes an rpath to libtorch into this package's binaries and tests (see
//! build-support/libtorch_link.rs).

include!("../../build-support/libtorch_link.rs");

fn main() {
    link_libtorch();
}
