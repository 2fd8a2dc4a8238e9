//! The brand's logo: a PNG or an SVG of at most 256 KiB, read once at
//! start-up. The page serves it from its own origin, so an SVG is parsed
//! (with `roxmltree`, which refuses a DTD and with it every entity) and
//! held to an allow-list: the static elements and presentation attributes
//! of SVG 1.1 and 2 (docs/verifier.md, "Branding"), `href` only to an
//! `#id` in the file, CSS only without `url(…)` to outside it. Anything
//! else (a script, an event handler, an image, an element of another
//! namespace such as XHTML's `<meta http-equiv="refresh">`) is refused,
//! named.

use std::fmt;
use std::path::Path;

use bytes::Bytes;
use roxmltree::{Document, Node, NodeType};

use crate::files::{io_reason, read_small};

/// A logo, at most: a few kilobytes of SVG, or a PNG at twice the size it
/// is shown.
pub const MAX_LOGO_BYTES: u64 = 256 * 1024;
/// `Logo::content_type` of an SVG.
pub const SVG: &str = "image/svg+xml";
/// `Logo::content_type` of a PNG.
pub const PNG: &str = "image/png";

const PNG_SIGNATURE: &[u8; 8] = b"\x89PNG\r\n\x1a\n";
const SVG_NAMESPACE: &str = "http://www.w3.org/2000/svg";
/// Problems of one SVG reported, at most: the first few say what to fix.
const MAX_SVG_PROBLEMS: usize = 5;

/// The logo's bytes, as the page serves them.
#[derive(Clone, PartialEq, Eq)]
pub struct Logo {
    pub bytes: Bytes,
    /// [`SVG`] or [`PNG`].
    pub content_type: &'static str,
}

impl fmt::Debug for Logo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Logo({}, {} bytes)", self.content_type, self.bytes.len())
    }
}

impl Logo {
    /// The logo at `path`, or every reason it cannot be the page's.
    pub fn read(path: &Path) -> Result<Logo, Vec<String>> {
        let bytes = read_small(path, MAX_LOGO_BYTES, "a logo").map_err(|err| {
            vec![format!(
                "{} cannot be read: {}",
                path.display(),
                io_reason(&err)
            )]
        })?;
        let named_png = path
            .extension()
            .is_some_and(|ext| ext.eq_ignore_ascii_case("png"));
        Logo::from_bytes(bytes, named_png).map_err(|problems| {
            let path = path.display();
            problems
                .into_iter()
                .map(|why| format!("{path} {why}"))
                .collect()
        })
    }

    /// A PNG by its signature, else an SVG that passes [`svg_problems`];
    /// `named_png`: the file's name says PNG, so a failed signature is
    /// said as such rather than as bad XML.
    fn from_bytes(bytes: Vec<u8>, named_png: bool) -> Result<Logo, Vec<String>> {
        if bytes.starts_with(PNG_SIGNATURE) {
            return Ok(Logo {
                bytes: bytes.into(),
                content_type: PNG,
            });
        }
        if named_png {
            return Err(vec![
                "is not a PNG: its first 8 bytes are not PNG's signature".into(),
            ]);
        }
        let Ok(text) = std::str::from_utf8(&bytes) else {
            return Err(vec![
                "is neither a PNG (no PNG signature) nor an SVG (not UTF-8 text)".into(),
            ]);
        };
        let problems = svg_problems(text);
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(Logo {
            bytes: bytes.into(),
            content_type: SVG,
        })
    }
}

/// Why the SVG `text` is not a safe logo, the first few reasons: not
/// well-formed XML, a DTD, a root other than `<svg>`, or something in it
/// that runs or fetches.
pub fn svg_problems(text: &str) -> Vec<String> {
    let doc = match Document::parse(text) {
        Ok(doc) => doc,
        Err(roxmltree::Error::DtdDetected) => {
            return vec![
                "has a DOCTYPE, whose entities (`<!ENTITY`) can expand without bound or name other files; an SVG logo needs none".into(),
            ];
        }
        Err(err) => {
            return vec![format!(
                "is neither a PNG (no PNG signature) nor well-formed SVG: {}",
                super::texts::quoted(&err.to_string())
            )];
        }
    };
    let root = doc.root_element();
    if root.tag_name().name() != "svg" || root.tag_name().namespace() != Some(SVG_NAMESPACE) {
        return vec![format!(
            "is not an SVG: its root element is not <svg xmlns=\"{SVG_NAMESPACE}\">"
        )];
    }
    let mut problems: Vec<String> = Vec::new();
    for node in doc.descendants() {
        let found = match node.node_type() {
            NodeType::PI if node.pi().is_some_and(|pi| pi.target == "xml-stylesheet") => {
                vec!["has an <?xml-stylesheet?> instruction, which loads a stylesheet".into()]
            }
            NodeType::PI => {
                vec!["has a processing instruction (<?…?>), which a logo needs none of".into()]
            }
            NodeType::Element => element_problems(node),
            _ => Vec::new(),
        };
        for why in found {
            if !problems.contains(&why) {
                problems.push(why);
            }
        }
    }
    if problems.len() > MAX_SVG_PROBLEMS {
        let more = problems.len() - MAX_SVG_PROBLEMS;
        problems.truncate(MAX_SVG_PROBLEMS);
        problems.push(format!("has {more} more problems of these kinds"));
    }
    problems
}

