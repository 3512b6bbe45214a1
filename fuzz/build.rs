//! With the `train` feature, bakes the libtorch rpath into the fuzz targets
//! (see build-support/libtorch_link.rs).

include!("../build-support/libtorch_link.rs");

fn main() {
    if std::env::var_os("CARGO_FEATURE_TRAIN").is_some() {
        link_libtorch();
    }
}
