//! The page, rendered once per language at start-up (docs/translations.md):
//! the HTML template's `{{id}}` placeholders filled with the language's
//! messages, `<html lang dir>` set, the script's messages as a JSON data
//! block, and the language switch. What changes per request (an OpenID
//! Connect login's request and who asks) is filled in when it is served.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::escape_html;
use crate::config::brand::Brand;
use crate::verifier::errors::page_codes;
use crate::verifier::i18n::{Asked, Language, Languages, SCRIPT_MESSAGES, SELECTED};

/// Where the brand file's logo and stylesheet are served.
pub const LOGO_PATH: &str = "/assets/logo";
pub const BRAND_STYLE_PATH: &str = "/assets/brand.css";

const TEMPLATE: &str = include_str!("index.html");
/// lanyard's own pages (a refused login, a path with no page): the page's
/// structure and style, its own words.
const ERROR_TEMPLATE: &str = include_str!("error.html");
/// The top of both pages, through their stylesheet: one copy, so that
/// lanyard's own pages keep the page's language, policy and style.
const HEAD_TEMPLATE: &str = include_str!("head.html");

/// A brand as a page shows it: the brand, and where its logo and its
/// stylesheet are served.
#[derive(Debug, Clone)]
pub struct Branded {
    pub brand: Arc<Brand>,
    pub logo: String,
    pub style: String,
}

/// The page in one language.
pub struct Rendered {
    pub lang: String,
    pub html: String,
    /// The same, as every request's answer shares it (no copy per request).
    pub body: bytes::Bytes,
    /// The `asker` sentence, HTML-escaped, around where the name goes.
    asker: (String, String),
    /// The `qr-site` sentence, HTML-escaped, around where the host goes.
    site: (String, String),
}

/// The page in every language, in the order of [`Languages::all`].
pub struct Pages {
    pub languages: Languages,
    rendered: Vec<Rendered>,
}

impl Pages {
    /// The page in every language, in the relying party's `brand` when
    /// there is one.
    pub fn render(languages: Languages, brand: Option<&Brand>) -> Pages {
        let branded = brand.map(|brand| Branded {
            brand: Arc::new(brand.clone()),
            logo: LOGO_PATH.into(),
            style: BRAND_STYLE_PATH.into(),
        });
        let rendered = languages
            .all()
            .iter()
            .map(|language| render(language, &languages, branded.as_ref()))
            .collect();
        Pages {
            languages,
            rendered,
        }
    }

    /// The page in the language a request asks for
    /// ([`Languages::choose`]).
    pub fn choose(&self, asked: Asked<'_>) -> &Rendered {
        let language = self.languages.choose(asked);
        let at = self
            .languages
            .all()
            .iter()
            .position(|l| l.tag == language.tag)
            .unwrap_or(0);
        &self.rendered[at]
    }

    /// `shown`'s language rendered now in `branded`, a client's own brand
    /// (docs/oidc.md, "A brand per client"): rendered per login rather
    /// than held, so that a thousand clients' brands cost nothing until
    /// their logins come. `None` for a page that is not one of these.
    pub fn rebrand(&self, shown: &Rendered, branded: &Branded) -> Option<Rendered> {
        let language = self
            .languages
            .all()
            .iter()
            .find(|l| l.tag() == shown.lang)?;
        Some(render(language, &self.languages, Some(branded)))
    }
}

impl Rendered {
    /// The `asker` paragraph for `name`, as the page shows who asks.
    pub fn asker(&self, name: &str) -> String {
        format!(
            r#"<p id="asker">{}<strong class="isolated" dir="auto">{}</strong>{}</p>"#,
            self.asker.0,
            escape_html(name),
            self.asker.1
        )
    }

    /// The sentence beside the QR code naming the site that asks by its
    /// `host`, against a QR code relayed from another site (docs/oidc.md,
    /// "Threats").
    pub fn site(&self, host: &str) -> String {
        format!(
            r#"<p id="qr-site">{}<strong class="isolated" dir="ltr">{}</strong>{}</p>"#,
            self.site.0,
            escape_html(host),
            self.site.1
        )
    }
}

