//! Bounded error texts, for the crates that read skills from servers (registries, git
//! servers): a server chooses how long its error texts are, and errors end up in caches and
//! statuses.

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
    fn only_lists_that_leave_items_out_say_how_many() {
        assert_eq!(and_more(3, 5), " (and 2 more)");
        assert_eq!(and_more(5, 5), "");
    }
}
