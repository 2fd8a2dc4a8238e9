//! A client's own `brand` in the clients file (docs/oidc.md, "A brand
//! per client"): the keys and checks of the brand file
//! (docs/verifier.md, "Branding"), read from the client's JSON entry
//! rather than from TOML, its `logo` from the clients file's folder when
//! relative. Every problem names the client and the key.
//!
//! Logos are held once per content, however many clients share one, and
//! all of them together are bounded: each is served at its own URL for
//! as long as lanyard runs.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

use crate::config::brand::Brand;

/// The clients' distinct logos together, at most: a few dozen logos of a
/// few kilobytes each, or sixteen of the largest a brand may have.
pub const MAX_CLIENT_LOGOS_BYTES: usize = 4 * 1024 * 1024;

/// What the clients' brands share while the file is read: its folder, and
/// the logos read so far, each content once.
#[derive(Debug)]
pub struct Brands {
    dir: PathBuf,
    logos: HashSet<Bytes>,
    bytes: usize,
}

impl Brands {
    /// Brands whose relative `logo` paths are in `dir`, the clients
    /// file's folder.
    pub fn in_dir(dir: &Path) -> Brands {
        Brands {
            dir: dir.to_path_buf(),
            logos: HashSet::new(),
            bytes: 0,
        }
    }

    /// The client's `brand` among its `fields`, when it has one, for the
    /// client at `at` with the id and `client_name` `named`; `None` with
    /// its problems recorded otherwise.
    pub fn field(
        &mut self,
        at: usize,
        named: (Option<&str>, Option<&str>),
        fields: &serde_json::Map<String, Value>,
        problems: &mut Vec<String>,
    ) -> Option<Arc<Brand>> {
        let (id, client_name) = named;
        let read = self.read(at, id, client_name, fields.get("brand")?);
        read.map(Arc::new)
            .map_err(|whys| problems.extend(whys))
            .ok()
    }

    /// The brand `value` describes for the client at `at` (`id` when its
    /// id is known); a brand without `name` takes the client's
    /// `client_name`. Else every problem, each naming the client and the
    /// key.
    pub fn read(
        &mut self,
        at: usize,
        id: Option<&str>,
        client_name: Option<&str>,
        value: &Value,
    ) -> Result<Brand, Vec<String>> {
        let client = match id {
            Some(id) => format!("clients[{at}].brand (client `{id}`)"),
            None => format!("clients[{at}].brand"),
        };
        let Value::Object(fields) = value else {
            return Err(vec![format!(
                "{client}: must be an object with the keys of a brand file: name, logo, accent, purpose and claims"
            )]);
        };
        let mut table: toml::Table = fields
            .iter()
            .map(|(key, value)| (key.clone(), toml_of(value)))
            .collect();
        if let (false, Some(name)) = (table.contains_key("name"), client_name) {
            table.insert("name".into(), toml::Value::String(name.to_string()));
        }
        let mut brand = Brand::from_table(&table, &self.dir).map_err(|problems| {
            problems
                .into_iter()
                .map(|why| format!("{client}: {why}"))
                .collect::<Vec<_>>()
        })?;
        if let Some(logo) = &mut brand.logo {
            logo.bytes = self
                .shared(&logo.bytes)
                .map_err(|why| vec![format!("{client}: `logo`: {why}")])?;
        }
        Ok(brand)
    }

    /// The one copy of a logo with these bytes, kept if it is new and the
    /// logos together stay within [`MAX_CLIENT_LOGOS_BYTES`].
    fn shared(&mut self, bytes: &Bytes) -> Result<Bytes, String> {
        if let Some(held) = self.logos.get(bytes) {
            return Ok(held.clone());
        }
        if self.bytes + bytes.len() > MAX_CLIENT_LOGOS_BYTES {
            return Err(format!(
                "the clients' different logos come to more than {} MiB together; lanyard serves each of them for as long as it runs: make them smaller, or share one",
                MAX_CLIENT_LOGOS_BYTES / (1024 * 1024)
            ));
        }
        self.bytes += bytes.len();
        self.logos.insert(bytes.clone());
        Ok(bytes.clone())
    }
}

