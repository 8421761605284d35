//! TLS 1.3 session tickets that a restarted process still reads:
//! [`Tickets::for_material`] is the `ticketer` of every server
//! configuration (`crate::configs::server_config`).
//!
//! Why: when SMS restarts, every node reconnects at once, and a full
//! handshake costs each side two ECDSA verifications and a signature. A
//! node that shows a ticket from before the restart resumes instead (a
//! fresh X25519 exchange, no certificates), which is most of what a
//! reconnect costs (docs/benchmarks.md). rustls' own ticketer keeps its
//! keys in memory only, so a restart would void every ticket; ours derives
//! its key from what the process already holds on disk.
//!
//! The key is HKDF-SHA256 of the process's private key and its trust
//! anchors:
//! - whoever can read the tickets could already act as this server (it
//!   holds its key), so tickets add no secret to guard;
//! - a new key or a new CA bundle voids every ticket, and peers fall back
//!   to a full handshake that proves their certificate again.
//!
//! A resumed connection skips the peer's chain, so what the chain would
//! have checked is checked elsewhere: the leaf's dates when the connection
//! is accepted (`crate::incoming`), revocation at the [`crate::Gate`] as
//! for every connection (rustls restores the peer's certificates from the
//! ticket), the CA by the key. A ticket older than [`LIFETIME`] is refused
//! here, since rustls leaves the age to the ticketer.
//!
//! Layout: `issued` (8 bytes, big-endian seconds since the epoch, also
//! the AEAD's associated data) ‖ nonce (12) ‖ AES-256-GCM ciphertext and
//! tag.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use aws_lc_rs::hkdf::{Salt, HKDF_SHA256};
use aws_lc_rs::rand::{SecureRandom, SystemRandom};
use rustls::server::ProducesTickets;

use crate::material::Material;

/// How long a ticket resumes a session: TLS 1.3's most (RFC 8446 §4.6.1).
/// A node's connection older than this comes back with a full handshake.
pub(crate) const LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);

/// Domain separation: this key is for nothing but tickets.
const SALT: &[u8] = b"spear tls 1.3 session tickets v1";

const ISSUED_LEN: usize = 8;

/// Seals and opens session tickets with a key derived from one
/// [`Material`].
pub(crate) struct Tickets {
    key: LessSafeKey,
    random: SystemRandom,
    /// Seconds since the epoch; tests move it.
    now: fn() -> u64,
}

impl std::fmt::Debug for Tickets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.write_str("Tickets")
    }
}

fn system_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Tickets {
    /// The ticketer for `material`: the same key in every process that
    /// holds the same private key and trust anchors. `None` only if the
    /// crypto library refuses to derive a key (then the server issues no
    /// tickets, as before they were kept).
    pub(crate) fn for_material(material: &Material) -> Option<Arc<Tickets>> {
        Self::with_clock(material, system_now).map(Arc::new)
    }

    fn with_clock(material: &Material, now: fn() -> u64) -> Option<Tickets> {
        let mut input = material.key.secret_der().to_vec();
        for anchor in &material.roots.roots {
            for part in [
                anchor.subject.as_ref(),
                anchor.subject_public_key_info.as_ref(),
            ] {
                input.extend_from_slice(&(part.len() as u32).to_be_bytes());
                input.extend_from_slice(part);
            }
        }
        let mut bytes = [0u8; 32];
        let derived = Salt::new(HKDF_SHA256, SALT)
            .extract(&input)
            .expand(&[], &AES_256_GCM)
            .and_then(|okm| okm.fill(&mut bytes));
        input.fill(0);
        let key = derived.and_then(|()| UnboundKey::new(&AES_256_GCM, &bytes));
        bytes.fill(0);
        Some(Tickets {
            key: LessSafeKey::new(key.ok()?),
            random: SystemRandom::new(),
            now,
        })
    }
}

impl ProducesTickets for Tickets {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        LIFETIME.as_secs() as u32
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let issued = (self.now)().to_be_bytes();
        // A random nonce: one key seals far fewer than the 2^32 tickets
        // random GCM nonces allow (10,000 nodes renewing daily seal 3.7
        // million a year), and a key changes with the server's key.
        let mut nonce = [0u8; NONCE_LEN];
        self.random.fill(&mut nonce).ok()?;
        let mut sealed = plain.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(issued),
                &mut sealed,
            )
            .ok()?;
        let mut ticket = Vec::with_capacity(ISSUED_LEN + NONCE_LEN + sealed.len());
        ticket.extend_from_slice(&issued);
        ticket.extend_from_slice(&nonce);
        ticket.extend_from_slice(&sealed);
        Some(ticket)
    }

    fn decrypt(&self, ticket: &[u8]) -> Option<Vec<u8>> {
        let (issued, rest) = ticket.split_first_chunk::<ISSUED_LEN>()?;
        let (nonce, sealed) = rest.split_first_chunk::<NONCE_LEN>()?;
        let age = (self.now)().checked_sub(u64::from_be_bytes(*issued))?;
        if age > LIFETIME.as_secs() {
            return None;
        }
        let mut opened = sealed.to_vec();
        let plain = self
            .key
            .open_in_place(
                Nonce::assume_unique_for_key(*nonce),
                Aad::from(*issued),
                &mut opened,
            )
            .ok()?;
        let len = plain.len();
        opened.truncate(len);
        Some(opened)
    }
}

