//! The words status output, logs and metrics use for the protocol's enums
//! and sources, next to the generated types so both binaries say the same.

use crate::v1::{
    source, CredentialState, Elicitation, OauthGrant, ServerRecord, SyncState, Transport,
};

impl SyncState {
    /// `connecting`, `synced`, `stale` (`unknown` when unset).
    pub fn label(self) -> &'static str {
        match self {
            SyncState::Unspecified => "unknown",
            SyncState::Connecting => "connecting",
            SyncState::Synced => "synced",
            SyncState::Stale => "stale",
        }
    }

    /// The label of a wire value; values this build does not know are
    /// `unknown`.
    pub fn label_of(value: i32) -> &'static str {
        SyncState::try_from(value)
            .unwrap_or(SyncState::Unspecified)
            .label()
    }
}

impl Transport {
    /// The server-file spelling: `stdio`, `streamable_http`, `sse`
    /// (`unspecified` when unset).
    pub fn label(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::StreamableHttp => "streamable_http",
            Transport::Sse => "sse",
            Transport::Unspecified => "unspecified",
        }
    }

    /// The label of a wire value.
    pub fn label_of(value: i32) -> &'static str {
        Transport::try_from(value)
            .unwrap_or(Transport::Unspecified)
            .label()
    }
}

impl Elicitation {
    /// The server-file spelling: `decline`, `accept_defaults`.
    pub fn label(self) -> &'static str {
        match self {
            Elicitation::Decline => "decline",
            Elicitation::AcceptDefaults => "accept_defaults",
        }
    }

    /// The policy of a wire value; values this build does not know decline.
    pub fn of(value: i32) -> Elicitation {
        Elicitation::try_from(value).unwrap_or(Elicitation::Decline)
    }
}

impl ServerRecord {
    /// Where the record came from: `file:NAME`, `admin`, or `unknown`.
    pub fn source_label(&self) -> String {
        match self.source.as_ref().and_then(|s| s.kind.as_ref()) {
            Some(source::Kind::File(file)) => format!("file:{file}"),
            Some(source::Kind::Admin(_)) => "admin".into(),
            None => "unknown".into(),
        }
    }
}

impl OauthGrant {
    /// The server-file spelling: `authorization_code`, `client_credentials`,
    /// `enterprise_managed`, `jwt_bearer`, `token_exchange`.
    pub fn label(self) -> &'static str {
        match self {
            OauthGrant::AuthorizationCode => "authorization_code",
            OauthGrant::ClientCredentials => "client_credentials",
            OauthGrant::EnterpriseManaged => "enterprise_managed",
            OauthGrant::JwtBearer => "jwt_bearer",
            OauthGrant::TokenExchange => "token_exchange",
        }
    }

    /// The label of a wire value; values this build does not know are the default grant.
    pub fn label_of(value: i32) -> &'static str {
        OauthGrant::try_from(value)
            .unwrap_or(OauthGrant::AuthorizationCode)
            .label()
    }
}

impl CredentialState {
    /// How `sms oauth status` names it.
    pub fn label(self) -> &'static str {
        match self {
            CredentialState::Unspecified => "unknown",
            CredentialState::Valid => "valid",
            CredentialState::Expired => "expired",
            CredentialState::NotLoggedIn => "not logged in",
            CredentialState::NeedsLogin => "needs login",
            CredentialState::Unreadable => "unreadable",
            CredentialState::Orphaned => "orphaned",
            CredentialState::OnDemand => "on demand",
        }
    }

    /// The label of a wire value.
    pub fn label_of(value: i32) -> &'static str {
        CredentialState::try_from(value)
            .unwrap_or(CredentialState::Unspecified)
            .label()
    }
}

impl crate::v1::ServerSpec {
    /// A stdio server's command line as a node runs it (before its `${NAME}`
    /// references are resolved there), each argument quoted where a shell
    /// would split or expand it: what `sms validate` and `sms servers` show
    /// for a server made from a registry server.json. The node never runs
    /// it through a shell; quoting only makes the argv readable.
    pub fn command_line(&self) -> String {
        std::iter::once(&self.command)
            .chain(&self.args)
            .map(|arg| shell_quoted(arg))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn shell_quoted(arg: &str) -> String {
    let plain = !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@+,%".contains(c));
    if plain {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}
