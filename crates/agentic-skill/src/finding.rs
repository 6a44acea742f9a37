//! Findings (one problem each, with a stable code) and the report that collects them.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::Frontmatter;

/// Whether a finding makes the skill invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The skill is invalid.
    Error,
    /// The skill is valid but probably not what its author intended.
    Warning,
}

macro_rules! finding_codes {
    ($($(#[$doc:meta])* $code:ident => $severity:ident,)+) => {
        /// The stable identifier of a finding. Codes never change meaning; they are
        /// serialized as their CamelCase name (the same string as [`FindingCode::as_str`]).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum FindingCode {
            $($(#[$doc])* $code,)+
        }

        impl FindingCode {
            /// Every code, in declaration order.
            pub const ALL: &'static [FindingCode] = &[$(FindingCode::$code,)+];

            /// The stable CamelCase name of the code.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(FindingCode::$code => stringify!($code),)+
                }
            }

            /// Whether a finding with this code is an error or a warning.
            pub fn severity(self) -> Severity {
                match self {
                    $(FindingCode::$code => Severity::$severity,)+
                }
            }
        }
    };
}

finding_codes! {
    /// The skill directory has no file named exactly `SKILL.md`.
    SkillFileMissing => Error,
    /// SKILL.md is larger than [`MAX_SKILL_MD_BYTES`](crate::MAX_SKILL_MD_BYTES).
    FileTooLarge => Error,
    /// SKILL.md is not valid UTF-8.
    FileNotUtf8 => Error,
    /// SKILL.md does not start with a `---` line.
    FrontmatterMissing => Error,
    /// No `---` line closes the frontmatter.
    FrontmatterUnclosed => Error,
    /// The frontmatter is empty, a scalar or a sequence instead of a mapping.
    FrontmatterNotMapping => Error,
    /// The frontmatter contains a control character, a byte-order mark, or a character that
    /// YAML 1.1 reads as a line break and YAML 1.2 as text (U+0085, U+2028, U+2029).
    CharacterNotAllowed => Error,
    /// The frontmatter is not well-formed YAML, or holds more than one YAML document.
    YamlInvalid => Error,
    /// A flow collection (`[a, b]`, `{a: b}`); the reference validator rejects them.
    FlowStyleNotAllowed => Error,
    /// A YAML anchor (`&name`); the reference validator rejects them.
    AnchorNotAllowed => Error,
    /// A YAML alias (`*name`); the reference validator rejects them.
    AliasNotAllowed => Error,
    /// A YAML tag (`!!str`, `!custom`); the reference validator rejects them.
    TagNotAllowed => Error,
    /// A tab outside quoted scalars, block scalars and comments; the reference validator
    /// (PyYAML-style scanner) rejects them there.
    TabNotAllowed => Error,
    /// A mapping repeats a key.
    DuplicateKey => Error,
    /// A mapping key is a sequence or a mapping.
    NonScalarKey => Error,
    /// A top-level field outside the specification's closed set.
    UnknownField => Error,
    /// `name` is absent.
    NameMissing => Error,
    /// `name` is a sequence or a mapping.
    NameNotString => Error,
    /// `name` is empty or only white space.
    NameEmpty => Error,
    /// `name` is longer than 64 characters.
    NameTooLong => Error,
    /// `name` contains uppercase letters.
    NameUppercase => Error,
    /// `name` contains characters other than `a-z`, `0-9` and `-`.
    NameInvalidCharacter => Error,
    /// `name` starts with `-`.
    NameLeadingHyphen => Error,
    /// `name` ends with `-`.
    NameTrailingHyphen => Error,
    /// `name` contains `--`.
    NameConsecutiveHyphens => Error,
    /// `name` differs from the name of the directory that holds SKILL.md.
    NameMismatch => Error,
    /// `description` is absent.
    DescriptionMissing => Error,
    /// `description` is a sequence or a mapping.
    DescriptionNotString => Error,
    /// `description` is empty or only white space.
    DescriptionEmpty => Error,
    /// `description` is longer than 1024 characters.
    DescriptionTooLong => Error,
    /// `compatibility` is a sequence or a mapping.
    CompatibilityNotString => Error,
    /// `compatibility` is present but empty; the specification requires 1 to 500 characters.
    CompatibilityEmpty => Error,
    /// `compatibility` is longer than 500 characters.
    CompatibilityTooLong => Error,
    /// `license` is a sequence or a mapping.
    LicenseNotString => Error,
    /// `allowed-tools` is a sequence or a mapping.
    AllowedToolsNotString => Error,
    /// `metadata` is a scalar or a sequence.
    MetadataNotMapping => Error,
    /// A `metadata` value is a sequence or a mapping.
    MetadataValueNotString => Error,
    /// The frontmatter holds `---` (even inside a value or a comment); goose ends the
    /// frontmatter at the first `---` anywhere, so it would skip the skill or cut it short.
    GooseFrontmatterCut => Error,
    /// The frontmatter's first field is indented; goose strips that indentation, so the
    /// fields no longer line up and it would not list the skill.
    GooseIndentedFrontmatter => Error,
    /// `name` is an unquoted `null` (or `Null`, `NULL`, `~`), which goose reads as no name,
    /// so it would not list the skill.
    GooseNameNull => Error,
    /// An unquoted `metadata` value is an integer that needs more than 64 bits (and at most
    /// 128), which goose cannot read, so it would not list the skill.
    GooseIntegerOutOfRange => Error,
    /// A `SKILL.md` below the skill's root; goose would register it as a skill of its own.
    NestedSkillFile => Error,
    /// A symlink inside the skill; goose follows links out of the mounted skill.
    LinkInSkill => Error,
    /// The Markdown body after the frontmatter is empty.
    BodyEmpty => Warning,
    /// SKILL.md has more than the 500 lines the specification recommends.
    TooManyLines => Warning,
}

impl FindingCode {
    /// Whether this finding is about how goose, the agent runtime that reads the mounted
    /// skills, would load the skill (not listed, listed with other content, or extra skills),
    /// rather than about the Agent Skills specification.
    pub fn is_goose_incompatibility(self) -> bool {
        matches!(
            self,
            FindingCode::GooseFrontmatterCut
                | FindingCode::GooseIndentedFrontmatter
                | FindingCode::GooseNameNull
                | FindingCode::GooseIntegerOutOfRange
                | FindingCode::NestedSkillFile
                | FindingCode::LinkInSkill
        )
    }
}

impl std::fmt::Display for FindingCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One problem found in a skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// What kind of problem this is.
    pub code: FindingCode,
    /// A one-line explanation naming the field and, where there is one, the limit.
    pub message: String,
}