/// Why a resumed connection must be closed: the certificate its peer
/// proved when the session began is outside its dates now (expired since,
/// or, with a clock stepped back, not yet valid). `None` after a full
/// handshake, where rustls checked the chain itself, and for a peer that
/// showed no certificate. A certificate that no longer parses cannot have
/// passed the first handshake, and is refused too.
pub(crate) fn resumed_outside_dates(session: &rustls::ServerConnection) -> Option<String> {
    if session.handshake_kind() != Some(rustls::HandshakeKind::Resumed) {
        return None;
    }
    let leaf = session.peer_certificates()?.first()?;
    let Ok((_, parsed)) = x509_parser::parse_x509_certificate(leaf.as_ref()) else {
        return Some("its certificate no longer parses".into());
    };
    let validity = parsed.validity();
    let now = x509_parser::time::ASN1Time::now();
    if now > validity.not_after {
        return Some(format!("its certificate expired at {}", validity.not_after));
    }
    if now < validity.not_before {
        return Some(format!(
            "its certificate is not valid until {}",
            validity.not_before
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_certs::{a_ca, material};

    const T0: u64 = 1_800_000_000;

    fn at_t0() -> u64 {
        T0
    }
    fn a_week_later() -> u64 {
        T0 + LIFETIME.as_secs()
    }
    fn a_week_and_a_second_later() -> u64 {
        T0 + LIFETIME.as_secs() + 1
    }
    fn before_t0() -> u64 {
        T0 - 1
    }

    #[test]
    fn a_ticket_opens_in_another_process_with_the_same_key_and_anchors_only() {
        let (ca, ca_der) = a_ca();
        let sms = material(&ca, &ca_der, "spiffe://test.example/sms");
        let ticketer = |m: &Material| Tickets::for_material(m).unwrap();
        let ticket = ticketer(&sms).encrypt(b"session").unwrap();
        // A restart: the same files, a new ticketer.
        assert_eq!(
            ticketer(&sms).decrypt(&ticket).as_deref(),
            Some(&b"session"[..])
        );

        // Another key (another replica, or a new key for SMS).
        let other = material(&ca, &ca_der, "spiffe://test.example/sms");
        assert_eq!(ticketer(&other).decrypt(&ticket), None);

        // The same key under another CA bundle.
        let (ca2, ca2_der) = a_ca();
        let mut moved = material(&ca2, &ca2_der, "spiffe://test.example/sms");
        moved.key = Arc::clone(&sms.key);
        assert_eq!(ticketer(&moved).decrypt(&ticket), None);
    }

    #[test]
    fn a_ticket_is_refused_once_older_than_its_lifetime_or_when_altered() {
        let (ca, ca_der) = a_ca();
        let sms = material(&ca, &ca_der, "spiffe://test.example/sms");
        let ticket = Tickets::with_clock(&sms, at_t0)
            .unwrap()
            .encrypt(b"session")
            .unwrap();
        let open_at =
            |now: fn() -> u64, ticket: &[u8]| Tickets::with_clock(&sms, now)?.decrypt(ticket);

        assert!(open_at(a_week_later, &ticket).is_some());
        assert_eq!(open_at(a_week_and_a_second_later, &ticket), None);
        // Issued "in the future" (a clock stepped back): refused.
        assert_eq!(open_at(before_t0, &ticket), None);

        // Its date rewritten to look younger: the tag no longer matches.
        let mut younger = ticket.clone();
        younger[..ISSUED_LEN].copy_from_slice(&(T0 + 100).to_be_bytes());
        assert_eq!(open_at(a_week_and_a_second_later, &younger), None);
        // One bit of the sealed session flipped.
        let mut flipped = ticket.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert_eq!(open_at(at_t0, &flipped), None);
        // Too short to hold a nonce.
        assert_eq!(open_at(at_t0, &ticket[..ISSUED_LEN + 3]), None);
    }
}
