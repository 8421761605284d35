//! Text cut to a byte budget at a character boundary.
//!
//! Reports, tool results and captured output are bounded in bytes, but a
//! cut inside a multi-byte character would leave invalid UTF-8 (or panic on
//! a `&str` slice), so every cut goes through here.

/// The longest prefix of `text` that is at most `max` bytes and ends on a
/// character boundary.
pub fn prefix(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    &text[..cut]
}

/// Shortens `text` in place to [`prefix`]`(text, max)`.
pub fn truncate(text: &mut String, max: usize) {
    let keep = prefix(text, max).len();
    text.truncate(keep);
}

/// An error and each of its causes, joined with ": ", skipping a cause
/// whose text the previous one already ends with. tonic's and hyper's
/// errors say little at the top ("transport error") and the reason below.
pub fn causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let next = cause.to_string();
        if !text.ends_with(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_never_split_a_character() {
        assert_eq!(prefix("éé", 3), "é");
        assert_eq!(prefix("éé", 4), "éé");
        assert_eq!(prefix("abc", 0), "");
        assert_eq!(prefix("日本", 2), "");
        let mut owned = String::from("aé");
        truncate(&mut owned, 2);
        assert_eq!(owned, "a");
    }
}