/// lanyard's own page instead of the one asked for: its title's message
/// id, its paragraphs', and whether it offers the language switch (a
/// refused login's request may have been posted, and a link could not
/// carry it).
pub struct ErrorPage<'a> {
    pub title: &'a str,
    pub text: &'a [&'a str],
    pub switch: bool,
}

impl Pages {
    /// `page` in the language `asked` chooses, its files under `base`
    /// (the issuer's path, `""` or `/wallet`), where a proxy routing
    /// that path alone to lanyard serves them (docs/oidc.md); and that
    /// language's tag.
    pub fn error(&self, page: &ErrorPage<'_>, asked: Asked<'_>, base: &str) -> (String, String) {
        let language = self.languages.choose(asked);
        let html = fill(ERROR_TEMPLATE, |name| match name {
            "head" => head(language, base, language.message(page.title)),
            "title" => escape_html(language.message(page.title)),
            "text" => page
                .text
                .iter()
                .map(|id| format!("<p>{}</p>", escape_html(language.message(id))))
                .collect(),
            "header" if page.switch => format!(
                r#"<header><nav class="languages" aria-label="{}"><ul>{}</ul></nav></header>"#,
                escape_html(language.message("language-switch")),
                switch(language, &self.languages)
            ),
            "header" => String::new(),
            name => placeholder(name, language, &self.languages, None),
        });
        (html, language.tag())
    }
}

/// `template` with each `{{name}}` replaced by `value(name)`.
fn fill(template: &str, mut value: impl FnMut(&str) -> String) -> String {
    let mut html = String::with_capacity(template.len() * 2);
    let mut rest = template;
    while let Some(at) = rest.find("{{") {
        html.push_str(&rest[..at]);
        let Some(end) = rest[at..].find("}}") else {
            break;
        };
        html.push_str(&value(&rest[at + 2..at + end]));
        rest = &rest[at + end + 2..];
    }
    html.push_str(rest);
    html
}

/// The top of a page in `language`, titled `title`, its files under
/// `base`.
fn head(language: &Language, base: &str, title: &str) -> String {
    fill(HEAD_TEMPLATE, |name| match name {
        "lang" => language.tag(),
        "dir" => if language.rtl { "rtl" } else { "ltr" }.to_string(),
        "base" => escape_html(base),
        "title" => escape_html(title),
        _ => String::new(),
    })
}

fn render(language: &Language, languages: &Languages, brand: Option<&Branded>) -> Rendered {
    let html = fill(TEMPLATE, |name| match name {
        "head" => head(language, "", language.message("page-title")),
        name => placeholder(name, language, languages, brand),
    });
    let asker = escape_html(language.message("asker"));
    let (before, after) = asker.split_once("{asker}").unwrap_or(("", &asker));
    let site = escape_html(language.message("qr-site"));
    let (site_before, site_after) = site.split_once("{site}").unwrap_or(("", &site));
    Rendered {
        lang: language.tag(),
        asker: (before.to_string(), after.to_string()),
        site: (site_before.to_string(), site_after.to_string()),
        body: bytes::Bytes::from(html.clone()),
        html,
    }
}

fn placeholder(
    name: &str,
    language: &Language,
    languages: &Languages,
    branded: Option<&Branded>,
) -> String {
    let brand = branded.map(|branded| &*branded.brand);
    match name {
        "messages" => script_messages(language),
        "languages" => switch(language, languages),
        "labels" => labels(language, brand),
        "brand" => branded.map_or_else(String::new, who_asks),
        "brand-style" => match branded.filter(|b| b.brand.accent.is_some()) {
            Some(branded) => format!(
                r#"<link rel="stylesheet" href="{}">"#,
                escape_html(&branded.style)
            ),
            None => String::new(),
        },
        "purpose" => match brand.and_then(|b| b.purpose(&language.tag)) {
            Some(purpose) => format!(
                r#"<section class="purpose" aria-labelledby="purpose-title"><h2 id="purpose-title">{}</h2><p>{}</p></section>"#,
                escape_html(language.message("purpose-title")),
                escape_html(purpose)
            ),
            None => String::new(),
        },
        id => escape_html(language.message(id)),
    }
}

