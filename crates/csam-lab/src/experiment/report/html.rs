//! The HTML of a report: escaping, the page template, tables and figure
//! grids. Hand-written (a few tags), so that the page needs no template
//! engine and stays byte-for-byte reproducible.

use super::{Embedded, Report};

/// `text` with `&`, `<`, `>`, `"` and `'` escaped, safe in element content
/// and in quoted attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A paragraph of plain text.
pub fn paragraph(text: &str) -> String {
    format!("<p>{}</p>\n", escape(text))
}

/// One table cell: its text and `data-*` attributes (name, value) that carry
/// the exact numbers behind the rounded text.
pub struct Cell {
    pub text: String,
    pub data: Vec<(&'static str, String)>,
}

impl Cell {
    /// A cell with text only.
    pub fn plain(text: impl Into<String>) -> Cell {
        Cell {
            text: text.into(),
            data: Vec::new(),
        }
    }
}

/// A table with a caption, a header row and body rows; the first cell of
/// each row is a row header.
pub fn table(class: &str, caption: &str, header: &[String], rows: &[Vec<Cell>]) -> String {
    let mut out = format!(
        "<div class=\"scroll\"><table class=\"{}\">\n<caption>{}</caption>\n<thead><tr>",
        escape(class),
        escape(caption)
    );
    for h in header {
        out.push_str(&format!("<th scope=\"col\">{}</th>", escape(h)));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in rows {
        out.push_str("<tr>");
        for (i, cell) in row.iter().enumerate() {
            let tag = if i == 0 { "th" } else { "td" };
            let scope = if i == 0 { " scope=\"row\"" } else { "" };
            let data: String = cell
                .data
                .iter()
                .map(|(name, value)| format!(" data-{name}=\"{}\"", escape(value)))
                .collect();
            out.push_str(&format!(
                "<{tag}{scope}{data}>{}</{tag}>",
                escape(&cell.text)
            ));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table></div>\n");
    out
}

/// Figures side by side (as many per row as fit), each with its caption and
/// links to its SVG and PNG files.
pub fn grid(figures: &[Embedded]) -> String {
    let mut out = String::from("<div class=\"grid\">\n");
    for figure in figures {
        let links: Vec<String> = figure
            .files
            .iter()
            .map(|file| {
                let format = file.rsplit('.').next().unwrap_or("file").to_uppercase();
                format!("<a href=\"{}\">{format}</a>", escape(file))
            })
            .collect();
        out.push_str(&format!(
            "<figure>\n{}\n<figcaption>{} ({})</figcaption>\n</figure>\n",
            figure.svg,
            escape(&figure.caption),
            links.join(", ")
        ));
    }
    out.push_str("</div>\n");
    out
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em auto;max-width:1500px;padding:0 1em;\
color:#222}h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}\
.scroll{overflow-x:auto}table{border-collapse:collapse;font-size:.9em;margin:1em 0}\
caption{caption-side:bottom;text-align:left;color:#555;padding-top:.5em;max-width:100em}\
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right;white-space:nowrap}\
thead th{background:#f3f3f3;text-align:center}tbody th{text-align:left}\
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(600px,1fr));gap:1em}\
figure{margin:0}figure svg{width:100%;height:auto;display:block}\
figcaption{font-size:.85em;color:#555;margin-top:.3em}nav li{margin:.2em 0}";

/// The whole page of `report`.
pub fn page(report: &Report) -> String {
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{title}</h1>\n{intro}",
        title = escape(&report.title),
        intro = paragraph(&report.intro),
    );
    out.push_str("<nav><ul>\n");
    for section in &report.sections {
        out.push_str(&format!(
            "<li><a href=\"#{}\">{}</a></li>\n",
            escape(&section.id),
            escape(&section.title)
        ));
    }
    out.push_str("</ul></nav>\n");
    for section in &report.sections {
        out.push_str(&format!(
            "<section id=\"{}\">\n<h2>{}</h2>\n{}</section>\n",
            escape(&section.id),
            escape(&section.title),
            section.body
        ));
    }
    out.push_str("</body>\n</html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_characters_are_escaped() {
        assert_eq!(
            escape("a<b & \"c\" 'd'>"),
            "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;"
        );
        let html = table(
            "t",
            "x < y",
            &["<h>".to_string()],
            &[vec![Cell {
                text: "1 ± 2".into(),
                data: vec![("mean", "0.5".into())],
            }]],
        );
        assert!(html.contains("<caption>x &lt; y</caption>"), "{html}");
        assert!(html.contains("<th scope=\"col\">&lt;h&gt;</th>"), "{html}");
        assert!(
            html.contains("<th scope=\"row\" data-mean=\"0.5\">1 ± 2</th>"),
            "{html}"
        );
    }
}
