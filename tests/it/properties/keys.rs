//! Private keys: any text where a key goes is read or refused, and a
//! refusal never quotes the key.

use super::*;

fn der_of(pem: &str) -> Vec<u8> {
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .expect("fixture is PEM")
}

fn armour(label: &str, der: &[u8], newline: &str, end: bool) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----{newline}");
    for chunk in body.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).expect("base64 is ASCII"));
        out.push_str(newline);
    }
    if end {
        out.push_str(&format!("-----END {label}-----{newline}"));
    }
    out
}

const LABELS: &[&str] = &[
    "PRIVATE KEY",
    "RSA PRIVATE KEY",
    "ENCRYPTED PRIVATE KEY",
    "EC PRIVATE KEY",
    "DSA PRIVATE KEY",
    "OPENSSH PRIVATE KEY",
    "PUBLIC KEY",
    "RSA PUBLIC KEY",
    "CERTIFICATE",
    "",
];

/// A way to damage the fixture key.
#[derive(Debug, Clone)]
enum Damage {
    FlipDerByte(Index, u8),
    TruncateDer(Index),
    TruncateText(Index),
    ReplaceChar(Index, char),
    DropLine(Index),
    Relabel(&'static str),
}

fn damage() -> impl Strategy<Value = Damage> + Clone {
    prop_oneof![
        (any::<Index>(), 1..=u8::MAX).prop_map(|(at, mask)| Damage::FlipDerByte(at, mask)),
        any::<Index>().prop_map(Damage::TruncateDer),
        any::<Index>().prop_map(Damage::TruncateText),
        (any::<Index>(), any::<char>()).prop_map(|(at, c)| Damage::ReplaceChar(at, c)),
        any::<Index>().prop_map(Damage::DropLine),
        select(LABELS).prop_map(Damage::Relabel),
    ]
}

fn damaged(pem: &str, damage: &Damage) -> String {
    let label = if pem.contains("RSA PRIVATE KEY") {
        "RSA PRIVATE KEY"
    } else {
        "PRIVATE KEY"
    };
    let der = der_of(pem);
    match damage {
        Damage::FlipDerByte(at, mask) => {
            let mut der = der;
            let i = at.index(der.len());
            der[i] ^= mask;
            armour(label, &der, "\n", true)
        }
        Damage::TruncateDer(at) => armour(label, &der[..at.index(der.len())], "\n", true),
        Damage::TruncateText(at) => cut(pem, *at).to_string(),
        Damage::ReplaceChar(at, c) => {
            let i = at.index(pem.len());
            pem.chars()
                .enumerate()
                .map(|(j, old)| if i == j { *c } else { old })
                .collect()
        }
        Damage::DropLine(at) => {
            let lines: Vec<&str> = pem.lines().collect();
            let drop = at.index(lines.len());
            lines
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != drop)
                .map(|(_, l)| format!("{l}\n"))
                .collect()
        }
        Damage::Relabel(to) => armour(to, &der, "\n", true),
    }
}

/// The fixture key (PKCS#8 or PKCS#1) with one thing wrong with it.
pub(super) fn damaged_key() -> impl Strategy<Value = String> + Clone {
    (any::<bool>(), damage()).prop_map(|(pkcs1, damage)| {
        let pem = if pkcs1 { &*PKCS1 } else { &*PKCS8 };
        damaged(pem, &damage)
    })
}

/// PEM armour, of any label, around noise (sometimes starting like a DER
/// SEQUENCE, to get past the first byte of the DER parser).
pub(super) fn armoured_noise() -> impl Strategy<Value = String> + Clone {
    (
        select(LABELS),
        any::<bool>(),
        prop::collection::vec(any::<u8>(), 16..600),
        select(&["\n", "\r\n", "\\n"][..]),
        any::<bool>(),
    )
        .prop_map(|(label, sequence, mut noise, newline, end)| {
            if sequence {
                let len = (noise.len() - 4) as u16;
                noise[..4].copy_from_slice(&[0x30, 0x82, (len >> 8) as u8, len as u8]);
            }
            armour(label, &noise, newline, end)
        })
}

/// Text shaped like PEM: armour lines, base64-ish runs, both kinds of line
/// break, in any order.
const PEM_LIKE: &str = concat!(
    "(-----(BEGIN|END) (RSA |EC |ENCRYPTED |OPENSSH )?(PRIVATE|PUBLIC) KEY-----",
    "|[A-Za-z0-9+/=]{0,70}|\\\\n|\r?\n| |Proc-Type: 4,ENCRYPTED){0,16}",
);

/// Anything someone might put where a key goes.
pub(super) fn key_input() -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        text(200),
        PEM_LIKE,
        damaged_key(),
        armoured_noise(),
        Just(PKCS8.clone()),
        Just(PKCS8.replace('\n', "\\n")),
    ]
}

fn check_key(input: &str) -> Result<(), TestCaseError> {
    match parse_private_key(input) {
        Ok(key) => prop_assert!(key.bits() >= 2048, "accepted a {}-bit key", key.bits()),
        Err(err) => {
            let shown = err.to_string();
            prop_assert!(!shown.trim().is_empty(), "empty key error");
            prop_assert!(!shown.chars().any(char::is_control), "{shown:?}");
            assert_quotes_none(&shown, &secret_runs(input))?;
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn private_key_of_any_text_is_refused_without_echoing_it(input in key_input()) {
        check_key(&input)?;
    }

    #[test]
    fn damaged_private_key_is_refused_without_echoing_its_body(input in damaged_key()) {
        check_key(&input)?;
    }

    #[test]
    fn valid_key_is_accepted_with_any_line_break_style(
        breaks in prop::collection::vec(select(&["\n", "\\n", "\r\n"][..]), 32),
        padding in select(&["", " ", "\n", "\t\n  "][..]),
        pkcs1 in any::<bool>(),
    ) {
        let pem = if pkcs1 { &*PKCS1 } else { &*PKCS8 };
        let mut input = padding.to_string();
        for (i, line) in pem.lines().enumerate() {
            input.push_str(line);
            input.push_str(breaks[i % breaks.len()]);
        }
        input.push_str(padding);
        let key = parse_private_key(&input);
        prop_assert!(key.is_ok(), "{:?} for {input:?}", key.err());
        prop_assert_eq!(key.map(|k| k.bits()).ok(), Some(2048));
    }
}
