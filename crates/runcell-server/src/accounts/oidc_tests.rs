//! ID tokens checked as a provider's would be, made here with the
//! provider side of `openidconnect` and a throwaway RSA key
//! (`testdata/`): a good one passes, and a wrong issuer, audience, nonce,
//! an expired token and a signature by another key are each refused.

use chrono::{Duration as Span, Utc};
use openidconnect::core::{
    CoreIdToken, CoreIdTokenClaims, CoreJsonWebKeySet, CoreJwsSigningAlgorithm,
    CoreProviderMetadata, CoreResponseType, CoreRsaPrivateSigningKey, CoreSubjectIdentifierType,
};
use openidconnect::{
    Audience, AuthUrl, EmptyAdditionalClaims, EmptyAdditionalProviderMetadata, EndUserEmail,
    IssuerUrl, JsonWebKeyId, JsonWebKeySetUrl, PrivateSigningKey, ResponseTypes, StandardClaims,
    SubjectIdentifier,
};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::*;
use crate::config::OidcConfig;

const ISSUER: &str = "https://idp.example.test/realm";
const CLIENT: &str = "runcell";
const NONCE: &str = "n-0S6_WzA2Mj";

fn key(pem: &str) -> CoreRsaPrivateSigningKey {
    CoreRsaPrivateSigningKey::from_pem(pem, Some(JsonWebKeyId::new("k1".into())))
        .expect("a PEM key")
}

fn provider_key() -> CoreRsaPrivateSigningKey {
    key(include_str!("testdata/provider-key.pem"))
}

fn client() -> Client {
    let metadata = CoreProviderMetadata::new(
        IssuerUrl::new(ISSUER.into()).expect("issuer"),
        AuthUrl::new(format!("{ISSUER}/auth")).expect("auth url"),
        JsonWebKeySetUrl::new(format!("{ISSUER}/jwks")).expect("jwks url"),
        vec![ResponseTypes::new(vec![CoreResponseType::Code])],
        vec![CoreSubjectIdentifierType::Public],
        vec![CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256],
        EmptyAdditionalProviderMetadata {},
    )
    .set_jwks(CoreJsonWebKeySet::new(vec![
        provider_key().as_verification_key(),
    ]));
    CoreClient::from_provider_metadata(metadata, ClientId::new(CLIENT.into()), None)
        .set_redirect_uri(
            RedirectUrl::new("http://127.0.0.1:3000/auth/oidc/callback".into()).expect("url"),
        )
}

struct Made {
    issuer: &'static str,
    audience: &'static str,
    nonce: &'static str,
    expires_in: Span,
    key: CoreRsaPrivateSigningKey,
    /// The `email_verified` claim, if the token has one.
    email_verified: Option<bool>,
}

fn good() -> Made {
    Made {
        issuer: ISSUER,
        audience: CLIENT,
        nonce: NONCE,
        expires_in: Span::minutes(5),
        key: provider_key(),
        email_verified: Some(true),
    }
}

fn token(made: &Made) -> CoreIdToken {
    let now = Utc::now();
    let claims = CoreIdTokenClaims::new(
        IssuerUrl::new(made.issuer.into()).expect("issuer"),
        vec![Audience::new(made.audience.into())],
        now + made.expires_in,
        now - Span::minutes(10),
        StandardClaims::new(SubjectIdentifier::new("alice".into()))
            .set_email(Some(EndUserEmail::new("alice@example.test".into())))
            .set_email_verified(made.email_verified),
        EmptyAdditionalClaims {},
    )
    .set_nonce(Some(Nonce::new(made.nonce.into())));
    CoreIdToken::new(
        claims,
        &made.key,
        CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256,
        None,
        None,
    )
    .expect("a signed token")
}

fn check(made: &Made) -> Result<Identity, OidcError> {
    identity_in(&client(), &token(made), &Nonce::new(NONCE.into()))
}

#[test]
fn a_good_token_names_the_person() {
    let identity = check(&good()).expect("valid");
    assert_eq!(identity.issuer, ISSUER);
    assert_eq!(identity.subject, "alice");
    assert_eq!(identity.email, "alice@example.test");
    assert!(identity.email_verified);
    assert_eq!(identity.name, "");
}

#[test]
fn only_an_explicit_email_verified_vouches_for_the_email() {
    for (claim, vouched) in [(Some(true), true), (Some(false), false), (None, false)] {
        let identity = check(&Made {
            email_verified: claim,
            ..good()
        })
        .expect("valid");
        assert_eq!(identity.email, "alice@example.test");
        assert_eq!(identity.email_verified, vouched, "email_verified {claim:?}");
    }
}

#[test]
fn wrong_issuer_audience_nonce_expiry_and_signature_are_refused() {
    let cases = [
        (
            "issuer",
            Made {
                issuer: "https://evil.example.test/realm",
                ..good()
            },
        ),
        (
            "audience",
            Made {
                audience: "another-app",
                ..good()
            },
        ),
        (
            "nonce",
            Made {
                nonce: "replayed-nonce",
                ..good()
            },
        ),
        (
            "expired",
            Made {
                expires_in: Span::minutes(-1),
                ..good()
            },
        ),
        (
            "signature",
            Made {
                key: key(include_str!("testdata/other-key.pem")),
                ..good()
            },
        ),
    ];
    for (what, made) in cases {
        match check(&made) {
            Err(OidcError::InvalidToken(reason)) => {
                eprintln!("{what}: {reason}");
            }
            other => panic!("a token with a wrong {what} was taken: {other:?}"),
        }
    }
}

#[test]
fn a_tampered_token_is_refused() {
    // Another subject's claims under the first token's signature.
    let text = token(&good()).to_string();
    let parts: Vec<&str> = text.split('.').collect();
    let claims = URL_SAFE_NO_PAD.decode(parts[1]).expect("base64url claims");
    let claims = String::from_utf8(claims)
        .expect("JSON")
        .replace("\"alice\"", "\"mallory\"");
    let forged = format!(
        "{}.{}.{}",
        parts[0],
        URL_SAFE_NO_PAD.encode(claims),
        parts[2]
    );
    let forged: CoreIdToken = forged.parse().expect("still shaped like a token");
    assert!(matches!(
        identity_in(&client(), &forged, &Nonce::new(NONCE.into())),
        Err(OidcError::InvalidToken(_))
    ));
}

#[test]
fn an_answer_is_taken_once() {
    let oidc = Oidc::new(&OidcConfig {
        issuer: ISSUER.into(),
        client_id: CLIENT.into(),
        ..OidcConfig::default()
    })
    .expect("configured");
    let until = now_secs() + 60;
    oidc.remember("state-1", until).expect("first");
    assert!(matches!(
        oidc.remember("state-1", until),
        Err(OidcError::Replayed)
    ));
    oidc.remember("state-2", until).expect("another");
    // An expired one is forgotten (its cookie could not be unsealed anyway).
    oidc.remember("old", 1).expect("expired");
    oidc.remember("old", 1).expect("forgotten when it expired");
}

#[test]
fn claims_are_cut_on_a_character_boundary() {
    let long = "é".repeat(150);
    let cut = bounded(&long);
    assert!(cut.len() <= MAX_CLAIM_BYTES);
    assert!(cut.chars().all(|c| c == 'é'));
}
