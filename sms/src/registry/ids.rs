//! Server ids: short, stable and safe in names, paths and logs.

/// Longest accepted server id.
pub const MAX_ID_LEN: usize = 63;

/// Checks a server id; the error says what is wrong and what is allowed.
pub fn check_server_id(id: &str) -> Result<(), String> {
    const RULE: &str =
        "use lowercase letters, digits, '-' and '_', starting with a letter or digit";
    if id.is_empty() {
        return Err(format!("server id is empty; {RULE}"));
    }
    if id.len() > MAX_ID_LEN {
        return Err(format!(
            "server id is {} characters long; the limit is {MAX_ID_LEN}",
            id.chars().count()
        ));
    }
    let mut chars = id.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !first_ok {
        return Err(format!(
            "server id '{}' must start with a lowercase letter or digit; {RULE}",
            printable(id)
        ));
    }
    if let Some(bad) = id
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '_'))
    {
        return Err(format!(
            "server id '{}' contains {bad:?}; {RULE}",
            printable(id)
        ));
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
        assert!(check_server_id("").unwrap_err().contains("empty"));
        assert!(check_server_id("Fs").unwrap_err().contains("start with"));
        assert!(check_server_id("-x").unwrap_err().contains("start with"));
        assert!(check_server_id("a.b").unwrap_err().contains("'.'"));
        assert!(check_server_id("a b").unwrap_err().contains("' '"));
        assert!(check_server_id(&"a".repeat(64))
            .unwrap_err()
            .contains("limit is 63"));
        assert!(check_server_id("é").is_err());
    }
}
