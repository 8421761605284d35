//! [`matches`]: whether a URI is one a resource template (RFC 6570) can
//! expand to, so a read of it goes to the template's server. Levels 1–2:
//! `{var}` stands for one or more characters other than `/`, `?` and `#`;
//! `{+var}` and `{#var}` for one or more of any. Other operators are
//! taken as `{var}`.

/// Whether `uri` matches `template`.
pub fn matches(template: &str, uri: &str) -> bool {
    match template.find('{') {
        None => template == uri,
        Some(open) => {
            let Some(close) = template[open..].find('}').map(|c| open + c) else {
                return template == uri;
            };
            let (literal, expression, rest) = (
                &template[..open],
                &template[open + 1..close],
                &template[close + 1..],
            );
            let Some(tail) = uri.strip_prefix(literal) else {
                return false;
            };
            let any = expression.starts_with('+') || expression.starts_with('#');
            // The expression takes 1..n characters; the rest must match.
            tail.char_indices()
                .skip(1)
                .map(|(i, _)| i)
                .chain(std::iter::once(tail.len()))
                .take_while(|&end| any || !tail[..end].contains(['/', '?', '#']))
                .filter(|&end| end > 0)
                .any(|end| matches(rest, &tail[end..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn simple_expressions_take_one_segment() {
        assert!(matches(
            "test://template/{id}/data",
            "test://template/123/data"
        ));
        assert!(!matches(
            "test://template/{id}/data",
            "test://template/1/2/data"
        ));
        assert!(!matches(
            "test://template/{id}/data",
            "test://template//data"
        ));
        assert!(!matches(
            "test://template/{id}/data",
            "test://other/123/data"
        ));
        assert!(matches("file:///{path}", "file:///notes.txt"));
        assert!(!matches("file:///{path}", "file:///a/b.txt"));
    }

    #[test]
    fn reserved_expressions_take_any_characters() {
        assert!(matches("file:///{+path}", "file:///a/b.txt"));
        assert!(matches(
            "repo://{owner}/{repo}/{+path}",
            "repo://me/spear/src/lib.rs"
        ));
        assert!(!matches("repo://{owner}/{repo}/{+path}", "repo://me/spear"));
    }

    #[test]
    fn without_expressions_only_the_same_uri() {
        assert!(matches("test://static", "test://static"));
        assert!(!matches("test://static", "test://static2"));
        assert!(!matches("test://{unclosed", "test://x"));
    }
}
