//! What binds a session to the page and the browser that started it, with
//! nothing held by any replica (docs/verifier.md "Running many"):
//!
//! - the browser's cookie names a browser id, signed (HMAC-SHA256) so that
//!   only an id lanyard issued names a browser;
//! - the `transaction_id` `/api/start` gives the page is a handle sealed
//!   (AES-256-GCM) over the service's id, that browser id and the
//!   session's expiry. Only the page that started the session holds it (the
//!   QR code shows the service's request, not the handle), and every
//!   replica with the same keys opens it.
//!
//! A poll reads a session only with a handle that opens and a cookie that
//! names the handle's browser: a planted cookie, or the service's own id
//! read off a QR code, reads nothing. Both keys, and the one that seals
//! the OpenID Connect provider's access tokens, are stretched (HKDF) from
//! one secret: `LANYARD_VERIFIER_SESSION_KEY`, or the service account's
//! key's [`binding_secret`](crate::config::credentials::SigningKey::binding_secret).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use aws_lc_rs::aead::{AES_256_GCM, Aad, NONCE_LEN, Nonce, RandomizedNonceKey};
use aws_lc_rs::{hkdf, hmac};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::assumptions::{MAX_TRANSACTION_ID, is_transaction_id};
use crate::token::Exchanger;

/// Handles are sealed in these formats; another is refused.
const HANDLE_VERSION: u8 = 1;
const HANDLE_VERSION_AUTHORIZED: u8 = 2;
/// Bound into every handle, so no other ciphertext under the key passes.
const HANDLE_AAD: &[u8] = b"lanyard verifier session handle";
/// AES-GCM's tag.
const TAG_LEN: usize = 16;
/// What sealing adds to a text: the nonce and the tag.
pub const SEAL_OVERHEAD: usize = NONCE_LEN + TAG_LEN;
/// Version, expiry, browser id.
const HANDLE_HEADER: usize = 1 + 8 + BROWSER_ID_LEN;
const BROWSER_ID_LEN: usize = 16;
/// The longest handle: a nonce, the header, the longest service id, the
/// longest authorization request and the tag, in base64url.
pub const MAX_HANDLE: usize =
    (NONCE_LEN + HANDLE_HEADER + 2 + MAX_TRANSACTION_ID + MAX_SEALED_AUTHORIZATION + TAG_LEN)
        .div_ceil(3)
        * 4;
/// The longest authorization request a handle carries, as
/// `verifier::oidc` writes it.
pub const MAX_SEALED_AUTHORIZATION: usize = 3 * 1024;

/// A browser, as its cookie names it. Its `Debug` hides it: it is what
/// binds a session to its browser.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct BrowserId([u8; BROWSER_ID_LEN]);

impl std::fmt::Debug for BrowserId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BrowserId([redacted])")
    }
}

/// What a handle holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    /// The service's `transaction_id`.
    pub service_id: String,
    pub browser: BrowserId,
    /// Unix seconds: replicas share the wall clock, not a monotonic one.
    pub expires_at: u64,
    /// An OpenID Connect login's authorization request, as
    /// `verifier::oidc` wrote it: the session ends with a redirect to the
    /// relying party rather than the claims on the page.
    pub authorization: Option<String>,
}

/// Which of a binding secret's AES-256-GCM keys seals a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SealKey {
    /// Handles, authorization requests and codes, told apart by their
    /// purpose (the associated data).
    Shared,
    /// OpenID Connect access tokens, which carry a person's claims: a key
    /// of their own (RFC 5869 §3.2, one `info` per key), so that nothing
    /// the page or a browser holds is ever sealed under it.
    AccessTokens,
}

/// One binding secret, stretched into its keys.
struct BindingKey {
    handles: RandomizedNonceKey,
    access_tokens: RandomizedNonceKey,
    cookies: hmac::Key,
}

impl BindingKey {
    fn sealing(&self, key: SealKey) -> &RandomizedNonceKey {
        match key {
            SealKey::Shared => &self.handles,
            SealKey::AccessTokens => &self.access_tokens,
        }
    }
}