const XLINK_NAMESPACE: &str = "http://www.w3.org/1999/xlink";
const XML_NAMESPACE: &str = "http://www.w3.org/XML/1998/namespace";

/// The elements a logo may hold: SVG's static shapes, text, paint
/// servers, clipping, masking and filters, nothing that runs, links,
/// animates, or draws a picture from elsewhere (`image`, `feImage`).
const ELEMENTS: &[&str] = &[
    "svg",
    "g",
    "defs",
    "symbol",
    "use",
    "title",
    "desc",
    "style",
    "path",
    "rect",
    "circle",
    "ellipse",
    "line",
    "polyline",
    "polygon",
    "text",
    "tspan",
    "linearGradient",
    "radialGradient",
    "stop",
    "pattern",
    "clipPath",
    "mask",
    "filter",
    "feBlend",
    "feColorMatrix",
    "feComponentTransfer",
    "feComposite",
    "feDropShadow",
    "feFlood",
    "feFuncA",
    "feFuncB",
    "feFuncG",
    "feFuncR",
    "feGaussianBlur",
    "feMerge",
    "feMergeNode",
    "feMorphology",
    "feOffset",
];

/// Elements whose `href` may name another element of the file (`#id`).
const HREF_ELEMENTS: &[&str] = &["use", "linearGradient", "radialGradient", "pattern"];

/// The attributes a logo's elements may carry, without a namespace:
/// geometry, paint, text, gradient, clip, mask and filter parameters, and
/// the accessibility ones; SVG's presentation attributes among them.
const ATTRIBUTES: &[&str] = &[
    // Structure and accessibility.
    "id",
    "class",
    "style",
    "lang",
    "version",
    "baseProfile",
    "viewBox",
    "preserveAspectRatio",
    "width",
    "height",
    "x",
    "y",
    "transform",
    "transform-origin",
    "role",
    "aria-label",
    "aria-labelledby",
    "aria-hidden",
    "focusable",
    "href",
    // Shapes and text.
    "d",
    "pathLength",
    "points",
    "rx",
    "ry",
    "cx",
    "cy",
    "r",
    "x1",
    "y1",
    "x2",
    "y2",
    "dx",
    "dy",
    "rotate",
    "textLength",
    "lengthAdjust",
    // Paint servers, clipping, masking.
    "offset",
    "gradientUnits",
    "gradientTransform",
    "spreadMethod",
    "fx",
    "fy",
    "fr",
    "patternUnits",
    "patternContentUnits",
    "patternTransform",
    "clipPathUnits",
    "maskUnits",
    "maskContentUnits",
    // Filters.
    "filterUnits",
    "primitiveUnits",
    "in",
    "in2",
    "result",
    "stdDeviation",
    "mode",
    "type",
    "values",
    "operator",
    "k1",
    "k2",
    "k3",
    "k4",
    "radius",
    "edgeMode",
    "tableValues",
    "slope",
    "intercept",
    "amplitude",
    "exponent",
    // Presentation attributes.
    "fill",
    "fill-opacity",
    "fill-rule",
    "stroke",
    "stroke-width",
    "stroke-linecap",
    "stroke-linejoin",
    "stroke-miterlimit",
    "stroke-dasharray",
    "stroke-dashoffset",
    "stroke-opacity",
    "opacity",
    "clip-path",
    "clip-rule",
    "mask",
    "filter",
    "color",
    "display",
    "visibility",
    "overflow",
    "font-family",
    "font-size",
    "font-size-adjust",
    "font-weight",
    "font-style",
    "font-variant",
    "font-stretch",
    "text-anchor",
    "dominant-baseline",
    "alignment-baseline",
    "baseline-shift",
    "letter-spacing",
    "word-spacing",
    "text-decoration",
    "writing-mode",
    "direction",
    "unicode-bidi",
    "stop-color",
    "stop-opacity",
    "color-interpolation",
    "color-interpolation-filters",
    "shape-rendering",
    "text-rendering",
    "image-rendering",
    "vector-effect",
    "paint-order",
    "isolation",
    "mix-blend-mode",
    "flood-color",
    "flood-opacity",
    "lighting-color",
];

