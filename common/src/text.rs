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
/// `keep` lists the characters the caller's layout needs ([`LINES`],
/// [`STYLED`]).
fn acts_on_terminal(c: char, keep: &[char]) -> bool {
    (c.is_control() || is_format(c)) && !keep.contains(&c)
}

/// Nothing kept: one line.
const ONE_LINE: &[char] = &[];
/// Newlines and tabs kept: multi-line text.
const LINES: &[char] = &['\n', '\t'];
/// Newlines, tabs and ESC kept: a log line a formatter coloured itself.
const STYLED: &[char] = &['\n', '\t', '\x1b'];

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

fn escape<'a>(text: &'a str, keep: &[char]) -> Cow<'a, str> {
    if !text.chars().any(|c| acts_on_terminal(c, keep)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if acts_on_terminal(c, keep) {
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
    escape(text, ONE_LINE)
}

/// [`printable`], keeping newlines and tabs: for multi-line output.
pub fn printable_lines(text: &str) -> Cow<'_, str> {
    escape(text, LINES)
}

/// [`printable_lines`], keeping ESC too: for a log line whose colours
/// the formatter wrote itself, after it escaped ESC, BEL and the C1
/// controls in every field (tracing-subscriber does); the rest (carriage
/// returns, other controls, bidirectional overrides) it leaves, and this
/// escapes.
pub fn printable_styled(text: &str) -> Cow<'_, str> {
    escape(text, STYLED)
}

/// JSON text with every character a terminal acts on written as a JSON
/// `\uXXXX` escape (a surrogate pair past the BMP). serde_json escapes
/// C0 controls but writes DEL, C1 controls and format characters (U+202E)
/// raw. In valid JSON such a character can only be inside a string, where
/// the escape means the same character, so valid JSON stays valid and
/// says the same; a carriage return, which valid JSON holds only as
/// whitespace between tokens, becomes a space.
pub fn printable_json(json: &str) -> Cow<'_, str> {
    if !json.chars().any(|c| acts_on_terminal(c, LINES)) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 8);
    for c in json.chars() {
        if c == '\r' {
            out.push(' ');
        } else if acts_on_terminal(c, LINES) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{:04x}", unit);
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
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
        assert_eq!(
            printable_styled("\x1b[2mINFO\x1b[0m a\rb\u{202e}\x05\n"),
            "\x1b[2mINFO\x1b[0m a\\u{d}b\\u{202e}\\u{5}\n"
        );
    }

    #[test]
    fn json_stays_json_and_shows_what_a_terminal_would_obey() {
        let hostile = "\x1b[2J\x1b]0;t\x07 \u{9b}\u{7f} \u{202e}txt \u{e0041} é\n";
        let value = serde_json::json!({"d": hostile, "n": [1, 2]});
        for json in [
            serde_json::to_string_pretty(&value).unwrap_or_default(),
            serde_json::to_string(&value)
                .unwrap_or_default()
                .replace(',', ",\r\n"),
        ] {
            let shown = printable_json(&json);
            assert!(
                !shown.chars().any(|c| acts_on_terminal(c, LINES)),
                "{shown}"
            );
            assert!(
                shown.contains("\\u009b\\u007f \\u202etxt \\udb40\\udc41 é"),
                "{shown}"
            );
            let back: serde_json::Value = serde_json::from_str(&shown).unwrap_or_default();
            assert_eq!(back, value, "{shown}");
        }
        assert!(matches!(
            printable_json("{\"a\": \"é\\n\"}"),
            Cow::Borrowed(_)
        ));
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
