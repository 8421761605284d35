//! `sms certs init` and `sms certs issue`: the command line over
//! [`crate::certs`]; `sms certs revoke` and `sms certs revoked`, the deny
//! list a running SMS keeps ([`crate::revocations`]).

use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::Result;
use clap::{ArgGroup, Subcommand};
use spear_common::safe_println;
use spear_identity::Identity;
use spear_proto::v1::revocation::Target;
use spear_proto::v1::revocations_client::RevocationsClient;
use spear_proto::v1::{ListRevocationsRequest, Revocation, RevokeRequest};

use super::client::{connect_sms, request, status_error};
use super::ClientArgs;
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
    /// Revoke certificates at a running SMS: every SMS replica and node
    /// refuses them within seconds (admin).
    #[command(group(ArgGroup::new("what").required(true).args(["node", "admin", "sms", "serial"])))]
    Revoke {
        #[command(flatten)]
        client: ClientArgs,
        /// Every certificate of the node with this id.
        #[arg(long, value_name = "ID")]
        node: Option<String>,
        /// Every certificate of the admin with this name.
        #[arg(long, value_name = "NAME")]
        admin: Option<String>,
        /// Every SMS certificate (all replicas share the identity).
        #[arg(long)]
        sms: bool,
        /// One certificate, by the serial `sms certs issue` printed.
        #[arg(long, value_name = "HEX")]
        serial: Option<String>,
        /// Why, for whoever reads `sms certs revoked`.
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// List the certificates a running SMS refuses.
    Revoked(ClientArgs),
}

pub async fn run(command: CertsCommand) -> Result<i32> {
    match command {
        CertsCommand::Revoke {
            client,
            node,
            admin,
            sms,
            serial,
            reason,
        } => {
            let target = match (node, admin, sms, serial) {
                (Some(id), ..) => Target::Identity(Identity::Node(id).to_string()),
                (_, Some(name), ..) => Target::Identity(Identity::Admin(name).to_string()),
                (_, _, true, _) => Target::Identity(Identity::Sms.to_string()),
                (.., Some(serial)) => Target::Serial(serial),
                _ => anyhow::bail!("say what to revoke: --node, --admin, --sms or --serial"),
            };
            revoke(&client, target, reason).await?;
        }
        CertsCommand::Revoked(client) => list_revoked(&client).await?,
        CertsCommand::Init { dir, trust_domain } => {
            let ca = init(&dir, &trust_domain)?;
            safe_println!("CA for {trust_domain}: {} (give it to every process as --tls-ca; keep ca.key in {})", ca.display(), dir.display());
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
            let request = Request {
                subject,
                dns,
                ips: ip,
                days,
            };
            let issued = issue(&dir, &request)?;
            safe_println!(
                "{}: certificate {} key {} serial {}",
                issued
                    .uri
                    .as_deref()
                    .unwrap_or("a host certificate (no identity)"),
                issued.cert.display(),
                issued.key.display(),
                issued.serial
            );
        }
    }
    Ok(0)
}

/// `sms certs revoke`: SMS and, through it, every node refuse `target`.
async fn revoke(client: &ClientArgs, target: Target, reason: String) -> Result<()> {
    let shown = match &target {
        Target::Identity(identity) => identity.clone(),
        Target::Serial(serial) => format!("serial {serial}"),
    };
    let mut sms = RevocationsClient::new(connect_sms(client).await?);
    let revocation = Revocation {
        target: Some(target),
        reason,
        revoked_at_ms: 0,
    };
    let request = request(
        client,
        RevokeRequest {
            revocation: Some(revocation),
        },
    )?;
    let added = sms
        .revoke(request)
        .await
        .map_err(status_error)?
        .into_inner()
        .added;
    if added {
        safe_println!("revoked {shown}: SMS and every node refuse it from now on");
    } else {
        safe_println!("{shown} was already revoked");
    }
    Ok(())
}

/// `sms certs revoked`: what SMS refuses, when and why.
async fn list_revoked(client: &ClientArgs) -> Result<()> {
    let mut sms = RevocationsClient::new(connect_sms(client).await?);
    let list = sms
        .list(request(client, ListRevocationsRequest {})?)
        .await
        .map_err(status_error)?
        .into_inner()
        .revocations;
    for r in &list {
        let what = match &r.target {
            Some(Target::Identity(identity)) => identity.clone(),
            Some(Target::Serial(serial)) => format!("serial {serial}"),
            None => continue,
        };
        let reason = spear_common::text::printable(&r.reason);
        safe_println!(
            "{what}\trevoked {}\t{reason}",
            super::oauth::ago(r.revoked_at_ms)
        );
    }
    if list.is_empty() {
        safe_println!("no certificate is revoked");
    }
    Ok(())
}
