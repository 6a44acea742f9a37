//! Splitting SKILL.md into its YAML frontmatter and Markdown body.

use crate::finding::{Finding, FindingCode};

/// The two parts of a SKILL.md, with line endings normalized to `\n`.
#[derive(Debug)]
pub(crate) struct Document {
    text: String,
    yaml: std::ops::Range<usize>,
    body_start: usize,
}

impl Document {
    /// Decodes `content` and finds the frontmatter between the first line and the next line
    /// that is `---` (trailing spaces or tabs allowed).
    ///
    /// A leading UTF-8 byte-order mark is dropped, and CRLF and lone CR line endings become
    /// LF, as both YAML and the reference validator (Python's universal newlines) read them.
    pub(crate) fn split(content: &[u8]) -> Result<Self, Finding> {
        let content = content.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(content);
        let text = std::str::from_utf8(content).map_err(|e| {
            Finding::new(
                FindingCode::FileNotUtf8,
                format!(
                    "SKILL.md is not valid UTF-8: invalid byte sequence at byte offset {}",
                    e.valid_up_to()
                ),
            )
        })?;
        let text = normalize_line_endings(text);

        let mut lines = LineRanges::new(&text);
        let opening = lines.next().filter(|r| is_delimiter(&text[r.clone()]));
        let Some(opening) = opening else {
            return Err(Finding::new(
                FindingCode::FrontmatterMissing,
                "SKILL.md must start with a '---' line that opens the YAML frontmatter",
            ));
        };
        let yaml_start = (opening.end + 1).min(text.len());
        let Some(closing) = lines.find(|r| is_delimiter(&text[r.clone()])) else {
            return Err(Finding::new(
                FindingCode::FrontmatterUnclosed,
                "the YAML frontmatter opened on line 1 is never closed by a '---' line",
            ));
        };
        let body_start = (closing.end + 1).min(text.len());
        Ok(Document {
            yaml: yaml_start..closing.start,
            body_start,
            text,
        })
    }

    /// The frontmatter text, without its delimiter lines. Its first line is line 2 of the file.
    pub(crate) fn yaml(&self) -> &str {
        &self.text[self.yaml.clone()]
    }

    /// The Markdown after the closing delimiter line.
    pub(crate) fn body(&self) -> &str {
        &self.text[self.body_start..]
    }

    /// The number of lines in the whole file (a final line without `\n` counts).
    pub(crate) fn line_count(&self) -> usize {
        LineRanges::new(&self.text).count()
    }
}

/// The file line of the frontmatter's first line (the opening delimiter is line 1).
pub(crate) const YAML_FIRST_LINE: usize = 2;

fn is_delimiter(line: &str) -> bool {
    line.trim_end_matches([' ', '\t']) == "---"
}

fn normalize_line_endings(text: &str) -> String {
    if text.contains('\r') {
        text.replace("\r\n", "\n").replace('\r', "\n")
    } else {
        text.to_owned()
    }
}

/// Byte ranges of the lines of `text`, without their `\n`.
struct LineRanges<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> LineRanges<'a> {
    fn new(text: &'a str) -> Self {
        LineRanges { text, pos: 0 }
    }
}

impl Iterator for LineRanges<'_> {
    type Item = std::ops::Range<usize>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.text.len() {
            return None;
        }
        let start = self.pos;
        let end = self.text[start..]
            .find('\n')
            .map_or(self.text.len(), |i| start + i);
        self.pos = end + 1;
        Some(start..end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(s: &str) -> Result<Document, FindingCode> {
        Document::split(s.as_bytes()).map_err(|f| f.code)
    }

    #[test]
    fn body_bytes_count_the_markdown_after_the_frontmatter() {
        assert_eq!(
            crate::body_bytes(b"---\r\nname: a\r\n---\r\n# Title\r\ntext\r\n"),
            Some("# Title\ntext\n".len())
        );
        assert_eq!(crate::body_bytes(b"---\nname: a\n---"), Some(0));
        assert_eq!(crate::body_bytes(b"no frontmatter"), None);
    }

    #[test]
    fn splits_frontmatter_and_body() {
        let doc = split("---\nname: a\n---\n# Title\ntext\n").unwrap();
        assert_eq!(doc.yaml(), "name: a\n");
        assert_eq!(doc.body(), "# Title\ntext\n");
        assert_eq!(doc.line_count(), 5);
    }

    #[test]
    fn closing_delimiter_at_end_of_file_gives_empty_body() {
        let doc = split("---\nname: a\n---").unwrap();
        assert_eq!(doc.yaml(), "name: a\n");
        assert_eq!(doc.body(), "");
    }

    #[test]
    fn empty_frontmatter_is_split_not_rejected() {
        let doc = split("---\n---\nbody").unwrap();
        assert_eq!(doc.yaml(), "");
        assert_eq!(doc.body(), "body");
    }

    #[test]
    fn delimiters_may_carry_trailing_blanks() {
        let doc = split("--- \t\nname: a\n---  \nbody").unwrap();
        assert_eq!(doc.yaml(), "name: a\n");
        assert_eq!(doc.body(), "body");
    }

    #[test]
    fn strips_bom_and_normalizes_crlf_and_cr() {
        let doc = split("\u{feff}---\r\nname: a\r\n---\r\nx\ry\r\n").unwrap();
        assert_eq!(doc.yaml(), "name: a\n");
        assert_eq!(doc.body(), "x\ny\n");
    }

    #[test]
    fn only_a_leading_bom_is_dropped() {
        assert_eq!(
            split("\u{feff}\u{feff}---\nname: a\n---\n").unwrap_err(),
            FindingCode::FrontmatterMissing
        );
    }

    #[test]
    fn missing_opening_delimiter() {
        for text in [
            "",
            "name: a\n",
            "\n---\nname: a\n---\n",
            " ---\nname: a\n---\n",
            "---name: a\n---\n",
            "--- # comment\nname: a\n---\n",
            "----\nname: a\n---\n",
        ] {
            assert_eq!(
                split(text).unwrap_err(),
                FindingCode::FrontmatterMissing,
                "{text:?}"
            );
        }
    }

    #[test]
    fn unclosed_frontmatter() {
        for text in [
            "---",
            "---\n",
            "---\nname: a\n",
            "---\nname: a\ndescription: a---b\n",
            "---\nname: a\n ---\n",
            "---\nname: a\n----\n",
        ] {
            assert_eq!(
                split(text).unwrap_err(),
                FindingCode::FrontmatterUnclosed,
                "{text:?}"
            );
        }
    }

    #[test]
    fn three_hyphens_inside_a_line_do_not_close() {
        let doc = split("---\ndescription: a --- b\n---\n").unwrap();
        assert_eq!(doc.yaml(), "description: a --- b\n");
    }

    #[test]
    fn invalid_utf8_names_the_offset() {
        let finding = Document::split(b"---\nname: \xff\n---\n").unwrap_err();
        assert_eq!(finding.code, FindingCode::FileNotUtf8);
        assert!(finding.message.contains("offset 10"), "{}", finding.message);
    }
}
