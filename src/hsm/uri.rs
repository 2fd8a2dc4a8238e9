//! RFC 7512 PKCS#11 URIs as lanyard reads them: which module, which token,
//! which key, and which file holds the PIN. Parsing is pure; only
//! [`read_pin`] and [`pin_digest`] touch the file system.
//!
//! Only the attributes lanyard honours are accepted: those naming the
//! token, the key and the library, each matched against what the module
//! shows (`select`). An attribute it would ignore (a vendor's `x-...`,
//! `slot-description`) could be the one that tells two tokens apart, so
//! silently dropping it could sign with the wrong key; refusing it says so
//! at start-up instead.

use std::path::{Path, PathBuf};

use aws_lc_rs::hmac;
use cryptoki::types::RawAuthPin;

use super::error::HsmError;
use crate::files::{io_reason, read_small};
pub use select::{LibraryAttributes, LibrarySeen, TokenAttributes, TokenSeen};
use select::{parse_slot_id, parse_version};

mod select;

/// The URI scheme, compared without regard to case (RFC 3986 §3.1).
const SCHEME: &str = "pkcs11:";
/// A PIN is a few dozen bytes at most; a larger file is not a PIN file.
const MAX_PIN_BYTES: u64 = 4096;

/// What lanyard reads in a PKCS#11 URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyUri {
    /// `module-path`: the vendor's PKCS#11 library.
    pub module: PathBuf,
    /// `token`: the token's label (`CKA_LABEL` of the token, padding aside).
    pub token: String,
    /// `object`: the key's `CKA_LABEL`.
    pub object: Option<String>,
    /// `id`: the key's `CKA_ID`, percent-decoded bytes.
    pub id: Option<Vec<u8>>,
    /// `pin-source`: the file holding the user PIN.
    pub pin_file: Option<PathBuf>,
    /// `manufacturer`, `model`, `serial`, `slot-id`.
    pub token_attributes: TokenAttributes,
    /// `library-manufacturer`, `library-description`, `library-version`.
    pub library: LibraryAttributes,
}

impl KeyUri {
    /// How the key is named in messages: its label and id as given.
    pub fn object_description(&self) -> String {
        let id = self.id.as_deref().map(hex);
        match (&self.object, id) {
            (Some(label), Some(id)) => format!("`{label}` (id {id})"),
            (Some(label), None) => format!("`{label}`"),
            (None, Some(id)) => format!("with id {id}"),
            (None, None) => "(unnamed)".into(),
        }
    }

    /// Whether `seen` is the token the URI names.
    pub fn names_token(&self, seen: &TokenSeen) -> bool {
        seen.label == self.token && self.token_attributes.matches(seen)
    }

    /// The token looked for, in messages: ``labelled `prod`, serial `42` ``.
    pub fn token_description(&self) -> String {
        format!(
            "labelled `{}`{}",
            self.token,
            self.token_attributes.describe()
        )
    }

    /// A token present, in the list of those present, with what it has of
    /// the attributes the URI gives.
    pub fn present_description(&self, seen: &TokenSeen) -> String {
        format!(
            "`{}`{}",
            seen.label,
            self.token_attributes.describe_seen(seen)
        )
    }
}

/// Lower-case hex, as `softhsm2-util --id` and `pkcs11-tool` show ids.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether a setting's value is a PKCS#11 URI rather than a PEM key.
pub fn is_pkcs11_uri(value: &str) -> bool {
    value
        .trim_start()
        .get(..SCHEME.len())
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case(SCHEME))
}

/// What a parse collects before the required parts are checked.
#[derive(Default)]
struct Parts {
    module: Option<PathBuf>,
    token: Option<String>,
    object: Option<String>,
    id: Option<Vec<u8>>,
    pin_file: Option<PathBuf>,
    token_attributes: TokenAttributes,
    library: LibraryAttributes,
    seen: Vec<String>,
}

/// Parses a PKCS#11 URI naming a private key. Messages quote attribute
/// names, never values, except the labels (which are not secrets).
pub fn parse(uri: &str) -> Result<KeyUri, HsmError> {
    let uri = uri.trim();
    let rest = match uri.get(..SCHEME.len()) {
        Some(scheme) if scheme.eq_ignore_ascii_case(SCHEME) => &uri[SCHEME.len()..],
        _ => return Err(HsmError::Uri("it does not start with `pkcs11:`".into())),
    };
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let mut parts = Parts::default();
    for attribute in path.split(';').filter(|a| !a.is_empty()) {
        let (name, value) = split_attribute(attribute)?;
        parts.once(name)?;
        parts.path_attribute(name, value)?;
    }
    for attribute in query.split('&').filter(|a| !a.is_empty()) {
        let (name, value) = split_attribute(attribute)?;
        parts.once(name)?;
        parts.query_attribute(name, value)?;
    }
    parts.finish()
}

