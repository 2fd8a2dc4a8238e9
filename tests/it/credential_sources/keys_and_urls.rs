//! Keys and URLs lanyard cannot use, each refused with exit 2 and a line
//! naming it: an OpenSSH key, a certificate (a key after one is used), an
//! RSA key over 8192 bits, an upstream URL or a token URI with a fragment
//! or a query (a token URI's query string is accepted).

use super::*;

/// An OpenSSH-format RSA key made by `ssh-keygen`, or a fixture of the same
/// shape where `ssh-keygen` is not installed (only the armour matters).
fn openssh_key(dir: &Path) -> String {
    let path = dir.join("id_rsa");
    let made = std::process::Command::new("ssh-keygen")
        .args([
            "-q", "-t", "rsa", "-b", "2048", "-N", "", "-C", "test", "-f",
        ])
        .arg(&path)
        .output();
    match made {
        Ok(out) if out.status.success() => std::fs::read_to_string(&path).unwrap(),
        _ => "-----BEGIN OPENSSH PRIVATE KEY-----\n\
              b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAABFwAAAAdzc2gtcn\n\
              NhAAAAAwEAAQAAAQEAvJ8qg4Xc6cKbW3fZ0p8Z3o1f4HkVYt9QmE2nX5rJ0aBcDeFgHiJk\n\
              -----END OPENSSH PRIVATE KEY-----\n"
            .into(),
    }
}

#[tokio::test]
async fn an_openssh_private_key_is_refused_with_how_to_convert_it() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let key = openssh_key(dir.path());
    assert!(key.starts_with("-----BEGIN OPENSSH PRIVATE KEY-----"));
    let out = token_with(&mock, dir.path(), "SA_PRIVATE_KEY", &key).await;
    assert_refused(
        &out,
        "SA_PRIVATE_KEY (environment variable SA_PRIVATE_KEY): is in OpenSSH format; convert it to PKCS#8 with `ssh-keygen -p -m PKCS8 -f key` or use the PEM key from the credentials file",
    );
    assert_no_secret(&text(&out.stderr), &key);
}

fn certificate_pem() -> String {
    rcgen::generate_simple_self_signed(vec!["localhost".to_string()])
        .unwrap()
        .cert
        .pem()
}

#[tokio::test]
async fn a_certificate_given_as_the_key_is_refused() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let (file, out) = token_from_file(&mock, dir.path(), |f| {
        f.insert("private_key".into(), certificate_pem().into());
    })
    .await;
    assert_refused(
        &out,
        &format!(
            "SA_PRIVATE_KEY (key `private_key` in {file}): is a certificate, not a private key"
        ),
    );
}

#[tokio::test]
async fn a_key_after_a_certificate_in_one_pem_text_is_used() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let bundle = format!("{}{}", certificate_pem(), fixture("rsa2048.pkcs8.pem"));
    let out = token_with(&mock, dir.path(), "SA_PRIVATE_KEY", &bundle).await;
    let token = printed_token(&out);
    assert_eq!(mock.token_owner(&token).as_deref(), Some(CLIENT_ID));
}

/// DER: a tag, a length, the content.
fn der(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    match content.len() {
        n if n < 0x80 => out.push(n as u8),
        n if n <= 0xff => out.extend([0x81, n as u8]),
        n => out.extend([0x82, (n >> 8) as u8, n as u8]),
    }
    out.extend_from_slice(content);
    out
}

/// A PKCS#1 RSA private key with an 8200-bit modulus. Generating a real
/// one takes about half a minute, so this is the "stripped" form Java's
/// JCA writes (modulus and private exponent, every other field zero),
/// which AWS-LC parses and sizes without needing primes.
fn rsa_key_over_8192_bits() -> String {
    let mut modulus = vec![0u8; 1025];
    modulus[0] = 0x80;
    modulus[1024] = 0x01;
    let integer = |magnitude: &[u8]| {
        let mut bytes = magnitude.to_vec();
        if bytes[0] & 0x80 != 0 {
            bytes.insert(0, 0);
        }
        der(0x02, &bytes)
    };
    let zero = der(0x02, &[0]);
    let mut fields = zero.clone(); // version
    fields.extend(integer(&modulus)); // n
    fields.extend(&zero); // e
    fields.extend(integer(&[0x03])); // d
    for _ in 0..5 {
        fields.extend(&zero); // p, q, dp, dq, qinv
    }
    let body = base64::engine::general_purpose::STANDARD.encode(der(0x30, &fields));
    let mut pem = String::from("-----BEGIN RSA PRIVATE KEY-----\n");
    for line in body.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(line).unwrap());
        pem.push('\n');
    }
    pem.push_str("-----END RSA PRIVATE KEY-----\n");
    pem
}

#[tokio::test]
async fn an_rsa_key_over_8192_bits_is_refused() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let key = rsa_key_over_8192_bits();
    let out = token_with(&mock, dir.path(), "SA_PRIVATE_KEY", &key).await;
    assert_refused(
        &out,
        "SA_PRIVATE_KEY (environment variable SA_PRIVATE_KEY): is an RSA key longer than 8192 bits, which is not supported",
    );
}

#[tokio::test]
async fn an_upstream_url_with_a_fragment_or_a_query_is_refused_without_echoing_it() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    for (suffix, why) in [
        ("#key=s3cr3t", "must not have a fragment (#...)"),
        ("?key=s3cr3t", "must not have a query string"),
    ] {
        let url = format!("{}{suffix}", mock.api_url());
        let out = lanyard(
            &["check"],
            settings(&mock, dir.path(), &[("SERVICE_API_URL", &url)]),
        )
        .await;
        assert_refused(
            &out,
            &format!("SERVICE_API_URL (environment variable SERVICE_API_URL): {why}"),
        );
        assert!(!text(&out.stderr).contains("s3cr3t"));
    }
    assert_eq!(mock.counters().token_requests, 0);
}

#[tokio::test]
async fn a_token_uri_with_a_fragment_is_refused_wherever_it_comes_from() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let with_fragment = format!("{}#key=s3cr3t", mock.token_url());

    let out = token_with(&mock, dir.path(), "SA_TOKEN_URI", &with_fragment).await;
    assert_refused(
        &out,
        "SA_TOKEN_URI (environment variable SA_TOKEN_URI): must not have a fragment (#...)",
    );
    assert!(!text(&out.stderr).contains("s3cr3t"));

    let (file, out) = token_from_file(&mock, dir.path(), |f| {
        f.insert("token_uri".into(), with_fragment.clone().into());
    })
    .await;
    assert_refused(
        &out,
        &format!("SA_TOKEN_URI (key `token_uri` in {file}): must not have a fragment (#...)"),
    );
    assert!(!text(&out.stderr).contains("s3cr3t"));
    assert_eq!(mock.counters().token_requests, 0);
}

#[tokio::test]
async fn a_token_uri_with_a_query_string_is_accepted() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let url = format!("{}?tenant=t1", mock.token_url());
    let out = token_with(&mock, dir.path(), "SA_TOKEN_URI", &url).await;
    let token = printed_token(&out);
    assert_eq!(mock.token_owner(&token).as_deref(), Some(CLIENT_ID));
}
