//! Reading one skill out of a fetched commit: finding `SKILL.md`, checking the path and the
//! limits, validating, and writing the files out.

use std::io::Write;
use std::path::Path;

use agentic_skill::SkillVerdict;
use gix::objs::tree::EntryKind;

use crate::limits::{MAX_COMMIT_BYTES, MAX_PATH_BYTES};
use crate::{GitError, Limits, SourceUrl};

const SKILL_FILE: &str = agentic_skill::SKILL_FILE;

/// A commit fetched into a scratch repository, removed when this is dropped.
pub struct Fetched {
    repo: gix::Repository,
    commit: gix::ObjectId,
    tree: gix::ObjectId,
    _scratch: tempfile::TempDir,
}

/// One entry of a skill directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillEntry {
    /// Path relative to the skill directory, `/`-separated.
    pub path: String,
    pub kind: SkillEntryKind,
    /// Bytes of the file; 0 for a directory.
    pub size: u64,
    id: gix::ObjectId,
}

/// What a [`SkillEntry`] is; a skill holds no links (see [`GitError::LinkInSkill`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkillEntryKind {
    Directory,
    File { executable: bool },
}

/// A validated skill at one commit.
#[derive(Debug, Clone)]
pub struct SkillTree {
    /// The full commit id.
    pub commit: String,
    /// Where the skill directory is in the repository: the `subPath`, or empty for the root.
    pub dir: String,
    /// The validation report of its `SKILL.md`; valid, with frontmatter.
    pub report: agentic_skill::Report,
    /// Bytes of the SKILL.md body after the frontmatter: what a rule adds to the prompt.
    pub body_bytes: Option<usize>,
    /// Every entry below the skill directory, parents before children: directories and
    /// regular files. Submodules (commit entries) are left out: they are not part of the
    /// commit's content.
    pub entries: Vec<SkillEntry>,
}

impl Fetched {
    pub(crate) fn new(
        scratch: tempfile::TempDir,
        repo: gix::Repository,
        commit: gix::ObjectId,
        source: &SourceUrl,
    ) -> Result<Self, GitError> {
        let not_a_commit = |message: String| GitError::RefNotFound {
            source_url: source.to_string(),
            message,
        };
        let tree = {
            let object = repo.find_object(commit).map_err(|e| {
                not_a_commit(format!("the server did not send commit {commit}: {e}"))
            })?;
            let found = object
                .try_into_commit()
                .map_err(|_| not_a_commit(format!("{commit} is not a commit")))?;
            found
                .tree_id()
                .map_err(|e| not_a_commit(format!("commit {commit} has no readable tree: {e}")))?
                .detach()
        };
        Ok(Fetched {
            repo,
            commit,
            tree,
            _scratch: scratch,
        })
    }

    /// The fetched commit id.
    pub fn commit(&self) -> String {
        self.commit.to_string()
    }

    /// The commit object's bytes, as `git cat-file commit <id>` prints them: what its
    /// signature (the `gpgsig` header) is checked over. Hashed again here (SHA-1 or SHA-256,
    /// as the repository's objects are) and compared with the pinned id, so the bytes a
    /// signature is checked over are the pinned commit's. At most [`MAX_COMMIT_BYTES`].
    pub fn raw_commit(&self) -> Result<Vec<u8>, GitError> {
        let size = self.size_of(&self.repo, self.commit)?;
        if size > MAX_COMMIT_BYTES {
            return Err(GitError::too_large(format!(
                "commit {} is {size} bytes, over the limit of {MAX_COMMIT_BYTES} (MAX_COMMIT_BYTES)",
                self.commit
            )));
        }
        let object = self
            .repo
            .find_object(self.commit)
            .map_err(|error| self.missing(self.commit, error))?;
        let hashed =
            gix::objs::compute_hash(self.commit.kind(), gix::objs::Kind::Commit, &object.data)
                .map_err(|error| self.missing(self.commit, error))?;
        if hashed != self.commit {
            return Err(self.missing(
                self.commit,
                format!("the object read hashes to {hashed}, not to the pinned commit"),
            ));
        }
        Ok(object.data.clone())
    }

