//! Checks of an experiment's `report.html` shared by the compare and sweep
//! tests: valid HTML, nothing fetched from elsewhere, every linked file
//! present, the table cells of the numbers in `results.json`, and the line
//! that tells where to open it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Output;

use html5gum::{Token, Tokenizer};

/// Asserts that the last line of a command that wrote `dir`'s report is
/// `open file://` and the report's absolute path (the test directories'
/// names need no percent-encoding).
pub fn assert_opens_the_report(output: &Output, dir: &Path) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    let report = std::fs::canonicalize(dir.join("report.html")).expect("report.html exists");
    assert_eq!(
        last,
        format!("open file://{}", report.display()),
        "{stdout}"
    );
}

/// Elements that never have an end tag.
const VOID: [&str; 6] = ["meta", "br", "img", "hr", "input", "link"];

/// What the checks found in a report: the exact `data-*` attributes of each
/// table cell (in page order) and the text of the cell.
pub struct Cells(pub Vec<(BTreeMap<String, String>, String)>);

fn utf8(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8 in the report")
}

/// Tokenizes `dir/report.html` (WHATWG rules) and fails on any tokenizer
/// error, an unbalanced element, a script or style sheet link, a resource
/// that is not inline (`http:`, `//`) or a relative link to a missing file
/// or anchor. Returns the table cells that carry `data-mean`.
pub fn check_report(dir: &Path) -> Cells {
    let html = std::fs::read_to_string(dir.join("report.html")).expect("report.html exists");
    assert!(html.starts_with("<!DOCTYPE html>"), "not an HTML5 document");
    let mut open: Vec<String> = Vec::new();
    let mut ids = BTreeSet::new();
    let mut links = Vec::new();
    let mut cells = Vec::new();
    let mut current: Option<(BTreeMap<String, String>, String)> = None;
    let mut svgs = 0;
    for token in Tokenizer::new(html.as_str()) {
        let Ok(token) = token;
        match token {
            Token::Error(error) => panic!("HTML error: {:?}", error.value),
            Token::StartTag(tag) => {
                let name = utf8(&tag.name);
                assert!(
                    !["script", "link", "iframe", "object", "embed"].contains(&name.as_str()),
                    "<{name}> in a self-contained report"
                );
                svgs += usize::from(name == "svg");
                let attributes: BTreeMap<String, String> = tag
                    .attributes
                    .iter()
                    .map(|(k, v)| (utf8(k), utf8(&v.value)))
                    .collect();
                if let Some(id) = attributes.get("id") {
                    assert!(ids.insert(id.clone()), "id {id} twice");
                }
                for key in ["href", "src"] {
                    if let Some(target) = attributes.get(key) {
                        links.push(target.clone());
                    }
                }
                if attributes.contains_key("data-mean") {
                    let data = attributes
                        .iter()
                        .filter_map(|(k, v)| {
                            Some((k.strip_prefix("data-")?.to_string(), v.clone()))
                        })
                        .collect();
                    current = Some((data, String::new()));
                }
                if !tag.self_closing && !VOID.contains(&name.as_str()) {
                    open.push(name);
                }
            }
            Token::EndTag(tag) => {
                let name = utf8(&tag.name);
                assert_eq!(
                    open.pop().as_deref(),
                    Some(name.as_str()),
                    "unbalanced </{name}>"
                );
                if let Some(cell) = current.take_if(|_| name == "td" || name == "th") {
                    cells.push(cell);
                }
            }
            Token::String(s) => {
                if let Some((_, content)) = current.as_mut() {
                    content.push_str(&utf8(&s.value));
                }
            }
            Token::Comment(_) | Token::Doctype(_) => {}
        }
    }
    assert!(open.is_empty(), "unclosed elements: {open:?}");
    assert!(svgs > 0, "no inline figure");
    assert!(!links.is_empty(), "no links to the figure files");
    for target in links {
        if let Some(anchor) = target.strip_prefix('#') {
            assert!(ids.contains(anchor), "link to a missing anchor #{anchor}");
            continue;
        }
        assert!(
            !target.contains("://") && !target.starts_with("//") && !target.starts_with('/'),
            "{target} is fetched from elsewhere"
        );
        assert!(
            dir.join(&target).is_file(),
            "{target} is linked but missing"
        );
    }
    Cells(cells)
}

/// `mean ± std` as the paper prints it: percent with 2 decimals, or 3
/// decimals for numbers that are not percentages; the mean alone without std.
pub fn mean_std(mean: f64, std: Option<f64>, in_percent: bool) -> String {
    let (scale, decimals) = if in_percent { (100.0, 2) } else { (1.0, 3) };
    match std {
        Some(std) => format!(
            "{:.*} ± {:.*}",
            decimals,
            mean * scale,
            decimals,
            std * scale
        ),
        None => format!("{:.*}", decimals, mean * scale),
    }
}