/// What in one element is not on the allow-list, or fetches.
fn element_problems(node: Node<'_, '_>) -> Vec<String> {
    let tag = node.tag_name();
    let name = tag.name();
    if let Some(why) = refused_element(name, tag.namespace()) {
        return vec![why];
    }
    let shown = super::texts::quoted(name);
    let mut found: Vec<String> = Vec::new();
    if name == "style" {
        let css: String = node.children().filter_map(|c| c.text()).collect();
        found.extend(css_problems(&css).map(|why| format!("has a <style> element {why}")));
    }
    for attr in node.attributes() {
        let attr_name = super::texts::quoted(attr.name());
        let value = attr.value();
        let is_href =
            attr.name() == "href" && matches!(attr.namespace(), None | Some(XLINK_NAMESPACE));
        let allowed = match attr.namespace() {
            None => ATTRIBUTES.contains(&attr.name()),
            Some(XML_NAMESPACE) => ["space", "lang"].contains(&attr.name()),
            Some(_) => is_href,
        };
        if is_event_handler(attr.name()) {
            found.push(format!(
                "has an event handler attribute ({attr_name} on <{shown}>)"
            ));
        } else if is_href && !value.trim().starts_with('#') {
            found.push(format!(
                "has an external reference (href on <{shown}> not starting with #); a logo must be one self-contained file"
            ));
        } else if is_href && !HREF_ELEMENTS.contains(&name) {
            found.push(format!(
                "has an href on <{shown}>; only <use>, gradients and patterns may name another element"
            ));
        } else if !allowed {
            found.push(format!(
                "has an attribute ({attr_name} on <{shown}>) that is not one of the presentation attributes a logo may carry"
            ));
        } else if let Some(why) = css_problems(value).next() {
            found.push(format!("has an attribute ({attr_name} on <{shown}>) {why}"));
        }
    }
    found
}

/// Why the element `name` in `namespace` is not one a logo may hold, if
/// it is not: said plainly for the ones that run, embed or link.
fn refused_element(name: &str, namespace: Option<&str>) -> Option<String> {
    let shown = super::texts::quoted(name);
    let why = match name.to_ascii_lowercase().as_str() {
        "script" => "has a <script> element".into(),
        "foreignobject" => "has a <foreignObject> element, which embeds HTML".into(),
        "iframe" | "embed" | "object" => {
            format!("has an <{shown}> element, which embeds a document")
        }
        "image" | "feimage" => format!(
            "has an <{shown}> element; a logo must be one self-contained file, drawn in SVG"
        ),
        "a" => "has an <a> element, a link; a logo links nowhere".into(),
        "set" | "animate" | "animatetransform" | "animatemotion" | "discard" => {
            format!("has an <{shown}> element, an animation; a logo is static")
        }
        _ if namespace != Some(SVG_NAMESPACE) => format!(
            "has a <{shown}> element of the namespace {}; a logo holds SVG elements only",
            super::texts::quoted(namespace.unwrap_or("(none)"))
        ),
        _ if !ELEMENTS.contains(&name) => format!(
            "has a <{shown}> element, which is not one of the static SVG elements a logo may hold (docs/verifier.md, \"Branding\")"
        ),
        _ => return None,
    };
    Some(why)
}

/// `on…`: every SVG and HTML event handler attribute, and no other SVG
/// attribute.
fn is_event_handler(name: &str) -> bool {
    name.len() > 2 && name[..2].eq_ignore_ascii_case("on")
}

/// What in CSS text (a `<style>` element, a `style` or presentation
/// attribute) fetches: a `url(…)` other than `url(#…)`, `@import`,
/// `image-set(…)`; and a CSS escape (`\`), which could spell `url(`
/// without those letters.
fn css_problems(css: &str) -> impl Iterator<Item = &'static str> {
    let lower = css.to_ascii_lowercase();
    let external_url = lower.match_indices("url(").any(|(at, _)| {
        let target = lower[at + 4..].trim_start();
        let target = target.trim_start_matches(['"', '\'']);
        !target.starts_with('#')
    });
    [
        (
            external_url,
            "with url(…) naming something outside the file",
        ),
        (
            lower.contains("@import"),
            "with @import, which loads a stylesheet",
        ),
        (
            lower.contains("image-set("),
            "with image-set(…), which loads images",
        ),
        (
            css.contains('\\'),
            "with a CSS escape (\\), which can hide a url(…)",
        ),
    ]
    .into_iter()
    .filter_map(|(found, why)| found.then_some(why))
}
