//! Text cut to a byte budget at a character boundary, and text from peers
//! made safe to print.
//!
//! Reports, tool results and captured output are bounded in bytes, but a
//! cut inside a multi-byte character would leave invalid UTF-8 (or panic on
//! a `&str` slice), so every cut goes through here.
//!
//! Text a peer supplied (a node's problem report, a server's error, a
//! guest's output) may carry terminal escape sequences that rewrite what an
//! operator sees; [`printable`] and [`printable_lines`] escape them.

use std::borrow::Cow;
use std::fmt::Write;

/// Characters a terminal acts on rather than shows: C0 and C1 controls,
/// DEL, and Unicode's format characters (general category Cf: the
/// bidirectional overrides and isolates that reorder what is displayed,
/// zero-width spaces and joiners, tag characters that hide text from the
/// reader but not from a model), plus the line and paragraph separators.
/// What an operator reads before approving must be what is there.
fn acts_on_terminal(c: char, keep_lines: bool) -> bool {
    if keep_lines && (c == '\n' || c == '\t') {
        return false;
    }
    c.is_control() || is_format(c)
}

/// Unicode general category Cf (format), and U+2028/U+2029.
fn is_format(c: char) -> bool {
    matches!(c,
        '\u{00ad}' | '\u{0600}'..='\u{0605}' | '\u{061c}' | '\u{06dd}' | '\u{070f}'
        | '\u{0890}'..='\u{0891}' | '\u{08e2}' | '\u{180e}' | '\u{200b}'..='\u{200f}'
        | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206f}'
        | '\u{feff}' | '\u{fff9}'..='\u{fffb}' | '\u{110bd}' | '\u{110cd}'
        | '\u{13430}'..='\u{1343f}' | '\u{1bca0}'..='\u{1bca3}' | '\u{1d173}'..='\u{1d17a}'
        | '\u{e0001}' | '\u{e0020}'..='\u{e007f}')
}

fn escape(text: &str, keep_lines: bool) -> Cow<'_, str> {
    if !text.chars().any(|c| acts_on_terminal(c, keep_lines)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if acts_on_terminal(c, keep_lines) {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `text` on one line with every control character escaped as `\u{..}`:
/// for a field of a status line.
pub fn printable(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// [`printable`], keeping newlines and tabs: for multi-line output.
pub fn printable_lines(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

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
    fn format_characters_are_shown_not_obeyed() {
        // A right-to-left override makes "txt.exe" read as "exe.txt";
        // zero-width and tag characters hide text from the reader.
        let text = "read \u{202e}exe.txt\u{202c}, \u{200b}x\u{2060}y\u{feff} \u{e0041}\u{e0042}";
        let shown = printable_lines(text);
        assert_eq!(
            shown,
            "read \\u{202e}exe.txt\\u{202c}, \\u{200b}x\\u{2060}y\\u{feff} \\u{e0041}\\u{e0042}"
        );
        assert!(printable("plain, accented: é, 日本").starts_with("plain"));
        assert!(matches!(printable("é 日本"), Cow::Borrowed(_)));
    }

    #[test]
    fn escape_sequences_and_line_breaks_are_shown_not_obeyed() {
        assert_eq!(printable("plain text é"), "plain text é");
        assert_eq!(
            printable("\x1b[2J\x1b]0;owned\x07"),
            "\\u{1b}[2J\\u{1b}]0;owned\\u{7}"
        );
        assert_eq!(printable("a\nnode-b alive"), "a\\u{a}node-b alive");
        assert_eq!(
            printable("\u{9b}31m \u{202e}txt"),
            "\\u{9b}31m \\u{202e}txt"
        );
        assert_eq!(printable_lines("one\n\ttwo\x1b[1m"), "one\n\ttwo\\u{1b}[1m");
    }

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