/// The relying party, as the page's header shows it: its logo with its
/// name as the text alternative, or its name.
fn who_asks(branded: &Branded) -> String {
    let name = escape_html(&branded.brand.name);
    match branded.brand.logo {
        Some(_) => format!(
            r#"<p class="brand"><img src="{}" alt="{name}"></p>"#,
            escape_html(&branded.logo)
        ),
        None => format!(r#"<p class="brand">{name}</p>"#),
    }
}

/// The claims' labels in this language, as the script's JSON data
/// block: lanyard's own (`given_name`, `address-postal_code`), each
/// replaced by the brand file's label for that claim when it has one.
fn labels(language: &Language, brand: Option<&Brand>) -> String {
    let mut labels: Map<String, Value> = language
        .claim_labels()
        .map(|(claim, label)| (claim.to_string(), Value::String(label.to_string())))
        .collect();
    let branded = brand
        .map(|brand| brand.labels(&language.tag))
        .unwrap_or_default();
    for (claim, label) in branded {
        labels.insert(claim.to_string(), Value::String(label.to_string()));
    }
    data_block(&Value::Object(labels))
}

/// The script's messages as JSON inside `<script type="application/json">`:
/// `<` escaped, so that no message can close the element. Each error
/// code's message is there, and each message whose form the script
/// picks as `{"on", "count", "forms"}` (`i18n::forms`).
fn script_messages(language: &Language) -> String {
    let codes = page_codes();
    let errors: Vec<String> = codes.iter().map(|code| format!("error-{code}")).collect();
    let mut messages = Map::new();
    for id in SCRIPT_MESSAGES
        .iter()
        .copied()
        .chain(errors.iter().map(String::as_str))
    {
        messages.insert(
            id.to_string(),
            Value::String(language.message(id).to_string()),
        );
    }
    for selected in SELECTED {
        let forms = selected.forms(language, &codes);
        messages.insert(
            selected.id.to_string(),
            serde_json::json!({"on": forms.on, "count": forms.count, "forms": forms.forms}),
        );
    }
    data_block(&Value::Object(messages))
}

/// JSON for inside `<script type="application/json">`: `<`, `>` and `&`
/// escaped, so that no text in it can close the element.
fn data_block(value: &Value) -> String {
    value
        .to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// The language switch: a link per language, in its own name and
/// language; the one shown marked current.
fn switch(current: &Language, languages: &Languages) -> String {
    languages
        .all()
        .iter()
        .map(|language| {
            let tag = language.tag();
            let current = match language.tag == current.tag {
                true => r#" aria-current="true""#,
                false => "",
            };
            format!(
                r#"<li><a href="?lang={tag}" hreflang="{tag}" lang="{tag}"{current}>{}</a></li>"#,
                escape_html(&language.name)
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_language_fills_every_placeholder() {
        let pages = Pages::render(Languages::load().unwrap(), None);
        for rendered in &pages.rendered {
            assert!(
                !rendered.html.contains("{{"),
                "{}: {}",
                rendered.lang,
                rendered.html
            );
            assert!(
                rendered
                    .html
                    .contains(&format!("<html lang=\"{}\"", rendered.lang))
            );
            assert!(
                rendered
                    .html
                    .contains(r#"<script type="application/json" id="messages">{"#)
            );
            assert!(!rendered.asker("x").contains("{asker}"));
            assert!(!rendered.site("x").contains("{site}"));
        }
        let en = pages.choose(Asked::default());
        assert!(en.html.contains("<h1>Verify a credential</h1>"));
        assert!(en.html.contains(r#"aria-current="true">English</a>"#));
        assert_eq!(
            en.asker("A <b>"),
            r#"<p id="asker"><strong class="isolated" dir="auto">A &lt;b&gt;</strong> asks you to verify a credential. Afterwards you return there.</p>"#
        );
    }

    #[test]
    fn no_message_can_close_the_data_block() {
        let languages = Languages::load().unwrap();
        let block = script_messages(&languages.all()[0]);
        assert!(!block.contains('<') && !block.contains('>'));
        let parsed: Value = serde_json::from_str(&block).unwrap();
        assert_eq!(parsed["value-true"], "Yes");
    }
}
