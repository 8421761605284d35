//! Why one package or remote of a registry `server.json` is not what a
//! node runs: each a sentence about "it" (the package or remote), which
//! `choose` gathers, with where it is, into the file's one problem when no
//! package or remote can be used.

/// Why a package or remote cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unusable {
    #[error("it names no {0}")]
    Unnamed(&'static str),
    #[error("it has no url")]
    NoUrl,
    #[error(
        "its url has a variable without a value; give it in the companion file's \"variables\""
    )]
    UrlVariable,
    #[error("its type '{0}' is neither streamable-http nor sse")]
    RemoteType(String),
    #[error("its registryType '{0}' is not one nodes run (npm, pypi, oci)")]
    Registry(String),
    #[error("it is an MCP bundle (mcpb): nodes do not download and unpack bundles; use another package or a remote")]
    Bundle,
    #[error("it is a NuGet package: nodes run npm, PyPI and OCI packages")]
    NuGet,
    #[error("its transport is {0}: a node runs packages over stdio; use the file's remote, or a stdio package")]
    NotStdio(String),
    #[error("its identifier '{identifier}' is {what} the release did not fill in")]
    Placeholder {
        identifier: String,
        what: &'static str,
    },
    /// `why` completes "its identifier '…' …".
    #[error("its identifier '{identifier}' {why}")]
    Identifier { identifier: String, why: String },
    #[error("its version {0}; pin one exact version (the same bytes on every node)")]
    Version(String),
    #[error("its image tag {0}; pin a tag or a digest")]
    ImageTag(String),
    #[error("its runtime argument '{arg}' is not an option {runtime} takes from a registry file (a positional runtime argument would be read as another package or image)")]
    Positional { arg: String, runtime: &'static str },
    #[error("its runtime argument '{flag}' changes what {runtime} does; a registry file may pass only {allowed} (declare the server in Spear's own file format if you mean it)")]
    Flag {
        flag: String,
        runtime: &'static str,
        allowed: String,
    },
    #[error("its runtime argument '{0}' has no value")]
    NoValue(String),
}