    /// Finds and validates the skill at the root or at `sub_path`, within `limits`.
    ///
    /// Refused: a symlink (or a file) at or along `sub_path` or at `SKILL.md`, names that are
    /// not plain path segments, more entries or bytes than the limits. A root without
    /// `SKILL.md` but with skill directories asks for a `subPath`. What goose would load
    /// differently is refused: a symlink anywhere in the skill ([`GitError::LinkInSkill`]), a
    /// `SKILL.md` below its root ([`GitError::NestedSkillFile`]), and a `SKILL.md` whose only
    /// findings are about goose ([`SkillVerdict::GooseIncompatible`]).
    pub fn skill(&self, sub_path: Option<&str>, limits: &Limits) -> Result<SkillTree, GitError> {
        let repo = &self.repo;
        if let Some(sub_path) = sub_path {
            agentic_skill::check_sub_path(sub_path).map_err(|message| {
                GitError::InvalidSubPath {
                    sub_path: sub_path.to_string(),
                    message,
                }
            })?;
        }
        let mut dir_tree = self.tree;
        let mut walked = String::new();
        for segment in sub_path.into_iter().flat_map(|p| p.split('/')) {
            if !walked.is_empty() {
                walked.push('/');
            }
            walked.push_str(segment);
            let entries = self.entries_of(repo, dir_tree)?;
            match entries.iter().find(|(name, _, _)| name == segment) {
                Some((_, EntryKind::Tree, id)) => dir_tree = *id,
                Some((_, EntryKind::Link, _)) => {
                    return Err(GitError::unsafe_content(format!(
                        "{walked} is a symlink; the skill's path may not go through links"
                    )));
                }
                Some(_) => {
                    return Err(GitError::Skill(SkillVerdict::SkillNotFound {
                        path: walked,
                        message: "it is not a directory".to_string(),
                    }));
                }
                None => {
                    return Err(GitError::Skill(SkillVerdict::SkillNotFound {
                        path: format!("{walked}/{SKILL_FILE}"),
                        message: format!("{walked} does not exist at commit {}", self.commit),
                    }));
                }
            }
        }
        let dir = sub_path.unwrap_or_default().to_string();
        let target = if dir.is_empty() {
            SKILL_FILE.to_string()
        } else {
            format!("{dir}/{SKILL_FILE}")
        };
        let top = self.entries_of(repo, dir_tree)?;
        let skill_md = match top.iter().find(|(name, _, _)| name == SKILL_FILE) {
            Some((_, EntryKind::Blob | EntryKind::BlobExecutable, id)) => *id,
            Some((_, EntryKind::Link, _)) => {
                return Err(GitError::unsafe_content(format!(
                    "{target} is a symlink; it must be a regular file"
                )));
            }
            Some(_) => {
                return Err(GitError::Skill(SkillVerdict::SkillNotFound {
                    path: target,
                    message: "it is not a regular file".to_string(),
                }));
            }
            None if sub_path.is_none() => {
                let mut directories = Vec::new();
                for (name, kind, id) in &top {
                    if *kind == EntryKind::Tree
                        && self
                            .entries_of(repo, *id)?
                            .iter()
                            .any(|(n, k, _)| n == SKILL_FILE && is_file(*k))
                    {
                        directories.push(name.clone());
                    }
                }
                directories.sort();
                if directories.is_empty() {
                    return Err(GitError::Skill(SkillVerdict::SkillNotFound {
                        path: target,
                        message: format!(
                            "the repository has no SKILL.md at commit {}",
                            self.commit
                        ),
                    }));
                }
                return Err(GitError::sub_path_required(directories));
            }
            None => {
                return Err(GitError::Skill(SkillVerdict::SkillNotFound {
                    path: target,
                    message: format!("{dir} holds no SKILL.md at commit {}", self.commit),
                }));
            }
        };

        let mut entries = Vec::new();
        let mut bytes = 0u64;
        self.collect(repo, dir_tree, (&dir, ""), limits, &mut entries, &mut bytes)?;

        let size = self.size_of(repo, skill_md)?;
        if size > agentic_skill::MAX_SKILL_MD_BYTES {
            return Err(GitError::Skill(SkillVerdict::InvalidSkill {
                path: target,
                summary: format!(
                    "SKILL.md is {size} bytes, over the limit of {}",
                    agentic_skill::MAX_SKILL_MD_BYTES
                ),
            }));
        }
        let content = self.blob(repo, skill_md)?;
        let expected_name = sub_path.and_then(|p| p.rsplit('/').next());
        let report = agentic_skill::validate_skill_md(&content, expected_name);
        if let Some(refused) = SkillVerdict::refused(target, &report) {
            return Err(refused.into());
        }
        Ok(SkillTree {
            commit: self.commit.to_string(),
            dir,
            report,
            body_bytes: agentic_skill::body_bytes(&content),
            entries,
        })
    }

    /// Writes the skill's entries below `dest` (which must exist and be empty): directories
    /// 0755, files 0644 or 0755.
    pub fn write_skill(&self, skill: &SkillTree, dest: &Path) -> Result<(), GitError> {
        use std::os::unix::fs::PermissionsExt;
        let repo = &self.repo;
        for entry in &skill.entries {
            let path = dest.join(&entry.path);
            match entry.kind {
                SkillEntryKind::Directory => {
                    std::fs::create_dir(&path).map_err(|e| GitError::io(&path, e))?;
                }
                SkillEntryKind::File { executable } => {
                    let data = self.blob(repo, entry.id)?;
                    let mut file =
                        std::fs::File::create_new(&path).map_err(|e| GitError::io(&path, e))?;
                    file.write_all(&data).map_err(|e| GitError::io(&path, e))?;
                    let mode = if executable { 0o755 } else { 0o644 };
                    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
                        .map_err(|e| GitError::io(&path, e))?;
                }
            }
        }
        Ok(())
    }