impl Parts {
    /// RFC 7512 §2.3: an attribute appears at most once.
    fn once(&mut self, name: &str) -> Result<(), HsmError> {
        if self.seen.iter().any(|seen| seen == name) {
            return Err(uri_error(format!("`{}` appears twice", shown(name))));
        }
        self.seen.push(name.to_string());
        Ok(())
    }

    fn path_attribute(&mut self, name: &str, value: &str) -> Result<(), HsmError> {
        match name {
            "token" => self.token = Some(text(name, value)?),
            "object" => self.object = Some(text(name, value)?),
            "id" => self.id = Some(decode(name, value)?),
            "type" => match text(name, value)?.as_str() {
                "private" => {}
                other => {
                    return Err(uri_error(format!(
                        "type={} names no private key; lanyard signs with one: give type=private or leave type out",
                        shown(other)
                    )));
                }
            },
            "manufacturer" => self.token_attributes.manufacturer = Some(text(name, value)?),
            "model" => self.token_attributes.model = Some(text(name, value)?),
            "serial" => self.token_attributes.serial = Some(text(name, value)?),
            "slot-id" => self.token_attributes.slot_id = Some(slot_id(value)?),
            "library-manufacturer" => self.library.manufacturer = Some(text(name, value)?),
            "library-description" => self.library.description = Some(text(name, value)?),
            "library-version" => self.library.version = Some(library_version(value)?),
            // Refused whatever its value, which is never quoted, wherever
            // it is put.
            "pin-value" => return Err(HsmError::PinValue),
            "pin-source" | "module-path" | "module-name" => {
                return Err(uri_error(format!(
                    "`{name}` belongs in the query, after `?`"
                )));
            }
            _ => return Err(unknown(name)),
        }
        Ok(())
    }

    fn query_attribute(&mut self, name: &str, value: &str) -> Result<(), HsmError> {
        match name {
            "module-path" => self.module = Some(module_path(&text(name, value)?)?),
            "pin-source" => self.pin_file = Some(pin_source(&text(name, value)?)?),
            // Refused whatever its value, which is never quoted.
            "pin-value" => return Err(HsmError::PinValue),
            // A name is looked up in p11-kit's module registry, which
            // lanyard does not read: what it loads is the one file an
            // absolute module-path names, whatever the host's configuration.
            "module-name" => {
                return Err(uri_error(
                    "`module-name` is not supported: it names a module registered with p11-kit, and lanyard loads only the file module-path names; give the module's file as module-path=/path/to/module.so"
                        .into(),
                ));
            }
            _ => return Err(unknown(name)),
        }
        Ok(())
    }

    fn finish(self) -> Result<KeyUri, HsmError> {
        let module = self.module.ok_or_else(|| {
            uri_error(
                "it has no module-path: add ?module-path=/path/to/the/vendor's/pkcs11-module.so"
                    .into(),
            )
        })?;
        let token = self
            .token
            .ok_or_else(|| uri_error("it names no token: add token=<the token's label>".into()))?;
        if self.object.is_none() && self.id.is_none() {
            return Err(uri_error(
                "it names no key: add object=<the key's label> or id=<its CKA_ID>".into(),
            ));
        }
        Ok(KeyUri {
            module,
            token,
            object: self.object,
            id: self.id,
            pin_file: self.pin_file,
            token_attributes: self.token_attributes,
            library: self.library,
        })
    }
}

fn uri_error(why: String) -> HsmError {
    HsmError::Uri(why)
}

fn unknown(name: &str) -> HsmError {
    uri_error(format!(
        "`{}` is not an attribute lanyard reads (the path takes token, object, id, type, manufacturer, model, serial, slot-id, library-manufacturer, library-description and library-version; the query module-path and pin-source)",
        shown(name)
    ))
}

/// An attribute's name as it may be quoted: a name is a short word, and
/// anything else (a PIN pasted without its name, say) is not repeated.
fn shown(name: &str) -> &str {
    let plain = !name.is_empty()
        && name.len() <= 32
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if plain { name } else { "an attribute" }
}

fn split_attribute(attribute: &str) -> Result<(&str, &str), HsmError> {
    let (name, value) = attribute.split_once('=').ok_or_else(|| {
        uri_error(
            "an attribute has no `=` (attributes are name=value, separated by `;` before the `?` and by `&` after it)"
                .into(),
        )
    })?;
    if value.is_empty() {
        return Err(uri_error(format!("`{}` is empty", shown(name))));
    }
    Ok((name, value))
}

