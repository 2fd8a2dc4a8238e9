//! The clients' own brands (docs/oidc.md, "A brand per client"), as their
//! logins' pages show them. Each logo and each stylesheet is served at a
//! URL named by its content (`/assets/brand/logo-<digest>`,
//! `/assets/brand/accent-<rrggbb>.css`): clients that share a logo share
//! its URL, the URLs are as many as the clients file's distinct logos and
//! accents, and a cache may keep each for good, since a new logo is a new
//! URL. Every replica with the same clients file names the same URLs.

use std::collections::HashMap;

use aws_lc_rs::digest::{SHA256, digest};
use bytes::Bytes;
use http::Response;
use http_body_util::Full;

use super::render::Branded;
use crate::config::oidc::Clients;
use crate::verifier::binding;

/// Where the clients' logos and stylesheets are served.
const PREFIX: &str = "/assets/brand/";
/// Bytes of a logo's SHA-256 in its URL: enough that two logos of one
/// clients file never share one.
const DIGEST_BYTES: usize = 16;
/// A URL that names its content: kept a year, never revalidated.
const FOREVER: &str = "public, max-age=31536000, immutable";

/// A logo or a stylesheet of a client's brand.
struct File {
    content_type: &'static str,
    body: Bytes,
    logo: bool,
}

/// Every client's brand, and the files their pages load.
#[derive(Default)]
pub struct ClientBrands {
    by_client: HashMap<String, Branded>,
    files: HashMap<String, File>,
}

impl ClientBrands {
    /// The brands of the `clients` that have one.
    pub fn new(clients: Option<&Clients>) -> ClientBrands {
        let mut brands = ClientBrands::default();
        for client in clients.into_iter().flat_map(Clients::iter) {
            let Some(brand) = &client.brand else { continue };
            let logo = brand.logo.as_ref().map_or_else(String::new, |logo| {
                let path = format!("{PREFIX}logo-{}", hex(&logo.bytes));
                brands.files.entry(path.clone()).or_insert_with(|| File {
                    content_type: logo.content_type,
                    body: logo.bytes.clone(),
                    logo: true,
                });
                path
            });
            let style = brand.accent.map_or_else(String::new, |accent| {
                let path = format!("{PREFIX}accent-{}.css", &accent.hex()[1..]);
                brands.files.entry(path.clone()).or_insert_with(|| File {
                    content_type: "text/css; charset=utf-8",
                    body: Bytes::from(accent.stylesheet()),
                    logo: false,
                });
                path
            });
            let branded = Branded {
                brand: brand.clone(),
                logo,
                style,
            };
            brands.by_client.insert(client.id.clone(), branded);
        }
        brands
    }

    /// The brand of the client `id`, if it has one of its own.
    pub fn get(&self, id: &str) -> Option<&Branded> {
        self.by_client.get(id)
    }

    /// The logo or stylesheet at `path`, if it is one of theirs.
    pub fn file(&self, path: &str, head: bool) -> Option<Response<Full<Bytes>>> {
        let file = self.files.get(path)?;
        Some(super::brand_file(
            file.content_type,
            file.body.clone(),
            file.logo,
            FOREVER,
            head,
        ))
    }
}

/// The first [`DIGEST_BYTES`] of `bytes`' SHA-256, in hexadecimal.
fn hex(bytes: &[u8]) -> String {
    binding::hex(&digest(&SHA256, bytes).as_ref()[..DIGEST_BYTES])
}
