//! How the operator's browser is sent to the authorization page.

use std::process::Stdio;

/// Where an authorization URL goes. The URL always goes to stderr, so an
/// operator on another machine can open it by hand.
#[derive(Debug, Clone, Default)]
pub enum Browser {
    /// Only print it.
    #[default]
    Print,
    /// Also run this program with the URL as its last argument (for
    /// example `xdg-open`, or `curl -sL` for an authorization server that
    /// redirects straight back, as test servers do).
    Command(Vec<String>),
}

impl Browser {
    /// `--browser`'s value, split on whitespace; empty means [`Browser::Print`].
    pub fn from_command_line(text: &str) -> Browser {
        let words: Vec<String> = text.split_whitespace().map(str::to_string).collect();
        if words.is_empty() {
            Browser::Print
        } else {
            Browser::Command(words)
        }
    }

    /// Prints `url` and starts the browser command, not waiting for it: the
    /// redirect it leads to is what [`Redirect::wait`](crate::Redirect::wait) waits for.
    pub fn open(&self, url: &str) {
        eprintln!("Open this URL to authorize:\n  {url}");
        let Browser::Command(words) = self else {
            return;
        };
        let Some((program, args)) = words.split_first() else {
            return;
        };
        let spawned = tokio::process::Command::new(program)
            .args(args)
            .arg(url)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(false)
            .spawn();
        match spawned {
            // Reaped in the background; its exit status says nothing the
            // redirect does not.
            Ok(mut child) => {
                tokio::spawn(async move {
                    let _ = child.wait().await;
                });
            }
            Err(error) => {
                eprintln!("could not start the browser '{program}': {error}; open the URL by hand")
            }
        }
    }
}