/// A JSON value as the brand's TOML reader takes it. TOML has no null: a
/// null becomes an empty array, which every key of a brand refuses as the
/// wrong type, as it refuses a number where a string belongs.
fn toml_of(value: &Value) -> toml::Value {
    match value {
        Value::String(text) => toml::Value::String(text.clone()),
        Value::Bool(flag) => toml::Value::Boolean(*flag),
        Value::Number(number) => match number.as_i64() {
            Some(integer) => toml::Value::Integer(integer),
            None => toml::Value::Float(number.as_f64().unwrap_or_default()),
        },
        Value::Null => toml::Value::Array(Vec::new()),
        Value::Array(items) => toml::Value::Array(items.iter().map(toml_of).collect()),
        Value::Object(fields) => toml::Value::Table(
            fields
                .iter()
                .map(|(key, value)| (key.clone(), toml_of(value)))
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;

    use crate::config::oidc::Clients;

    const SECRET: &str = "s3cr3t-s3cr3t-s3cr3t";

    /// The clients file holding the client `shop` with `brand`, read in
    /// `dir`.
    fn read(dir: &Path, brand: serde_json::Value) -> Result<Clients, Vec<String>> {
        let file = json!({"clients": [{
            "client_id": "shop", "client_secret": SECRET,
            "redirect_uris": ["https://shop.example/cb"], "brand": brand,
        }]});
        Clients::parse(&file.to_string(), dir)
    }

    #[test]
    fn a_client_brand_has_the_brand_files_keys_and_its_logo_beside_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let svg = std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("config/brand-logo.example.svg"),
        )
        .unwrap();
        std::fs::write(dir.path().join("shop.svg"), &svg).unwrap();
        let clients = read(
            dir.path(),
            json!({"name": "The Shop", "logo": "shop.svg", "accent": "#1f4e8c",
                   "purpose": {"en": "To sell you wine.", "de": "Um Ihnen Wein zu verkaufen."},
                   "claims": {"age_over_18": {"en": "Of age", "de": "Volljährig"}}}),
        )
        .unwrap();
        let brand = clients.get("shop").unwrap().brand.as_ref().unwrap();
        assert_eq!(brand.name, "The Shop");
        assert_eq!(brand.logo.as_ref().unwrap().bytes, svg);
        assert_eq!(brand.accent.unwrap().hex(), "#1f4e8c");
        let de = "de".parse().unwrap();
        assert_eq!(brand.purpose(&de), Some("Um Ihnen Wein zu verkaufen."));
        assert_eq!(brand.label("age_over_18", &de), Some("Volljährig"));
    }

    #[test]
    fn a_brand_without_a_name_takes_the_clients_name() {
        let file = json!({"clients": [
            {"client_id": "a", "redirect_uris": ["https://a.example/cb"], "client_name": "Shop A",
             "brand": {"accent": "#1f4e8c"}},
            {"client_id": "b", "redirect_uris": ["https://b.example/cb"]},
        ]});
        let clients = Clients::parse(&file.to_string(), Path::new("/nonexistent")).unwrap();
        assert_eq!(
            clients.get("a").unwrap().brand.as_ref().unwrap().name,
            "Shop A"
        );
        assert!(clients.get("b").unwrap().brand.is_none());
    }

    /// Each of the brand file's checks, once, as a client's brand meets
    /// it: refused, naming the client and the key, never the secret.
    #[test]
    fn a_bad_client_brand_is_refused_naming_the_client_and_the_key() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("runs.svg"),
            r#"<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>"#,
        )
        .unwrap();
        for (brand, why) in [
            (json!(5), "must be an object with the keys of a brand file"),
            (json!({"accent": "#1f4e8c"}), "`name`: is required"),
            (
                json!({"name": "A", "accent": "#777777"}),
                "`accent`: #777777 has a contrast of 4.48:1",
            ),
            (
                json!({"name": "A", "accent": null}),
                "`accent`: must be a string",
            ),
            (
                json!({"name": "A", "accnet": "#1f4e8c"}),
                "unknown key `accnet`",
            ),
            (
                json!({"name": "A\u{202E}B"}),
                "`name`: has a control, bidirectional",
            ),
            (
                json!({"name": "A", "purpose": "x"}),
                "`purpose`: must be a table of texts",
            ),
            (
                json!({"name": "A", "purpose": {"e_n": "x"}}),
                "`purpose.e_n`: is not a well-formed BCP 47",
            ),
            (
                json!({"name": "A", "claims": {"given name": {"en": "x"}}}),
                "`claims.given name`: is not a claim's name",
            ),
            (
                json!({"name": "A", "claims": {"age_over_18": {"en": "x".repeat(61)}}}),
                "`claims.age_over_18.en`: is 61 characters long",
            ),
            (
                json!({"name": "A", "logo": "none.svg"}),
                "none.svg cannot be read: no such file",
            ),
            (json!({"name": "A", "logo": "runs.svg"}), "`logo`: "),
        ] {
            let problems = read(dir.path(), brand.clone()).unwrap_err();
            assert_eq!(problems.len(), 1, "{brand}: {problems:?}");
            let expected = "clients[0].brand (client `shop`): ";
            assert!(problems[0].starts_with(expected), "{brand}: {problems:?}");
            assert!(problems[0].contains(why), "{brand}: {problems:?}");
            assert!(!problems[0].contains(SECRET), "{problems:?}");
        }
    }

    #[test]
    fn clients_share_one_copy_of_a_logo_and_their_logos_are_bounded_together() {
        let dir = tempfile::tempdir().unwrap();
        let png = |n: u8| {
            let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
            bytes.resize(256 * 1024, n);
            bytes
        };
        let entry = |n: usize, logo: String| {
            json!({"client_id": format!("c{n}"), "redirect_uris": ["https://a.example/cb"],
                   "brand": {"name": "A", "logo": logo}})
        };
        std::fs::write(dir.path().join("same.png"), png(0)).unwrap();
        std::fs::write(dir.path().join("copy.png"), png(0)).unwrap();
        let file = json!({"clients": [entry(0, "same.png".into()), entry(1, "copy.png".into())]});
        let clients = Clients::parse(&file.to_string(), dir.path()).unwrap();
        let logo = |id: &str| {
            let brand = clients.get(id).unwrap().brand.clone().unwrap();
            brand.logo.as_ref().unwrap().bytes.as_ptr()
        };
        assert_eq!(logo("c0"), logo("c1"), "one copy of the same logo");

        let limit = super::MAX_CLIENT_LOGOS_BYTES / (256 * 1024);
        let entries: Vec<_> = (0..=limit)
            .map(|n| {
                std::fs::write(dir.path().join(format!("{n}.png")), png(n as u8 + 1)).unwrap();
                entry(n, format!("{n}.png"))
            })
            .collect();
        let problems =
            Clients::parse(&json!({"clients": entries}).to_string(), dir.path()).unwrap_err();
        assert_eq!(
            problems,
            [format!(
                "clients[{limit}].brand (client `c{limit}`): `logo`: the clients' different logos come to more than 4 MiB together; lanyard serves each of them for as long as it runs: make them smaller, or share one"
            )]
        );
    }
}
