//! Helpers shared by the fuzz targets (and, through `#[path]`, by the corpus
//! replay tests in crates/csam-train/tests/fuzz_corpus.rs).

pub mod corpus;
mod pair;
pub use pair::split_pair;

#[cfg(feature = "train")]
mod model;
#[cfg(feature = "train")]
pub use model::tiny_mlp;
