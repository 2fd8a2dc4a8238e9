//! Percent-decoding (RFC 3986 §2.1) held to the letter, for values users
//! write by hand: a PKCS#11 URI's attributes (RFC 7512) and the `OTEL_*`
//! lists. The `percent-encoding` crate decodes; a `%` not followed by two
//! hex digits, which it would keep as it is, is refused here instead, so a
//! typo is reported rather than sent on.

/// The bytes `value` encodes, or `None` when a `%` is not followed by two
/// hex digits. `+` stays a plus.
pub fn decode(value: &str) -> Option<Vec<u8>> {
    let bytes = value.as_bytes();
    let well_formed = bytes.iter().enumerate().all(|(at, byte)| {
        *byte != b'%'
            || bytes
                .get(at + 1..at + 3)
                .is_some_and(|pair| pair.iter().all(u8::is_ascii_hexdigit))
    });
    well_formed.then(|| percent_encoding::percent_decode(bytes).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_well_formed_escapes_and_refuses_the_rest() {
        assert_eq!(decode("a%20b+c").unwrap(), b"a b+c");
        assert_eq!(decode("%C3%A9").unwrap(), "é".as_bytes());
        assert_eq!(decode("%00%ff").unwrap(), [0, 255]);
        for bad in ["%", "%2", "%zz", "%+1", "a%2"] {
            assert_eq!(decode(bad), None, "{bad}");
        }
    }
}
