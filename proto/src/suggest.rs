//! "Did you mean ...?" for unknown keys: of server files (SMS) and of
//! task configs (both sides).

/// The known key closest to `unknown`, when it is close enough to be a typo.
pub fn closest<'a>(unknown: &str, known: &[&'a str]) -> Option<&'a str> {
    let unknown = unknown.to_ascii_lowercase().replace('-', "_");
    known
        .iter()
        .map(|k| (distance(&unknown, k), *k))
        .filter(|(d, k)| *d <= (k.len() / 3).max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Levenshtein distance over chars.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let current = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(current + 1);
            prev = current;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_find_their_key_and_nonsense_finds_none() {
        let keys = ["allowed_tools", "denied_tools", "command", "args", "env"];
        assert_eq!(closest("allowd_tools", &keys), Some("allowed_tools"));
        assert_eq!(closest("comand", &keys), Some("command"));
        assert_eq!(closest("Allowed-Tools", &keys), Some("allowed_tools"));
        assert_eq!(closest("argz", &keys), Some("args"));
        assert_eq!(closest("zzzzzzzz", &keys), None);
    }
}
