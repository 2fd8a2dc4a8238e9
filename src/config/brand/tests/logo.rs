//! The logo: PNG or SVG, bounded, and an SVG that cannot run or fetch.

use super::*;

const CLEAN: &str = r##"<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" viewBox="0 0 10 10">
  <defs><linearGradient id="g"><stop offset="0" stop-color="#1f4e8c"/></linearGradient><rect id="r" width="5" height="5"/></defs>
  <style>.a { fill: url(#g); } @media (prefers-color-scheme: dark) { .a { fill: #79b8ff; } }</style>
  <use href="#r"/><use xlink:href="#r"/>
  <rect class="a" width="10" height="10" style="fill: url( '#g' )" filter="url(#g)"/>
  <text font-family="sans-serif" xml:space="preserve">Acme<tspan dx="1">!</tspan></text>
  <title>Acme</title>
</svg>"##;

/// The problems of a logo with `bytes`, written as `name`.
fn logo_problems(name: &str, bytes: impl AsRef<[u8]>) -> Vec<String> {
    let dir = Dir::new();
    dir.write(name, bytes);
    let problems = parse_in(&dir, &format!("name = \"A\"\nlogo = \"{name}\"")).unwrap_err();
    let at = format!("`logo`: {} ", dir.path().join(name).display());
    problems
        .into_iter()
        .map(|p| {
            p.strip_prefix(&at)
                .unwrap_or_else(|| panic!("{p}"))
                .to_string()
        })
        .collect()
}

/// The one problem an SVG logo with `svg` has.
fn svg_problem(svg: &str) -> String {
    let problems = logo_problems("logo.svg", svg);
    assert_eq!(problems.len(), 1, "{problems:?}");
    problems.into_iter().next().unwrap()
}

/// `inner` inside a plain `<svg>` root.
fn svg(inner: &str) -> String {
    format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" viewBox="0 0 10 10">{inner}</svg>"#
    )
}

#[test]
fn a_self_contained_svg_and_a_png_are_accepted() {
    let dir = Dir::new();
    dir.write("logo.svg", CLEAN);
    let brand = parse_in(&dir, "name = \"A\"\nlogo = \"logo.svg\"").unwrap();
    let logo = brand.logo.unwrap();
    assert_eq!(
        (logo.content_type, &logo.bytes[..]),
        (SVG, CLEAN.as_bytes())
    );

    let png = [&b"\x89PNG\r\n\x1a\n"[..], &[0u8; 64]].concat();
    let path = dir.write("logo.png", &png);
    // An absolute path is taken as it is.
    let text = format!("name = \"A\"\nlogo = \"{}\"", path.display());
    let logo = parse(&text).unwrap().logo.unwrap();
    assert_eq!((logo.content_type, logo.bytes.len()), (PNG, png.len()));
    assert_eq!(
        format!("{logo:?}"),
        "Logo(image/png, 72 bytes)",
        "no bytes in logs"
    );
}

#[test]
fn a_missing_large_or_fake_logo_is_refused() {
    let dir = Dir::new();
    let problems = parse_in(&dir, "name = \"A\"\nlogo = \"none.svg\"").unwrap_err();
    assert_eq!(
        problems,
        [format!(
            "`logo`: {} cannot be read: no such file",
            dir.path().join("none.svg").display()
        )]
    );
    let long = format!("name = \"A\"\nlogo = \"{}\"", "a/".repeat(3000));
    assert_eq!(
        parse_in(&dir, &long).unwrap_err(),
        ["`logo`: is 6000 bytes long, longer than any path"]
    );
    let big = format!("{}{}", svg(""), " ".repeat(MAX_LOGO_BYTES as usize));
    let problems = parse_in(&dir, "name = \"A\"\nlogo = \".\"").unwrap_err();
    assert!(
        problems[0].ends_with("cannot be read: is a directory"),
        "{problems:?}"
    );
    dir.write("big.svg", big);
    let problems = parse_in(&dir, "name = \"A\"\nlogo = \"big.svg\"").unwrap_err();
    assert!(
        problems[0].ends_with("big.svg cannot be read: larger than 256 KiB; not a logo"),
        "{problems:?}"
    );
    assert_eq!(
        logo_problems("logo.png", "not really a PNG"),
        ["is not a PNG: its first 8 bytes are not PNG's signature"]
    );
    assert_eq!(
        logo_problems("logo.PNG", b"\x89PNG\r\n\x1a"),
        ["is not a PNG: its first 8 bytes are not PNG's signature"],
        "seven bytes of the signature are not it"
    );
    assert_eq!(
        logo_problems("logo.jpg", b"\xff\xd8\xff\xe0\x00\x10JFIF"),
        ["is neither a PNG (no PNG signature) nor an SVG (not UTF-8 text)"]
    );
    assert!(
        svg_problem("GIF89a")
            .starts_with("is neither a PNG (no PNG signature) nor well-formed SVG: ")
    );
    assert_eq!(
        svg_problem("<html><body/></html>"),
        "is not an SVG: its root element is not <svg xmlns=\"http://www.w3.org/2000/svg\">"
    );
    assert!(
        svg_problem("<svg viewBox=\"0 0 1 1\"/>").starts_with("is not an SVG"),
        "no namespace"
    );
}

#[test]
fn an_svg_that_runs_script_is_refused() {
    assert_eq!(
        svg_problem(&svg("<script>alert(1)</script>")),
        "has a <script> element"
    );
    assert_eq!(
        svg_problem(&svg(
            r#"<h:script xmlns:h="http://www.w3.org/1999/xhtml">alert(1)</h:script>"#
        )),
        "has a <script> element"
    );
    assert_eq!(
        svg_problem(&svg(r#"<rect onclick="alert(1)"/>"#)),
        "has an event handler attribute (onclick on <rect>)"
    );
    let onload = r#"<svg xmlns="http://www.w3.org/2000/svg" ONLOAD="alert(1)"/>"#;
    assert_eq!(
        svg_problem(onload),
        "has an event handler attribute (ONLOAD on <svg>)"
    );
    assert_eq!(
        svg_problem(&svg(r#"<a href="javascript:alert(1)"><text>x</text></a>"#)),
        "has an <a> element, a link; a logo links nowhere"
    );
    assert_eq!(
        svg_problem(&svg(
            r#"<set attributeName="xlink:href" to="javascript:alert(1)"/>"#
        )),
        "has an <set> element, an animation; a logo is static"
    );
    assert_eq!(
        svg_problem(&svg(r#"<animate attributeName="onbegin" values="x"/>"#)),
        "has an <animate> element, an animation; a logo is static"
    );
}

#[test]
fn an_svg_that_fetches_or_embeds_is_refused() {
    let external = "; a logo must be one self-contained file";
    let drawn = "; a logo must be one self-contained file, drawn in SVG";
    for (inner, why) in [
        (
            r#"<image href="https://example.com/x.png"/>"#,
            format!("has an <image> element{drawn}"),
        ),
        (
            r#"<image xlink:href="data:image/png;base64,AAAA"/>"#,
            format!("has an <image> element{drawn}"),
        ),
        (
            r#"<use xlink:href="other.svg#r"/>"#,
            format!("has an external reference (href on <use> not starting with #){external}"),
        ),
        (
            r#"<foreignObject width="1"/>"#,
            "has a <foreignObject> element, which embeds HTML".to_string(),
        ),
        (
            r#"<iframe xmlns="http://www.w3.org/1999/xhtml" src="https://example.com"/>"#,
            "has an <iframe> element, which embeds a document".to_string(),
        ),
        (
            r#"<rect style="fill: url(https://example.com/x.svg#g)"/>"#,
            "has an attribute (style on <rect>) with url(…) naming something outside the file"
                .to_string(),
        ),
        (
            r#"<rect fill="URL( 'x.svg#g' )"/>"#,
            "has an attribute (fill on <rect>) with url(…) naming something outside the file"
                .to_string(),
        ),
        (
            r#"<rect fill="&#117;rl(x.svg)"/>"#,
            "has an attribute (fill on <rect>) with url(…) naming something outside the file"
                .to_string(),
        ),
        (
            r#"<rect style="fill: u\72l(x.svg)"/>"#,
            "has an attribute (style on <rect>) with a CSS escape (\\), which can hide a url(…)"
                .to_string(),
        ),
        (
            "<style>@import 'https://example.com/x.css';</style>",
            "has a <style> element with @import, which loads a stylesheet".to_string(),
        ),
        (
            "<style>rect { fill: url(\"x.svg#g\") }</style>",
            "has a <style> element with url(…) naming something outside the file".to_string(),
        ),
        (
            "<style>rect { background: image-set('x.png' 1x) }</style>",
            "has a <style> element with image-set(…), which loads images".to_string(),
        ),
    ] {
        assert_eq!(svg_problem(&svg(inner)), why, "{inner}");
    }
    let stylesheet = format!("<?xml-stylesheet href=\"x.css\"?>{}", svg(""));
    assert_eq!(
        svg_problem(&stylesheet),
        "has an <?xml-stylesheet?> instruction, which loads a stylesheet"
    );
}

#[test]
fn an_svg_with_a_doctype_or_entities_is_refused() {
    let why = "has a DOCTYPE, whose entities (`<!ENTITY`) can expand without bound or name other files; an SVG logo needs none";
    let doctype = format!(
        "<!DOCTYPE svg PUBLIC \"-//W3C//DTD SVG 1.1//EN\" \"http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd\">{}",
        svg("")
    );
    assert_eq!(svg_problem(&doctype), why);
    let xxe = format!(
        "<!DOCTYPE svg [<!ENTITY xxe SYSTEM \"file:///etc/passwd\">]>{}",
        svg("<text>&xxe;</text>")
    );
    assert_eq!(svg_problem(&xxe), why);
    let laughs = format!(
        "<!DOCTYPE svg [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;\">]>{}",
        svg("<text>&b;</text>")
    );
    assert_eq!(svg_problem(&laughs), why);
    // Without a DOCTYPE an entity is no entity, and the XML is broken.
    assert!(svg_problem(&svg("<text>&xxe;</text>")).starts_with("is neither a PNG"));
}

#[test]
fn an_svg_with_many_problems_reports_the_first_few_once_each() {
    let many: String = (0..50)
        .map(|i| format!(r#"<rect onclick="a" on{i}="b"/><script/>"#))
        .collect();
    let problems = logo_problems("logo.svg", svg(&many));
    assert_eq!(problems.len(), 6, "{problems:?}");
    assert_eq!(
        problems[0],
        "has an event handler attribute (onclick on <rect>)"
    );
    assert_eq!(
        problems[1],
        "has an event handler attribute (on0 on <rect>)"
    );
    assert_eq!(problems[2], "has a <script> element");
    assert_eq!(problems[5], "has 47 more problems of these kinds");
}

#[test]
fn an_svg_holds_only_the_allowed_elements_and_attributes() {
    let refresh = r#"<meta xmlns="http://www.w3.org/1999/xhtml" http-equiv="refresh" content="0;url=https://evil.example"/>"#;
    assert_eq!(
        svg_problem(&svg(refresh)),
        "has a <meta> element of the namespace http://www.w3.org/1999/xhtml; a logo holds SVG elements only"
    );
    let foreign = r#"<x:rect xmlns:x="urn:other" width="1"/>"#;
    assert!(svg_problem(&svg(foreign)).contains("of the namespace urn:other"));
    for (inner, why) in [
        (
            "<switch><rect/></switch>",
            "has a <switch> element, which is not one of the static SVG elements a logo may hold",
        ),
        (
            r##"<feImage href="#r"/>"##,
            "has an <feImage> element; a logo must be one self-contained file, drawn in SVG",
        ),
        (
            r#"<animateMotion path="M0 0"/>"#,
            "has an <animateMotion> element, an animation",
        ),
        (
            r##"<rect href="#r"/>"##,
            "has an href on <rect>; only <use>, gradients and patterns may name another element",
        ),
        (
            r#"<rect xmlns:i="urn:inkscape" i:label="x"/>"#,
            "has an attribute (label on <rect>) that is not one of the presentation attributes",
        ),
        (
            r#"<rect cursor="url(x.cur)"/>"#,
            "has an attribute (cursor on <rect>) that is not one of the presentation attributes",
        ),
        ("<?php echo 1 ?><rect/>", "has a processing instruction"),
    ] {
        let problem = svg_problem(&svg(inner));
        assert!(problem.starts_with(why), "{inner}: {problem}");
    }
}
