//! How an operator's terminal takes part in a login: the command-line
//! flags `spearlet mcp` and `sms oauth login` share.

use clap::Args;

use crate::{Browser, OAuthError, Redirect};

/// Where the authorization server sends the browser back, and how the
/// browser is opened.
#[derive(Debug, Clone, Args)]
pub struct LoginFlags {
    /// The loopback port the authorization server redirects to [default: any free port].
    #[arg(long, default_value_t = 0)]
    pub redirect_port: u16,
    /// Do not listen for the redirect: paste the address the browser ends on.
    #[arg(long)]
    pub paste: bool,
    /// A command that opens the authorization URL (its last argument),
    /// for example xdg-open [default: only print it].
    #[arg(long, value_name = "COMMAND")]
    pub browser: Option<String>,
}

impl LoginFlags {
    /// The redirect these flags ask for (a loopback listener is bound now).
    pub async fn redirect(&self) -> Result<Redirect, OAuthError> {
        if self.paste {
            Ok(Redirect::paste(self.redirect_port))
        } else {
            Redirect::loopback(self.redirect_port).await
        }
    }

    pub fn browser(&self) -> Browser {
        Browser::from_command_line(self.browser.as_deref().unwrap_or(""))
    }
}
