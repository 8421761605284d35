//! `${NAME}` and `${NAME:-default}` references.
//!
//! In server files and in a task's `wasi.env`. SMS only checks that
//! references are well formed; nodes resolve them from their own
//! environment, so secrets never pass through SMS. `$${` stands for a
//! literal `${`.

/// Checks every reference in `text`. The error never quotes `text` itself
/// (it may hold a secret), only the reference's name.
pub fn check_references(text: &str) -> Result<(), String> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'$' && bytes.get(i + 1) == Some(&b'$') && bytes.get(i + 2) == Some(&b'{') {
            i += 3;
            continue;
        }
        if bytes[i] == b'$' && bytes.get(i + 1) == Some(&b'{') {
            let Some(len) = text[i + 2..].find('}') else {
                return Err(
                    "has an unterminated '${'; close it with '}' or write '$${' for a literal '${'"
                        .into(),
                );
            };
            let inner = &text[i + 2..i + 2 + len];
            let name = inner.split_once(":-").map_or(inner, |(name, _)| name);
            if !is_env_name(name) {
                return Err(format!(
                    "has a reference '${{{}}}' whose name is not a valid variable name (letters, digits and '_', not starting with a digit)",
                    name.chars().take(64).collect::<String>()
                ));
            }
            i += 2 + len + 1;
            continue;
        }
        i += 1;
    }
    Ok(())
}

/// Names of environment variables: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// True when `text` starts with a reference (a URL given entirely by one).
pub fn starts_with_reference(text: &str) -> bool {
    text.starts_with("${")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_formed_references_pass() {
        for ok in [
            "plain",
            "${TOKEN}",
            "Bearer ${TOKEN}",
            "${A:-default}",
            "${A:-}",
            "$${literal}",
            "$5",
            "a$b",
        ] {
            assert!(check_references(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn bad_references_fail_without_quoting_the_value() {
        let err = check_references("secret-value ${TOKEN").unwrap_err();
        assert!(err.contains("unterminated"));
        assert!(!err.contains("secret-value"));
        let err = check_references("secret-value ${1BAD}").unwrap_err();
        assert!(err.contains("1BAD") && !err.contains("secret-value"));
        assert!(check_references("${}").is_err());
        assert!(check_references("${A-B}").is_err());
    }
}