    /// Lists the entries below `tree`, the skill directory `skill_dir` of the repository
    /// (`prefix` is the path walked so far inside it), within the limits, refusing what goose
    /// would load as more than this skill.
    fn collect(
        &self,
        repo: &gix::Repository,
        tree: gix::ObjectId,
        (skill_dir, prefix): (&str, &str),
        limits: &Limits,
        entries: &mut Vec<SkillEntry>,
        bytes: &mut u64,
    ) -> Result<(), GitError> {
        let in_repository = |path: &str| {
            if skill_dir.is_empty() {
                path.to_string()
            } else {
                format!("{skill_dir}/{path}")
            }
        };
        let root = || {
            if skill_dir.is_empty() {
                "the repository root".to_string()
            } else {
                skill_dir.to_string()
            }
        };
        for (name, kind, id) in self.entries_of(repo, tree)? {
            let path = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            if path.len() > MAX_PATH_BYTES {
                return Err(GitError::unsafe_content(format!(
                    "path {:?}… is longer than {MAX_PATH_BYTES} bytes",
                    path.chars().take(64).collect::<String>()
                )));
            }
            let kind = match kind {
                EntryKind::Tree => SkillEntryKind::Directory,
                EntryKind::Blob => SkillEntryKind::File { executable: false },
                EntryKind::BlobExecutable => SkillEntryKind::File { executable: true },
                EntryKind::Link => {
                    return Err(GitError::LinkInSkill {
                        path: in_repository(&path),
                        root: root(),
                    });
                }
                EntryKind::Commit => continue,
            };
            if name == SKILL_FILE && !prefix.is_empty() && kind != SkillEntryKind::Directory {
                return Err(GitError::NestedSkillFile {
                    path: in_repository(&path),
                    root: root(),
                });
            }
            if entries.len() as u64 >= limits.max_entries {
                return Err(GitError::too_large(format!(
                    "the skill directory has more than {} entries (Limits::max_entries)",
                    limits.max_entries
                )));
            }
            let size = if kind == SkillEntryKind::Directory {
                0
            } else {
                self.size_of(repo, id)?
            };
            *bytes = bytes.saturating_add(size);
            if *bytes > limits.max_skill_bytes {
                return Err(GitError::too_large(format!(
                    "the skill directory holds more than {} bytes (Limits::max_skill_bytes)",
                    limits.max_skill_bytes
                )));
            }
            entries.push(SkillEntry {
                path: path.clone(),
                kind,
                size,
                id,
            });
            if kind == SkillEntryKind::Directory {
                self.collect(repo, id, (skill_dir, &path), limits, entries, bytes)?;
            }
        }
        Ok(())
    }

    /// The entries of one tree, names checked to be plain path segments.
    fn entries_of(
        &self,
        repo: &gix::Repository,
        tree: gix::ObjectId,
    ) -> Result<Vec<(String, EntryKind, gix::ObjectId)>, GitError> {
        let object = repo.find_object(tree).map_err(|e| self.missing(tree, e))?;
        let tree = object.try_into_tree().map_err(|e| self.missing(tree, e))?;
        let decoded = tree.decode().map_err(|e| self.missing(tree.id, e))?;
        decoded
            .entries
            .iter()
            .map(|entry| {
                let name = String::from_utf8(entry.filename.to_vec()).map_err(|_| {
                    GitError::unsafe_content(format!(
                        "a name in the tree is not UTF-8: {:?}",
                        entry.filename
                    ))
                })?;
                if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
                    return Err(GitError::unsafe_content(format!(
                        "{name:?} is not a plain file name"
                    )));
                }
                Ok((name, entry.mode.kind(), entry.oid.to_owned()))
            })
            .collect()
    }

    fn size_of(&self, repo: &gix::Repository, id: gix::ObjectId) -> Result<u64, GitError> {
        repo.find_header(id)
            .map(|h| h.size())
            .map_err(|e| self.missing(id, e))
    }

    fn blob(&self, repo: &gix::Repository, id: gix::ObjectId) -> Result<Vec<u8>, GitError> {
        repo.find_object(id)
            .map(|o| o.detach().data)
            .map_err(|e| self.missing(id, e))
    }

    /// An object of the commit that is not in what the server sent: the fetch was not
    /// complete, which a later fetch may fix.
    fn missing(&self, id: gix::ObjectId, error: impl std::fmt::Display) -> GitError {
        GitError::Io {
            path: format!("object {id} of commit {}", self.commit),
            message: crate::error::bounded(error.to_string()),
        }
    }
}

fn is_file(kind: EntryKind) -> bool {
    matches!(kind, EntryKind::Blob | EntryKind::BlobExecutable)
}
