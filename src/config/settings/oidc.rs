//! The OpenID Connect provider's settings (docs/oidc.md): who it is, its
//! relying parties, the key its ID tokens are signed with, and how the
//! presented claims are named.

use std::path::PathBuf;

use crate::config::declaration::{DefaultValue, Setting};
use crate::config::issuer::{ClaimsMap, Issuer};
use crate::config::oidc::subject::{PairwiseKey, SubClaims};
use crate::config::values::read_path;

/// `LANYARD_OIDC_ISSUER`: set, `lanyard verifier` is also a provider.
pub const OIDC_ISSUER: Setting<Issuer> = Setting {
    key: "oidc_issuer",
    env: "LANYARD_OIDC_ISSUER",
    flag: Some("--oidc-issuer"),
    value_name: Some("URL"),
    help: "The OpenID Connect provider's issuer URL (https); set, the verifier is a provider",
    default: DefaultValue::Described("none: the provider is off"),
    read: Issuer::parse,
    secret: false,
};

/// `LANYARD_OIDC_CLIENTS_FILE`.
pub const OIDC_CLIENTS_FILE: Setting<PathBuf> = Setting {
    key: "oidc_clients_file",
    env: "LANYARD_OIDC_CLIENTS_FILE",
    flag: Some("--oidc-clients-file"),
    value_name: Some("PATH"),
    help: "The relying parties allowed to use the provider (JSON)",
    default: DefaultValue::None,
    read: read_path,
    secret: false,
};

/// `LANYARD_OIDC_SIGNING_KEY_FILE`.
pub const OIDC_SIGNING_KEY_FILE: Setting<PathBuf> = Setting {
    key: "oidc_signing_key_file",
    env: "LANYARD_OIDC_SIGNING_KEY_FILE",
    flag: Some("--oidc-signing-key-file"),
    value_name: Some("PATH"),
    help: "The RSA key (PEM) ID tokens are signed with",
    default: DefaultValue::None,
    read: read_path,
    secret: false,
};

/// `LANYARD_OIDC_SIGNING_KEY`: environment or config file only, never a
/// flag (a flag's value shows in the process list).
pub const OIDC_SIGNING_KEY: Setting<String> = Setting {
    key: "oidc_signing_key",
    env: "LANYARD_OIDC_SIGNING_KEY",
    flag: None,
    value_name: None,
    help: "The ID token signing key: PEM, or a PKCS#11 URI",
    default: DefaultValue::None,
    read: |raw| Ok(raw.to_string()),
    secret: true,
};

/// `LANYARD_OIDC_PREVIOUS_KEY_FILE`: the key before a rotation, published
/// until the ID tokens it signed have expired.
pub const OIDC_PREVIOUS_KEY_FILE: Setting<PathBuf> = Setting {
    key: "oidc_previous_key_file",
    env: "LANYARD_OIDC_PREVIOUS_KEY_FILE",
    flag: Some("--oidc-previous-key-file"),
    value_name: Some("PATH"),
    help: "The signing key before the current one (PEM, private or public), still in the JWK set",
    default: DefaultValue::None,
    read: read_path,
    secret: false,
};

/// `LANYARD_OIDC_SUB_CLAIM`.
pub const OIDC_SUB_CLAIM: Setting<SubClaims> = Setting {
    key: "oidc_sub_claim",
    env: "LANYARD_OIDC_SUB_CLAIM",
    flag: Some("--oidc-sub-claim"),
    value_name: Some("CLAIM,..."),
    help: "The presented claims that name the person; the ID token's `sub` is made of them",
    default: DefaultValue::Described("a fresh opaque value per login"),
    read: SubClaims::parse,
    secret: false,
};

/// `LANYARD_OIDC_PAIRWISE_KEY`: environment or config file only, never a
/// flag (a flag's value shows in the process list).
pub const OIDC_PAIRWISE_KEY: Setting<PairwiseKey> = Setting {
    key: "oidc_pairwise_key",
    env: "LANYARD_OIDC_PAIRWISE_KEY",
    flag: None,
    value_name: None,
    help: "The key pairwise `sub`s are hashed under: base64 of 32+ bytes",
    default: DefaultValue::None,
    read: PairwiseKey::parse,
    secret: true,
};

/// `LANYARD_OIDC_PAIRWISE_KEY_FILE`: the same, from a file (a mounted
/// Secret).
pub const OIDC_PAIRWISE_KEY_FILE: Setting<PathBuf> = Setting {
    key: "oidc_pairwise_key_file",
    env: "LANYARD_OIDC_PAIRWISE_KEY_FILE",
    flag: Some("--oidc-pairwise-key-file"),
    value_name: Some("PATH"),
    help: "A file holding LANYARD_OIDC_PAIRWISE_KEY",
    default: DefaultValue::None,
    read: read_path,
    secret: false,
};

/// `LANYARD_OIDC_CLAIMS_MAP`.
pub const OIDC_CLAIMS_MAP: Setting<ClaimsMap> = Setting {
    key: "oidc_claims_map",
    env: "LANYARD_OIDC_CLAIMS_MAP",
    flag: Some("--oidc-claims-map"),
    value_name: Some("FROM=TO,..."),
    help: "Presented claims renamed (or, with nothing after `=`, left out) in ID tokens",
    default: DefaultValue::Described("the standard names only"),
    read: ClaimsMap::parse,
    secret: false,
};