impl Finding {
    pub(crate) fn new(code: FindingCode, message: impl Into<String>) -> Self {
        Finding {
            code,
            message: message.into(),
        }
    }
}

/// The outcome of validating one SKILL.md: every error and warning found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// The parsed frontmatter; present only when there are no errors, so a consumer can
    /// never act on a name or description that failed validation.
    pub frontmatter: Option<Frontmatter>,
    /// Problems that make the skill invalid.
    pub errors: Vec<Finding>,
    /// Problems that leave the skill valid.
    pub warnings: Vec<Finding>,
}

impl Report {
    /// Sorts findings into errors and warnings by their code's severity.
    ///
    /// A hostile SKILL.md can repeat one problem hundreds of thousands of times; past
    /// [`MAX_FINDINGS_PER_CODE`] of a code, the last one kept says how many more there were.
    pub(crate) fn from_findings(
        findings: Vec<Finding>,
        frontmatter: impl FnOnce() -> Option<Frontmatter>,
    ) -> Self {
        let (errors, warnings): (Vec<_>, Vec<_>) = cap_per_code(findings)
            .into_iter()
            .partition(|f| f.code.severity() == Severity::Error);
        let frontmatter = if errors.is_empty() {
            frontmatter()
        } else {
            None
        };
        Report {
            frontmatter,
            errors,
            warnings,
        }
    }

    /// True when there are no errors (warnings do not count).
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }

    /// All error messages on one line, joined with `"; "`; empty when the skill is valid.
    pub fn summary(&self) -> String {
        self.errors
            .iter()
            .map(|f| f.message.as_str())
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// True when the skill is invalid only because of how goose would load it: every error
    /// is a [`FindingCode::is_goose_incompatibility`] code.
    pub fn is_goose_incompatibility_only(&self) -> bool {
        !self.errors.is_empty()
            && self
                .errors
                .iter()
                .all(|f| f.code.is_goose_incompatibility())
    }

    /// How a source of skills (an image, a git commit) refuses this SKILL.md, with
    /// [`Report::summary`] as the message; `None` when it is valid and its frontmatter read.
    pub fn refusal(&self) -> Option<Refusal> {
        if self.is_goose_incompatibility_only() {
            Some(Refusal::GooseIncompatible)
        } else if !self.is_valid() || self.frontmatter.is_none() {
            Some(Refusal::InvalidSkill)
        } else {
            None
        }
    }

    /// Whether any error or warning carries `code`.
    pub fn has(&self, code: FindingCode) -> bool {
        self.errors
            .iter()
            .chain(&self.warnings)
            .any(|f| f.code == code)
    }
}

/// Why a source of skills refuses a SKILL.md ([`Report::refusal`]); each source's error has a
/// variant of the same name, and its reason is that name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Invalid by the specification.
    InvalidSkill,
    /// Valid by the specification, but goose, the agent runtime that reads the mounted
    /// skills, would skip it or read it cut short.
    GooseIncompatible,
}

/// Most findings of one code in a report.
pub const MAX_FINDINGS_PER_CODE: usize = 10;

fn cap_per_code(findings: Vec<Finding>) -> Vec<Finding> {
    let mut counts: HashMap<FindingCode, usize> = HashMap::new();
    for finding in &findings {
        *counts.entry(finding.code).or_default() += 1;
    }
    let mut kept: HashMap<FindingCode, usize> = HashMap::new();
    let mut out = Vec::new();
    for mut finding in findings {
        let seen = kept.entry(finding.code).or_default();
        *seen += 1;
        if *seen > MAX_FINDINGS_PER_CODE {
            continue;
        }
        let total = counts.get(&finding.code).copied().unwrap_or(0);
        if *seen == MAX_FINDINGS_PER_CODE && total > MAX_FINDINGS_PER_CODE {
            let more = total - MAX_FINDINGS_PER_CODE;
            finding.message = format!("{} (and {more} more {})", finding.message, finding.code);
        }
        out.push(finding);
    }
    out
}

/// Longest value quoted in a message; SKILL.md values can be long and messages must stay short.
const QUOTE_LIMIT: usize = 64;

/// A value for a one-line message: single-quoted, control characters escaped, and cut to
/// 64 characters with an ellipsis.
pub(crate) fn quote(value: &str) -> String {
    let mut out = String::from("'");
    for (i, c) in value.chars().enumerate() {
        if i == QUOTE_LIMIT {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out.push('\'');
    out
}
