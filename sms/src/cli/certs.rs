//! `sms certs init` and `sms certs issue`: the command line over
//! [`crate::certs`].

use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::Result;
use clap::{ArgGroup, Subcommand};
use spear_identity::Identity;

use crate::certs::{init, issue, Request, Subject};

#[derive(Debug, Subcommand)]
pub enum CertsCommand {
    /// Make a CA for a trust domain in DIR (ca.pem, ca.key, trust-domain).
    Init {
        dir: PathBuf,
        /// The installation's trust domain, e.g. spear.example.com.
        #[arg(long)]
        trust_domain: String,
    },
    /// Issue a key and certificate from the CA in DIR for SMS, a node or an admin.
    #[command(group(ArgGroup::new("who").required(true).args(["sms", "node", "admin", "host"])))]
    Issue {
        dir: PathBuf,
        /// For an SMS replica (the name only names the files' subject).
        #[arg(long, value_name = "NAME")]
        sms: Option<String>,
        /// For the node with this id.
        #[arg(long, value_name = "ID")]
        node: Option<String>,
        /// For an admin with this name.
        #[arg(long, value_name = "NAME")]
        admin: Option<String>,
        /// For a server that is not Spear (etcd): no identity, only --dns/--ip.
        #[arg(long, value_name = "NAME")]
        host: Option<String>,
        /// DNS names to add (repeatable; identity checks use the URI SAN).
        #[arg(long)]
        dns: Vec<String>,
        /// IP addresses to add (repeatable).
        #[arg(long)]
        ip: Vec<IpAddr>,
        /// Days the certificate is valid.
        #[arg(long, default_value_t = 365)]
        days: u32,
    },
}

pub fn run(command: CertsCommand) -> Result<i32> {
    match command {
        CertsCommand::Init { dir, trust_domain } => {
            let ca = init(&dir, &trust_domain)?;
            println!("CA for {trust_domain}: {} (give it to every process as --tls-ca; keep ca.key in {})", ca.display(), dir.display());
        }
        CertsCommand::Issue {
            dir,
            sms,
            node,
            admin,
            host,
            dns,
            ip,
            days,
        } => {
            let subject = match (sms, node, admin, host) {
                (Some(_), ..) => Subject::Identity(Identity::Sms),
                (_, Some(id), ..) => Subject::Identity(Identity::Node(id)),
                (_, _, Some(name), _) => Subject::Identity(Identity::Admin(name)),
                (.., Some(name)) => Subject::Host(name),
                (None, None, None, None) => {
                    anyhow::bail!("say whom for: --sms, --node, --admin or --host")
                }
            };
            let issued = issue(
                &dir,
                &Request {
                    subject,
                    dns,
                    ips: ip,
                    days,
                },
            )?;
            println!(
                "{}: certificate {} key {}",
                issued
                    .uri
                    .as_deref()
                    .unwrap_or("a host certificate (no identity)"),
                issued.cert.display(),
                issued.key.display()
            );
        }
    }
    Ok(0)
}
