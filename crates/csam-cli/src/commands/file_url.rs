//! The line that tells where a written page is: a `file://` URL of its
//! absolute path, which a terminal makes clickable and a browser opens from
//! any working directory.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use anyhow::Context;

/// `open file:///ABSOLUTE/PATH`, the last line of a command that wrote the
/// page at `path` (relative paths are resolved against the working
/// directory).
pub fn open_line(path: &Path) -> anyhow::Result<String> {
    let absolute =
        std::fs::canonicalize(path).with_context(|| format!("resolving {}", path.display()))?;
    Ok(format!("open {}", file_url(&absolute)))
}

/// The `file://` URL of an absolute path: every byte other than an
/// unreserved character (RFC 3986) or `/` is percent-encoded, so spaces and
/// non-ASCII names survive.
fn file_url(absolute: &Path) -> String {
    let mut url = String::from("file://");
    for &byte in absolute.as_os_str().as_bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                url.push(byte as char)
            }
            _ => url.push_str(&format!("%{byte:02X}")),
        }
    }
    url
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsafe_bytes_are_percent_encoded() {
        assert_eq!(
            file_url(Path::new("/tmp/my runs/ä#1/report.html")),
            "file:///tmp/my%20runs/%C3%A4%231/report.html"
        );
    }

    #[test]
    fn the_path_is_resolved_and_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("report.html"), "<html>").unwrap();
        let line = open_line(&dir.path().join("./report.html")).unwrap();
        let expected = std::fs::canonicalize(dir.path().join("report.html")).unwrap();
        assert_eq!(line, format!("open {}", file_url(&expected)));
        assert!(line.starts_with("open file:///"), "{line}");
        assert!(open_line(&dir.path().join("missing.html")).is_err());
    }
}