impl BindingKey {
    fn new(secret: &[u8]) -> BindingKey {
        let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, b"lanyard verifier").extract(secret);
        let stretch = |label: &[u8]| {
            let mut key = [0u8; 32];
            prk.expand(&[label], hkdf::HKDF_SHA256)
                .and_then(|okm| okm.fill(&mut key))
                .map(|()| key)
                // 32 bytes is within what HKDF-SHA256 gives (255 × 32).
                .unwrap_or_else(|_| unreachable!("HKDF-SHA256 gives 32 bytes"))
        };
        let aead = |label: &[u8]| {
            RandomizedNonceKey::new(&AES_256_GCM, &stretch(label))
                .unwrap_or_else(|_| unreachable!("a 32-byte key is AES-256's"))
        };
        BindingKey {
            handles: aead(b"handles"),
            access_tokens: aead(b"oidc access tokens"),
            cookies: hmac::Key::new(hmac::HMAC_SHA256, &stretch(b"cookies")),
        }
    }
}

/// The keys in use: the first seals handles and signs cookies; any of them
/// opens and verifies, so that sessions started under the previous key
/// outlive a rotation.
pub struct KeyRing {
    keys: Vec<BindingKey>,
}

impl std::fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeyRing({} keys, [redacted])", self.keys.len())
    }
}

impl KeyRing {
    /// From the current secret and the one before it, if any.
    pub fn new(current: &[u8], previous: Option<&[u8]>) -> KeyRing {
        let mut keys = vec![BindingKey::new(current)];
        keys.extend(previous.filter(|p| *p != current).map(BindingKey::new));
        KeyRing { keys }
    }

    fn current(&self) -> &BindingKey {
        &self.keys[0]
    }

    /// A new browser, and the cookie value that names it:
    /// `{id, hex}.{HMAC-SHA256(id), base64url}`.
    pub fn issue_cookie(&self) -> Result<(BrowserId, String), String> {
        let mut id = [0u8; BROWSER_ID_LEN];
        aws_lc_rs::rand::fill(&mut id).map_err(|_| "no randomness for a browser id")?;
        let browser = BrowserId(id);
        let value = self.cookie_for(&browser);
        Ok((browser, value))
    }

    /// A cookie naming `browser`, signed with the current key: a browser
    /// whose cookie the previous key signed keeps its id, so that the
    /// sessions its other tabs started under it stay its own.
    pub fn cookie_for(&self, browser: &BrowserId) -> String {
        let hex = hex(&browser.0);
        let tag = hmac::sign(&self.current().cookies, hex.as_bytes());
        format!("{hex}.{}", URL_SAFE_NO_PAD.encode(tag))
    }

    /// The browser a cookie value names, if lanyard issued it under one of
    /// these keys, and whether under the one that signs now: a start
    /// replaces a cookie of the previous key, which a rotation will end.
    pub fn verify_cookie(&self, value: &str) -> Option<(BrowserId, bool)> {
        let (id, tag) = value.split_once('.')?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        let id_bytes = unhex(id)?;
        self.keys
            .iter()
            .position(|key| hmac::verify(&key.cookies, id.as_bytes(), &tag).is_ok())
            .map(|at| (BrowserId(id_bytes), at == 0))
    }

    /// The page's handle for a session. `service_id` is one the service
    /// gave, checked (assumption 5).
    pub fn seal(&self, sealed: &Sealed) -> Result<String, String> {
        let authorization = sealed.authorization.as_deref().unwrap_or("");
        let mut text = Vec::with_capacity(
            HANDLE_HEADER + 2 + sealed.service_id.len() + authorization.len() + TAG_LEN,
        );
        // Version 1 holds the service's id alone; version 2 its length
        // first, then the sealed authorization request of an OpenID
        // Connect login (docs/oidc.md).
        let version = match sealed.authorization {
            None => HANDLE_VERSION,
            Some(_) => HANDLE_VERSION_AUTHORIZED,
        };
        text.push(version);
        text.extend_from_slice(&sealed.expires_at.to_be_bytes());
        text.extend_from_slice(&sealed.browser.0);
        if sealed.authorization.is_some() {
            let length = u16::try_from(sealed.service_id.len())
                .map_err(|_| "a service id too long to seal")?;
            text.extend_from_slice(&length.to_be_bytes());
        }
        text.extend_from_slice(sealed.service_id.as_bytes());
        text.extend_from_slice(authorization.as_bytes());
        self.seal_bytes(SealKey::Shared, HANDLE_AAD, text)
    }

