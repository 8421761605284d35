//! One problem found in a server declaration.

use spear_proto::v1::FileProblem;

/// What is wrong, and where: the file (or "admin request"), the JSON path
/// inside it (`$.mcpServers.fs.args[1]`; empty for the file as a whole) and
/// one sentence saying what to do. Messages never quote env or header values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub file: String,
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}: {}: {}", self.file, self.path, self.message)
        }
    }
}

impl From<Problem> for FileProblem {
    fn from(p: Problem) -> Self {
        FileProblem {
            file: p.file,
            path: p.path,
            message: p.message,
        }
    }
}
