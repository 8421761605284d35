//! The verifier against a real HTTP issuer (discovery and JWKS served by
//! axum on loopback) with real ES256 keys: what it accepts, each refusal's
//! sentence, key rotation, and that made-up key ids cannot make it hammer
//! the issuer.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use parking_lot::Mutex;
use serde_json::{json, Value};

use super::{OidcConfig, OidcVerifier, TokenRefused};

struct Key {
    kid: &'static str,
    der: Vec<u8>,
    jwk: Value,
}

fn key(kid: &'static str) -> Key {
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let raw = pair.public_key_raw();
    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    Key {
        kid,
        der: pair.serialize_der(),
        jwk: json!({"kty": "EC", "crv": "P-256", "x": b64(&raw[1..33]), "y": b64(&raw[33..65]),
                    "kid": kid, "alg": "ES256", "use": "sig"}),
    }
}

/// An issuer serving `published` as its JWKS; counts the JWKS fetches.
struct Issuer {
    url: String,
    published: Arc<Mutex<Vec<Value>>>,
    fetches: Arc<AtomicUsize>,
}

async fn issuer() -> Issuer {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let published = Arc::new(Mutex::new(Vec::new()));
    let fetches = Arc::new(AtomicUsize::new(0));
    let (keys, count, base) = (published.clone(), fetches.clone(), url.clone());
    let app =
        axum::Router::new()
            .route(
                "/.well-known/openid-configuration",
                axum::routing::get(move || {
                    let base = base.clone();
                    async move {
                        axum::Json(json!({"issuer": base, "jwks_uri": format!("{base}/jwks")}))
                    }
                }),
            )
            .route(
                "/jwks",
                axum::routing::get(move || {
                    count.fetch_add(1, Ordering::SeqCst);
                    let keys = keys.lock().clone();
                    async move { axum::Json(json!({"keys": keys})) }
                }),
            );
    tokio::spawn(async move { axum::serve(listener, app).await });
    Issuer {
        url,
        published,
        fetches,
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn token(key: &Key, claims: Value) -> String {
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(key.kid.to_string());
    jsonwebtoken::encode(&header, &claims, &EncodingKey::from_ec_der(&key.der)).unwrap()
}

fn claims(issuer: &str, sub: &str) -> Value {
    json!({"iss": issuer, "sub": sub, "aud": "spear", "exp": now() + 600, "iat": now(),
           "groups": ["eng"]})
}

fn verifier(issuer: &Issuer, refetch_every: Duration) -> OidcVerifier {
    let mut verifier = OidcVerifier::new(OidcConfig {
        issuer: issuer.url.clone(),
        audience: "spear".into(),
        groups_claim: "groups".into(),
    })
    .unwrap();
    verifier.refetch_every = refetch_every;
    verifier
}

#[tokio::test]
async fn a_good_token_is_its_subject_and_each_bad_one_says_why() {
    let issuer = issuer().await;
    let k1 = key("k1");
    issuer.published.lock().push(k1.jwk.clone());
    let v = verifier(&issuer, Duration::from_secs(30));

    let alice = v
        .verify(&token(&k1, claims(&issuer.url, "alice")))
        .await
        .unwrap();
    assert_eq!(alice.label(), format!("{}#alice", issuer.url));
    assert_eq!(alice.groups, vec!["eng".to_string()]);

    let mut expired = claims(&issuer.url, "alice");
    expired["exp"] = json!(now() - 120);
    assert_eq!(
        v.verify(&token(&k1, expired)).await,
        Err(TokenRefused::Expired)
    );
    let mut other = claims(&issuer.url, "alice");
    other["aud"] = json!("another-app");
    assert_eq!(
        v.verify(&token(&k1, other)).await,
        Err(TokenRefused::Audience("spear".into()))
    );
    let foreign = v
        .verify(&token(&k1, claims("https://evil.example", "alice")))
        .await;
    assert!(
        matches!(foreign, Err(TokenRefused::ForeignIssuer { .. })),
        "{foreign:?}"
    );
    let mut no_sub = claims(&issuer.url, "");
    no_sub["sub"] = json!("");
    assert_eq!(
        v.verify(&token(&k1, no_sub)).await,
        Err(TokenRefused::NoSubject)
    );
    // A key the client could know (HMAC) is never taken, whatever it says.
    let hs = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &claims(&issuer.url, "alice"),
        &EncodingKey::from_secret(b"guessable"),
    )
    .unwrap();
    assert_eq!(
        v.verify(&hs).await,
        Err(TokenRefused::Algorithm(Algorithm::HS256))
    );
    // Signed by a key of the same name that the issuer never published.
    let impostor = Key {
        kid: "k1",
        ..key("k1")
    };
    assert_eq!(
        v.verify(&token(&impostor, claims(&issuer.url, "alice")))
            .await,
        Err(TokenRefused::Signature)
    );
    assert_eq!(
        v.verify("not.a-token").await,
        Err(TokenRefused::Malformed(
            "it is not three dot-separated parts"
        ))
    );
}

#[tokio::test]
async fn rotated_keys_are_fetched_and_made_up_ones_do_not_hammer_the_issuer() {
    let issuer = issuer().await;
    let (k1, k2) = (key("k1"), key("k2"));
    issuer.published.lock().push(k1.jwk.clone());
    let v = verifier(&issuer, Duration::ZERO);
    v.verify(&token(&k1, claims(&issuer.url, "alice")))
        .await
        .unwrap();
    // The issuer rotates: k2 in, k1 out. A k2 token makes one fetch.
    *issuer.published.lock() = vec![k2.jwk.clone()];
    v.verify(&token(&k2, claims(&issuer.url, "alice")))
        .await
        .unwrap();
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), 2);

    // Within the refetch interval, tokens naming unknown keys are refused
    // from the cache: a flood of them costs the issuer nothing.
    let throttled = verifier(&issuer, Duration::from_secs(3600));
    throttled
        .verify(&token(&k2, claims(&issuer.url, "alice")))
        .await
        .unwrap();
    let before = issuer.fetches.load(Ordering::SeqCst);
    for _ in 0..20 {
        let forged = Key {
            kid: "made-up",
            ..key("x")
        };
        assert_eq!(
            throttled
                .verify(&token(&forged, claims(&issuer.url, "alice")))
                .await,
            Err(TokenRefused::UnknownKey)
        );
    }
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), before);
}

#[tokio::test]
async fn an_issuer_that_cannot_be_reached_is_said_and_nothing_is_accepted() {
    // A port nobody listens on.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let v = OidcVerifier::new(OidcConfig {
        issuer: url.clone(),
        audience: "spear".into(),
        groups_claim: "groups".into(),
    })
    .unwrap();
    let k1 = key("k1");
    let refused = v.verify(&token(&k1, claims(&url, "alice"))).await;
    match refused {
        Err(TokenRefused::Unreachable(why)) => {
            assert!(why.contains("error sending request"), "{why}")
        }
        other => panic!("{other:?}"),
    }
    // Asked again within the refetch interval: told the same, not that the
    // key is unknown, and the issuer is not asked again.
    let again = v.verify(&token(&k1, claims(&url, "alice"))).await;
    assert!(
        matches!(again, Err(TokenRefused::Unreachable(_))),
        "{again:?}"
    );
}