    /// What a handle holds, if one of these keys sealed it.
    pub fn open(&self, handle: &str) -> Option<Sealed> {
        let plain = self.open_bytes(SealKey::Shared, HANDLE_AAD, handle)?;
        parse_sealed(&plain)
    }

    /// `plain` sealed (AES-256-GCM) under the current secret's `key`,
    /// bound to `purpose` so that nothing sealed for another purpose opens
    /// as it: a nonce, the text and the tag, in base64url.
    pub fn seal_bytes(
        &self,
        key: SealKey,
        purpose: &[u8],
        mut plain: Vec<u8>,
    ) -> Result<String, String> {
        plain.reserve(TAG_LEN);
        let nonce = self
            .current()
            .sealing(key)
            .seal_in_place_append_tag(Aad::from(purpose), &mut plain)
            .map_err(|_| "cannot seal")?;
        let mut sealed = Vec::with_capacity(NONCE_LEN + plain.len());
        sealed.extend_from_slice(nonce.as_ref());
        sealed.extend_from_slice(&plain);
        Ok(URL_SAFE_NO_PAD.encode(sealed))
    }

    /// What [`KeyRing::seal_bytes`] sealed for `purpose` under `key`, if
    /// one of these secrets' did.
    pub fn open_bytes(&self, key: SealKey, purpose: &[u8], sealed: &str) -> Option<Vec<u8>> {
        let bytes = URL_SAFE_NO_PAD.decode(sealed).ok()?;
        if bytes.len() < NONCE_LEN + TAG_LEN {
            return None;
        }
        let (nonce, text) = bytes.split_at(NONCE_LEN);
        self.keys.iter().find_map(|secret| {
            let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
            let mut text = text.to_vec();
            let plain = secret
                .sealing(key)
                .open_in_place(nonce, Aad::from(purpose), &mut text)
                .ok()?;
            Some(plain.to_vec())
        })
    }
}

fn parse_sealed(plain: &[u8]) -> Option<Sealed> {
    let (header, rest) = plain.split_at_checked(HANDLE_HEADER)?;
    let expires_at = u64::from_be_bytes(header[1..9].try_into().ok()?);
    let browser = BrowserId(header[9..].try_into().ok()?);
    let (service_id, authorization) = match header[0] {
        HANDLE_VERSION => (rest, None),
        HANDLE_VERSION_AUTHORIZED => {
            let (length, rest) = rest.split_at_checked(2)?;
            let length = usize::from(u16::from_be_bytes(length.try_into().ok()?));
            let (service_id, authorization) = rest.split_at_checked(length)?;
            let authorization = std::str::from_utf8(authorization).ok()?;
            (service_id, Some(authorization.to_string()))
        }
        _ => return None,
    };
    let service_id = std::str::from_utf8(service_id).ok()?;
    is_transaction_id(service_id).then(|| Sealed {
        service_id: service_id.to_string(),
        browser,
        expires_at,
        authorization,
    })
}

