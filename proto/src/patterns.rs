//! Tool-name patterns: anchored globs with `*` and `?`.
//!
//! Part of the contract: SMS validates patterns in server files with
//! [`check_pattern`], nodes apply them (and task and session lists) with
//! [`glob_match`], so both sides must agree on exactly what they mean.

/// Longest accepted pattern.
pub const MAX_PATTERN_LEN: usize = 128;

/// Why a pattern is refused; said after the pattern ("'x y' contains …").
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("is an empty pattern; use \"*\" for every tool, or remove it")]
    Empty,
    #[error("is a pattern over {MAX_PATTERN_LEN} characters")]
    TooLong,
    #[error("contains whitespace or control characters, which tool names never have")]
    Whitespace,
}

/// Checks one pattern of `allowed_tools` / `denied_tools`.
pub fn check_pattern(pattern: &str) -> Result<(), PatternError> {
    if pattern.is_empty() {
        return Err(PatternError::Empty);
    }
    if pattern.chars().count() > MAX_PATTERN_LEN {
        return Err(PatternError::TooLong);
    }
    if pattern.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(PatternError::Whitespace);
    }
    Ok(())
}

/// Whether `name` matches the anchored glob `pattern` (`*` any run, `?` one char).
pub fn glob_match(pattern: &str, name: &str) -> bool {
    // Tool names and patterns are nearly always ASCII: match bytes without
    // allocating; otherwise match characters.
    if pattern.is_ascii() && name.is_ascii() {
        return glob(pattern.as_bytes(), name.as_bytes());
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    glob(&p, &n)
}

/// Iterative glob matching with backtracking to the last `*`.
fn glob<T: PartialEq + Copy + From<u8>>(p: &[T], n: &[T]) -> bool {
    let (star, any) = (T::from(b'*'), T::from(b'?'));
    let (mut pi, mut ni) = (0, 0);
    let mut last_star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == any || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == star {
            last_star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = last_star {
            pi = sp + 1;
            ni = sn + 1;
            last_star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == star)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_are_anchored() {
        assert!(glob_match("read_*", "read_file"));
        assert!(!glob_match("read_*", "xread_file"));
        assert!(glob_match("*", ""));
        assert!(glob_match("a?c", "abc"));
        assert!(!glob_match("a?c", "abbc"));
        assert!(glob_match("*_file", "write_file"));
        assert!(glob_match("a*b*c", "aXbYc"));
        assert!(!glob_match("write_file", "write_file2"));
        assert!(glob_match("lire_*", "lire_fichié"));
        assert!(glob_match("é?", "éa"));
        assert!(!glob_match("é?", "éab"));
    }

    #[test]
    fn bad_patterns() {
        assert!(check_pattern("").is_err());
        assert!(check_pattern("read file").is_err());
        assert!(check_pattern(&"a".repeat(129)).is_err());
        assert!(check_pattern("read_*").is_ok());
    }
}
