//! Compiles the verification page's translations into the binary: every
//! `src/verifier/page/locales/*.ftl` becomes an entry of `LOCALES`, so
//! that adding a language is adding its file (docs/translations.md), with
//! no change to the code.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let dir = Path::new("src/verifier/page/locales");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("src/verifier/page/locales is readable")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "ftl"))
        .collect();
    files.sort();
    let mut out = String::from(
        "/// Every translation of the page: its language tag and its Fluent text.\n\
         pub const LOCALES: &[(&str, &str)] = &[\n",
    );
    for path in &files {
        println!("cargo:rerun-if-changed={}", path.display());
        let tag = path
            .file_stem()
            .and_then(|stem| stem.to_str())
            .expect("a locale file named by its language tag");
        let absolute = std::fs::canonicalize(path).expect("the locale file's path");
        writeln!(
            out,
            "    ({tag:?}, include_str!({:?})),",
            absolute.display()
        )
        .expect("writing to a String");
    }
    out.push_str("];\n");
    let target =
        Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("locales.rs");
    std::fs::write(target, out).expect("OUT_DIR is writable");
}