/// A handle as the page sends it back: base64url, at most [`MAX_HANDLE`].
pub fn is_handle(text: &str) -> bool {
    (1..=MAX_HANDLE).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Lower-case hexadecimal.
pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Lowercase hex of exactly [`BROWSER_ID_LEN`] bytes, as [`hex`] writes it.
fn unhex(text: &str) -> Option<[u8; BROWSER_ID_LEN]> {
    if text.len() != 2 * BROWSER_ID_LEN
        || !text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return None;
    }
    let mut out = [0u8; BROWSER_ID_LEN];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// Where the keys come from: given (`LANYARD_VERIFIER_SESSION_KEY`), or
/// derived from the service account's key. A derived key survives a
/// credentials rotation: the key before the last reload stays accepted as
/// previous, and for [`ROTATION_SETTLE`] after the reload is seen the
/// previous key still seals, so that replicas that see the rotated Secret
/// at different moments open each other's handles throughout.
pub enum KeySource {
    Given(Arc<KeyRing>),
    Derived {
        exchanger: Arc<Exchanger>,
        made: Mutex<Option<Made>>,
    },
}

/// How long after a replica first sees new credentials it keeps sealing
/// with the previous key: Kubernetes updates a mounted Secret within the
/// kubelet's sync period plus its cache's lifetime (a minute each by
/// default), and lanyard notices within 10 s.
pub const ROTATION_SETTLE: Duration = Duration::from_secs(300);

/// The ring made for the secrets last seen, and since when they were seen.
pub struct Made {
    from: ([u8; 32], Option<[u8; 32]>),
    since: Instant,
    seal_previous: bool,
    ring: Arc<KeyRing>,
}

impl KeySource {
    pub fn given(keys: &crate::config::SessionKeys) -> KeySource {
        KeySource::Given(Arc::new(KeyRing::new(
            &keys.current,
            keys.previous.as_deref(),
        )))
    }

    pub fn derived(exchanger: Arc<Exchanger>) -> KeySource {
        KeySource::Derived {
            exchanger,
            made: Mutex::new(None),
        }
    }

    /// The keys in use now.
    pub fn ring(&self) -> Arc<KeyRing> {
        let (exchanger, made) = match self {
            KeySource::Given(ring) => return ring.clone(),
            KeySource::Derived { exchanger, made } => (exchanger, made),
        };
        let current = *exchanger.credentials().key.binding_secret();
        let previous = exchanger
            .previous_credentials()
            .map(|credentials| *credentials.key.binding_secret());
        let now = Instant::now();
        let mut made = made.lock().unwrap_or_else(PoisonError::into_inner);
        let from = (current, previous);
        let since = match &*made {
            Some(m) if m.from == from => m.since,
            // New credentials seen (or the first call).
            _ => now,
        };
        let seal_previous = previous.is_some() && now < since + ROTATION_SETTLE;
        if let Some(m) = &*made
            && m.from == from
            && m.seal_previous == seal_previous
        {
            return m.ring.clone();
        }
        let ring = Arc::new(match previous {
            Some(previous) if seal_previous => KeyRing::new(&previous, Some(&current)),
            _ => KeyRing::new(&current, previous.as_ref().map(|p| &p[..])),
        });
        *made = Some(Made {
            from,
            since,
            seal_previous,
            ring: ring.clone(),
        });
        ring
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::credentials::Credentials;

    fn ring(secret: u8) -> KeyRing {
        KeyRing::new(&[secret; 32], None)
    }

    fn sealed(browser: BrowserId) -> Sealed {
        Sealed {
            service_id: "6f1c0e2a-4b7d-4e21-9a3c-0d5e8f7a1b2c".into(),
            browser,
            expires_at: 1_800_000_000,
            authorization: None,
        }
    }

    #[test]
    fn a_handle_opens_under_any_replica_with_the_key_and_no_other() {
        let (browser, _) = ring(1).issue_cookie().unwrap();
        let handle = ring(1).seal(&sealed(browser)).unwrap();
        assert!(is_handle(&handle), "{handle}");
        assert!(handle.len() <= MAX_HANDLE);
        assert_eq!(
            ring(1).open(&handle),
            Some(sealed(browser)),
            "another replica"
        );
        assert_eq!(ring(2).open(&handle), None);
        assert!(
            !handle.contains("6f1c0e2a"),
            "the service's id is not readable"
        );
        // One bit changed anywhere: refused.
        let mut bytes = URL_SAFE_NO_PAD.decode(&handle).unwrap();
        for at in [0, NONCE_LEN, bytes.len() - 1] {
            bytes[at] ^= 1;
            assert_eq!(ring(1).open(&URL_SAFE_NO_PAD.encode(&bytes)), None, "{at}");
            bytes[at] ^= 1;
        }
        for junk in ["", "AAAA", "not base64!", &handle[..handle.len() - 2]] {
            assert_eq!(ring(1).open(junk), None, "{junk}");
        }
    }

    #[test]
    fn the_longest_service_id_fits_a_handle() {
        let (browser, _) = ring(1).issue_cookie().unwrap();
        let mut long = sealed(browser);
        long.service_id = "x".repeat(MAX_TRANSACTION_ID);
        let handle = ring(1).seal(&long).unwrap();
        assert!(is_handle(&handle));
        assert_eq!(ring(1).open(&handle), Some(long));
    }

    #[test]
    fn the_previous_key_still_opens_and_verifies_while_the_current_seals() {
        let old = ring(1);
        let (browser, cookie) = old.issue_cookie().unwrap();
        let handle = old.seal(&sealed(browser)).unwrap();
        let rotated = KeyRing::new(&[2; 32], Some(&[1; 32]));
        assert_eq!(rotated.open(&handle), Some(sealed(browser)));
        assert_eq!(rotated.verify_cookie(&cookie), Some((browser, false)));
        let fresh = rotated.seal(&sealed(browser)).unwrap();
        assert_eq!(old.open(&fresh), None, "sealed under the current key");
        assert_eq!(ring(2).open(&fresh), Some(sealed(browser)));
        assert_eq!(ring(3).verify_cookie(&cookie), None, "a key nobody holds");
    }

    #[test]
    fn only_cookies_lanyard_issued_name_a_browser() {
        let key = ring(1);
        let (browser, cookie) = key.issue_cookie().unwrap();
        assert_eq!(key.verify_cookie(&cookie), Some((browser, true)));
        let id = cookie.split_once('.').unwrap().0;
        for forged in [
            id.to_string(),
            format!("{id}."),
            format!("{id}.AAAA"),
            ring(2).issue_cookie().unwrap().1,
            cookie.to_uppercase(),
            String::new(),
        ] {
            assert_eq!(key.verify_cookie(&forged), None, "{forged}");
        }
        assert!(!format!("{browser:?}").contains(id));
    }

    /// The account key rotated under a running replica: for
    /// [`ROTATION_SETTLE`] it still seals with the previous key (which
    /// replicas that have not reloaded hold) while opening under both, then
    /// seals with the new one, still opening what the previous sealed.
    #[tokio::test(start_paused = true)]
    async fn a_derived_key_seals_with_the_previous_until_the_rotation_settles() {
        let exchanger =
            exchanger_with(include_str!("../../tests/fixtures/rsa2048.pkcs8.pem").into());
        let source = KeySource::derived(exchanger.clone());
        let old = *exchanger.credentials().key.binding_secret();
        let only_old = KeyRing::new(&old, None);
        let before = source.ring().seal(&sealed(BrowserId([1; 16]))).unwrap();

        let generated = crate::mock::generate_rsa_key().unwrap();
        let rotated = crate::config::credentials::parse_private_key(generated.private_pem.expose());
        let credentials = exchanger.credentials();
        exchanger.replace_credentials(Credentials {
            client_id: credentials.client_id.clone(),
            organization_id: credentials.organization_id.clone(),
            iam_audience: credentials.iam_audience.clone(),
            token_uri: credentials.token_uri.clone(),
            key: Arc::new(rotated.unwrap()),
        });
        let new = *exchanger.credentials().key.binding_secret();
        let only_new = KeyRing::new(&new, None);
        let during = source.ring().seal(&sealed(BrowserId([2; 16]))).unwrap();
        assert!(
            only_old.open(&during).is_some(),
            "sealed with the previous key"
        );
        assert!(source.ring().open(&before).is_some());
        let by_a_reloaded_replica = only_new.seal(&sealed(BrowserId([3; 16]))).unwrap();
        assert!(source.ring().open(&by_a_reloaded_replica).is_some());

        tokio::time::advance(ROTATION_SETTLE - Duration::from_secs(1)).await;
        let late = source.ring().seal(&sealed(BrowserId([4; 16]))).unwrap();
        assert!(only_old.open(&late).is_some(), "still settling");

        tokio::time::advance(Duration::from_secs(2)).await;
        let after = source.ring().seal(&sealed(BrowserId([5; 16]))).unwrap();
        assert!(only_new.open(&after).is_some(), "sealed with the new key");
        assert!(only_old.open(&after).is_none());
        assert!(
            source.ring().open(&before).is_some(),
            "the previous still opens"
        );
    }

    /// An exchanger holding `pem` as its account key; it is never asked
    /// for a token.
    fn exchanger_with(pem: String) -> Arc<Exchanger> {
        let closed = "http://127.0.0.1:9/token";
        let env: std::collections::HashMap<String, String> = [
            ("SA_CLIENT_ID", "sa-test"),
            ("SA_PRIVATE_KEY", pem.as_str()),
            ("SA_IAM_AUDIENCE", closed),
            ("SA_TOKEN_URI", closed),
            ("SA_ORGANIZATION_ID", "org-test"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let flags = crate::config::Flags::default();
        let loaded =
            crate::config::Loaded::load(&flags, &env, crate::config::Requirement::NoUpstream);
        let Ok(crate::config::Loaded::Token(token)) = loaded else {
            panic!("not `lanyard token`'s settings: {loaded:?}");
        };
        crate::access::ServiceAccess::of_default(&token.access, &token.signing)
            .unwrap()
            .exchanger
    }
}
