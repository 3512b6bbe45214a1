//! `report.html`: one self-contained page per experiment directory (every
//! figure inline as SVG, no script, no external file, font or style sheet),
//! readable from `file://` without a server. Every figure is also written as
//! SVG and PNG under the directory's `plots/` for papers; the page links to
//! those files.
//!
//! A report is a title, an introduction and a list of [`Section`]s. Each
//! experiment builds its sections in one function ([`compare::sections`],
//! [`sweep::sections`]); a new kind of content (e.g. per-step theory
//! diagnostics) is one more function returning an `Option<Section>`, pushed
//! onto that list.

pub mod compare;
mod epochs;
mod figure;
mod html;
pub mod sweep;
mod theory;

use std::path::Path;

use crate::error::{LabError, Result};
use csam_train::train::atomic::write_atomic;

pub use figure::Embedded;

/// One part of a report: a heading and its HTML body.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    /// The anchor (`id` attribute) of the section.
    pub id: String,
    /// The heading, plain text.
    pub title: String,
    /// The body, HTML (built with the escaping helpers of this module).
    pub body: String,
}

/// Rewrites the figures and `report.html` of the experiment directory `root`
/// (a comparison or a sweep, told apart by its settings file) from its
/// `results.json` and run directories, without training. Returns the path
/// of the report.
pub fn rebuild(root: &Path) -> Result<std::path::PathBuf> {
    use crate::experiment::settings::read_json;
    let compare = crate::experiment::compare_dir::CompareDir::new(root);
    let sweep = crate::experiment::sweep::SweepDir::new(root);
    if compare.settings().is_file() {
        let results = read_json(&compare.results_json())?;
        compare::write(&compare, &results)?;
        return Ok(compare.report());
    }
    if sweep.join("sweep.json").is_file() {
        let results = read_json(&sweep.join("results.json"))?;
        self::sweep::write(&sweep, &results)?;
        return Ok(sweep.join("report.html"));
    }
    Err(LabError::NotAnExperiment {
        dir: root.to_path_buf(),
    })
}

/// A whole report page.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The page title and first heading, plain text.
    pub title: String,
    /// The paragraph under the title, plain text.
    pub intro: String,
    /// The sections, in page order.
    pub sections: Vec<Section>,
}

impl Report {
    /// The page: an HTML5 document with an inline style sheet, a table of
    /// contents and the sections.
    pub fn to_html(&self) -> String {
        html::page(self)
    }

    /// Writes the page to `path`, atomically.
    pub fn write(&self, path: &Path) -> Result<()> {
        Ok(write_atomic(path, self.to_html().as_bytes())?)
    }
}