/// Percent-decodes a value (RFC 3986 §2.1).
fn decode(name: &str, value: &str) -> Result<Vec<u8>, HsmError> {
    crate::percent::decode(value).ok_or_else(|| {
        uri_error(format!(
            "a `%` in `{}` is not followed by two hex digits",
            shown(name)
        ))
    })
}

/// A percent-decoded value that must be text (labels, paths).
fn text(name: &str, value: &str) -> Result<String, HsmError> {
    String::from_utf8(decode(name, value)?)
        .map_err(|_| uri_error(format!("`{}` is not UTF-8 once decoded", shown(name))))
}

fn slot_id(value: &str) -> Result<u64, HsmError> {
    parse_slot_id(&text("slot-id", value)?)
        .ok_or_else(|| uri_error("slot-id must be a decimal number".into()))
}

fn library_version(value: &str) -> Result<(u8, u8), HsmError> {
    parse_version(&text("library-version", value)?)
        .ok_or_else(|| uri_error("library-version must be a version such as 2 or 2.6".into()))
}

/// `module-path`: an absolute path, so that the library loaded does not
/// depend on the loader's search path.
fn module_path(value: &str) -> Result<PathBuf, HsmError> {
    let path = PathBuf::from(value);
    if !path.is_absolute() {
        return Err(uri_error(
            "module-path must be an absolute path to the module's file".into(),
        ));
    }
    Ok(path)
}

/// `pin-source`: a `file:` URI (RFC 8089) on this host, or an absolute path.
fn pin_source(value: &str) -> Result<PathBuf, HsmError> {
    let path = match value.get(..5) {
        Some(scheme) if scheme.eq_ignore_ascii_case("file:") => {
            let rest = &value[5..];
            match rest.strip_prefix("//") {
                // file:///path, or file://localhost/path
                Some(authority_and_path) => {
                    let slash = authority_and_path
                        .find('/')
                        .unwrap_or(authority_and_path.len());
                    let (host, path) = authority_and_path.split_at(slash);
                    if !(host.is_empty() || host.eq_ignore_ascii_case("localhost")) {
                        return Err(uri_error(
                            "pin-source names a file on another host; give a local file".into(),
                        ));
                    }
                    path.to_string()
                }
                None => rest.to_string(),
            }
        }
        _ => value.to_string(),
    };
    let path = PathBuf::from(path);
    if !path.is_absolute() {
        return Err(uri_error(
            "pin-source must be a file: URI or an absolute path (e.g. pin-source=file:/run/secrets/hsm-pin)"
                .into(),
        ));
    }
    Ok(path)
}

/// Reads the user PIN from its file: a regular file of at most 4 KiB, its
/// trailing newline trimmed (`echo` and Kubernetes Secrets made from
/// literals leave one or none). Nothing else is trimmed: a PIN may end in
/// a space.
pub fn read_pin(path: &Path) -> Result<RawAuthPin, HsmError> {
    read_pin_bytes(path).map(|pin| RawAuthPin::new(Box::new(pin)))
}

/// The PIN file a key's URI names (`pin-source`), if the URI is one
/// lanyard reads and names one.
pub fn pin_file_of(uri: &str) -> Option<PathBuf> {
    parse(uri).ok()?.pin_file
}

/// The PIN file's content, as [`read_pin`] reads it, as an HMAC-SHA256
/// under `key`: enough to notice that the PIN changed. Keyed with a
/// secret of the process, since a plain digest of a PIN of a few digits
/// gives the PIN to anyone who tries them all.
pub fn pin_digest(path: &Path, key: &hmac::Key) -> Result<[u8; 32], HsmError> {
    let mut pin = read_pin_bytes(path)?;
    let tag = hmac::sign(key, &pin);
    // The copy read here is not the key's, which zeroes its own.
    pin.fill(0);
    std::hint::black_box(&pin);
    let mut digest = [0; 32];
    digest.copy_from_slice(tag.as_ref());
    Ok(digest)
}

fn read_pin_bytes(path: &Path) -> Result<Vec<u8>, HsmError> {
    let unreadable = |why: String| HsmError::PinUnreadable {
        path: path.display().to_string(),
        why,
    };
    let bytes =
        read_small(path, MAX_PIN_BYTES, "a PIN file").map_err(|err| unreadable(io_reason(&err)))?;
    let pin = trim_newline(bytes);
    if pin.is_empty() {
        return Err(unreadable("it is empty".into()));
    }
    Ok(pin)
}

/// Drops one trailing `\n` or `\r\n`.
fn trim_newline(mut bytes: Vec<u8>) -> Vec<u8> {
    if bytes.last() == Some(&b'\n') {
        bytes.pop();
        if bytes.last() == Some(&b'\r') {
            bytes.pop();
        }
    }
    bytes
}

#[cfg(test)]
mod tests;
