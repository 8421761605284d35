//! A tool's words: its fields split, normalised and weighted.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use rmcp::model::Tool;
use rust_stemmers::{Algorithm, Stemmer};

static STEMMER: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

/// Words too common in tool descriptions to tell tools apart.
const STOP: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "how", "i", "in", "into", "is",
    "it", "its", "me", "my", "of", "on", "or", "so", "that", "the", "then", "this", "to", "use",
    "what", "when", "which", "with", "you", "your",
];

/// Bytes of a field read at most: a description longer than this adds
/// nothing a search needs, and keeps the work per tool bounded.
const MAX_FIELD: usize = 4096;

/// The words of `text` as the index compares them: split at anything not
/// a letter or digit and at camelCase humps, lower-cased, common words
/// dropped, stemmed. The query is read the same way.
pub fn words(text: &str) -> Vec<String> {
    let text = spear_common::text::prefix(text, MAX_FIELD);
    let mut out = Vec::new();
    let mut word = String::new();
    let mut previous_lower = false;
    for c in text.chars() {
        if !c.is_alphanumeric() {
            flush(&mut word, &mut out);
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower {
            flush(&mut word, &mut out);
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        word.extend(c.to_lowercase());
    }
    flush(&mut word, &mut out);
    out
}

fn flush(word: &mut String, out: &mut Vec<String>) {
    if !word.is_empty() && !STOP.contains(&word.as_str()) {
        out.push(STEMMER.stem(word).into_owned());
    }
    word.clear();
}

/// One tool's words with their weighted counts, and its weighted length.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Terms {
    /// Sorted by word.
    pub(super) counts: Vec<(String, f64)>,
    pub(super) length: f64,
}

impl Terms {
    /// The terms of `tool` of server `server_id`.
    pub fn of_tool(server_id: &str, tool: &Tool) -> Terms {
        let mut fields: Vec<(f64, &str)> = vec![(3.0, &tool.name), (1.0, server_id)];
        if let Some(title) = tool.title.as_deref() {
            fields.push((2.0, title));
        }
        if let Some(title) = tool.annotations.as_ref().and_then(|a| a.title.as_deref()) {
            fields.push((2.0, title));
        }
        if let Some(description) = tool.description.as_deref() {
            fields.push((1.0, description));
        }
        if let Some(serde_json::Value::Object(properties)) = tool.input_schema.get("properties") {
            for (name, property) in properties.iter().take(64) {
                fields.push((2.0, name));
                if let Some(text) = property.get("description").and_then(|d| d.as_str()) {
                    fields.push((1.0, text));
                }
            }
        }
        Terms::of_fields(&fields)
    }

    /// The terms of `(weight, text)` fields.
    pub fn of_fields(fields: &[(f64, &str)]) -> Terms {
        let mut counts: BTreeMap<String, f64> = BTreeMap::new();
        let mut length = 0.0;
        for (weight, text) in fields {
            for word in words(text) {
                *counts.entry(word).or_default() += weight;
                length += weight;
            }
        }
        Terms {
            counts: counts.into_iter().collect(),
            length,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_normalise_and_stem() {
        assert_eq!(
            words("readMultipleFiles: Read the FILES, git_diff-unstaged v2"),
            ["read", "multipl", "file", "read", "file", "git", "diff", "unstag", "v2"]
        );
        assert_eq!(words("  ,, "), Vec::<String>::new());
        // Any text, however odd, is read without a panic.
        assert_eq!(
            words("ÉCRIRE «fichiers» 日本語"),
            ["écrire", "fichier", "日本語"]
        );
    }

    #[test]
    fn fields_are_weighted() {
        let terms = Terms::of_fields(&[(3.0, "list_files"), (1.0, "Lists files")]);
        assert_eq!(
            terms.counts,
            vec![("file".to_string(), 4.0), ("list".to_string(), 4.0)]
        );
        assert_eq!(terms.length, 8.0);
    }
}
