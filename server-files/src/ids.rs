//! Server ids: short, stable and safe in names, paths and logs.

/// Longest accepted server id.
pub const MAX_ID_LEN: usize = 63;

/// Why a server id is refused: what is wrong and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("server id is empty; {RULE}")]
    Empty,
    #[error("server id is {len} characters long; the limit is {MAX_ID_LEN}")]
    TooLong { len: usize },
    #[error("server id '{id}' must start with a lowercase letter or digit; {RULE}")]
    BadStart { id: String },
    #[error("server id '{id}' contains {bad:?}; {RULE}")]
    BadChar { id: String, bad: char },
}

const RULE: &str = "use lowercase letters, digits, '-' and '_', starting with a letter or digit";

/// Checks a server id.
pub fn check_server_id(id: &str) -> Result<(), IdError> {
    if id.is_empty() {
        return Err(IdError::Empty);
    }
    if id.len() > MAX_ID_LEN {
        return Err(IdError::TooLong {
            len: id.chars().count(),
        });
    }
    let first_ok = id
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !first_ok {
        return Err(IdError::BadStart { id: printable(id) });
    }
    if let Some(bad) = id
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '_'))
    {
        return Err(IdError::BadChar {
            id: printable(id),
            bad,
        });
    }
    Ok(())
}

/// The id with control characters escaped, safe to put in a log line.
fn printable(id: &str) -> String {
    id.chars().flat_map(char::escape_default).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_ids() {
        for id in ["fs", "a", "0day", "my-server_2", &"a".repeat(MAX_ID_LEN)] {
            assert!(check_server_id(id).is_ok(), "{id}");
        }
    }

    #[test]
    fn bad_ids_say_why() {
        assert!(check_server_id("")
            .unwrap_err()
            .to_string()
            .contains("empty"));
        assert!(check_server_id("Fs")
            .unwrap_err()
            .to_string()
            .contains("start with"));
        assert!(check_server_id("-x")
            .unwrap_err()
            .to_string()
            .contains("start with"));
        assert!(check_server_id("a.b")
            .unwrap_err()
            .to_string()
            .contains("'.'"));
        assert!(check_server_id("a b")
            .unwrap_err()
            .to_string()
            .contains("' '"));
        assert!(check_server_id(&"a".repeat(64))
            .unwrap_err()
            .to_string()
            .contains("limit is 63"));
        assert!(check_server_id("é").is_err());
    }
}
