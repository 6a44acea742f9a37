//! Bounded error texts, for the crates that read skills from servers (registries, git
//! servers): a server chooses how long its error texts are, and errors end up in caches and
//! statuses.

/// Longest message an error of a skill source keeps from a server's answer or a library's
/// error chain.
pub const MAX_SOURCE_MESSAGE_BYTES: usize = 1024;

/// Skill directory names an error of a skill source lists when the source holds several
/// skills and no `subPath` chose one: a source may hold thousands.
pub const MAX_LISTED_DIRECTORIES: usize = 32;

/// `message` cut to [`MAX_SOURCE_MESSAGE_BYTES`] ([`truncate_message`]).
pub fn bounded_message(message: String) -> String {
    truncate_message(message, MAX_SOURCE_MESSAGE_BYTES)
}

/// The first `directories` of a source's `total` skill directories, as an error lists them:
/// `a, b (and 3 more)`.
pub fn listed_directories(directories: &[String], total: usize) -> String {
    format!(
        "{}{}",
        directories.join(", "),
        and_more(directories.len(), total)
    )
}

/// `message` cut to at most `max` bytes on a character boundary, `…` marking the cut.
pub fn truncate_message(mut message: String, max: usize) -> String {
    if message.len() > max {
        let mut end = max;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    message
}

/// ` (and N more)` when a list shows `listed` of `total` items, nothing when it shows all.
pub fn and_more(listed: usize, total: usize) -> String {
    if total > listed {
        format!(" (and {} more)", total - listed)
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_cut_on_a_character_boundary() {
        let cut = truncate_message("é".repeat(10), 5);
        assert_eq!(cut, "éé…");
        assert_eq!(truncate_message("short".into(), 5), "short");
    }

    #[test]
    fn source_messages_are_bounded() {
        let cut = bounded_message("é".repeat(MAX_SOURCE_MESSAGE_BYTES));
        assert!(cut.len() <= MAX_SOURCE_MESSAGE_BYTES + "…".len());
        assert!(cut.ends_with('…'));
        assert_eq!(bounded_message("short".into()), "short");
    }

    #[test]
    fn listed_directories_say_how_many_are_left_out() {
        let first = ["a".to_string(), "b".to_string()];
        assert_eq!(listed_directories(&first, 2), "a, b");
        assert_eq!(listed_directories(&first, 5), "a, b (and 3 more)");
    }

    #[test]
    fn only_lists_that_leave_items_out_say_how_many() {
        assert_eq!(and_more(3, 5), " (and 2 more)");
        assert_eq!(and_more(5, 5), "");
    }
}
