//! `SA_CREDENTIALS_DIR` (issue 34): a directory of credentials files, one
//! account each, read and checked as `SA_CREDENTIALS_FILE` is, and the
//! organizations they serve, each by one file. Not wired to a setting yet.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::credentials::{self, CredentialSettings, Credentials, Fingerprint};
use super::sources::{Source, Sourced};

/// Far more accounts than one sidecar serves; a directory with more is
/// refused rather than read.
pub const MAX_ACCOUNT_FILES: usize = 10_000;

/// One file of the directory, read and checked.
#[derive(Debug)]
pub struct AccountFile {
    pub path: PathBuf,
    pub credentials: Credentials,
    /// Its content as loaded, for the watcher to start from.
    pub fingerprint: Option<Fingerprint>,
}

/// Every `*.json` file of `dir` (not those whose names begin with `.`,
/// such as a Kubernetes Secret's `..data`), by name, each an account; or
/// every problem, each naming its file. Two files for one organization are
/// refused, naming both. `source` is where the directory's setting came
/// from.
pub fn load_dir(
    dir: &Path,
    source: &Source,
    key_timeout: Duration,
) -> Result<Vec<AccountFile>, Vec<String>> {
    let files = json_files(dir).map_err(|why| vec![why])?;
    let mut problems = Vec::new();
    let mut accounts: Vec<AccountFile> = Vec::new();
    for path in files {
        let settings = CredentialSettings {
            file: Some(Sourced {
                value: path.clone(),
                source: source.clone(),
            }),
            key_timeout,
            ..CredentialSettings::default()
        };
        match credentials::load_with_fingerprint(&settings) {
            Ok((credentials, fingerprint)) => accounts.push(AccountFile {
                path,
                credentials,
                fingerprint,
            }),
            Err(err) => problems.extend(err.into_lines()),
        }
    }
    let mut by_organization: BTreeMap<&str, Vec<&Path>> = BTreeMap::new();
    for account in &accounts {
        by_organization
            .entry(&account.credentials.organization_id)
            .or_default()
            .push(&account.path);
    }
    for (organization, paths) in by_organization.iter().filter(|(_, p)| p.len() > 1) {
        let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        problems.push(format!(
            "organization `{organization}` has more than one credentials file: {}; keep one",
            names.join(" and ")
        ));
    }
    match problems.is_empty() {
        true => Ok(accounts),
        false => Err(problems),
    }
}

/// The directory's `*.json` files, sorted by name.
fn json_files(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let entries = std::fs::read_dir(dir).map_err(|err| {
        format!(
            "{} cannot be read as a directory: {}",
            dir.display(),
            super::sources::io_reason(&err)
        )
    })?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|err| format!("{}: {}", dir.display(), err.kind()))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with('.') || !name.ends_with(".json") {
            continue;
        }
        if files.len() == MAX_ACCOUNT_FILES {
            return Err(format!(
                "{} holds more than {MAX_ACCOUNT_FILES} credentials files",
                dir.display()
            ));
        }
        files.push(entry.path());
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials_json(client: &str, organization: &str) -> String {
        let pem = include_str!("../../tests/fixtures/rsa2048.pkcs8.pem");
        serde_json::json!({
            "type": "service_account",
            "client_id": client,
            "organization_id": organization,
            "iam_audience": "https://iam.example",
            "token_uri": "https://iam.example/oauth2/token",
            "private_key": pem,
        })
        .to_string()
    }

    fn source() -> Source {
        Source::Env("SA_CREDENTIALS_DIR")
    }

    #[test]
    fn every_json_file_is_an_account_by_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("b.json"), credentials_json("sa-b", "org-B")).unwrap();
        std::fs::write(dir.path().join("a.json"), credentials_json("sa-a", "org-A")).unwrap();
        std::fs::write(dir.path().join("README.txt"), "not an account").unwrap();
        std::fs::create_dir(dir.path().join("..data")).unwrap();
        std::fs::write(dir.path().join(".hidden.json"), "{").unwrap();
        let accounts = load_dir(dir.path(), &source(), Duration::from_secs(1)).unwrap();
        let organizations: Vec<&str> = accounts
            .iter()
            .map(|a| a.credentials.organization_id.as_str())
            .collect();
        assert_eq!(organizations, ["org-A", "org-B"]);
        assert!(accounts.iter().all(|a| a.fingerprint.is_some()));
    }

    #[test]
    fn two_files_for_one_organization_and_bad_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.json"), credentials_json("sa-a", "org-A")).unwrap();
        std::fs::write(dir.path().join("b.json"), credentials_json("sa-b", "org-A")).unwrap();
        std::fs::write(dir.path().join("c.json"), "{").unwrap();
        let problems = load_dir(dir.path(), &source(), Duration::from_secs(1)).unwrap_err();
        let text = problems.join("\n");
        assert!(text.contains("c.json"), "{text}");
        assert!(
            text.contains("organization `org-A` has more than one credentials file")
                && text.contains("a.json and")
                && text.contains("b.json"),
            "{text}"
        );
        assert!(!text.contains("BEGIN"), "no key material: {text}");
        let missing = load_dir(&dir.path().join("nope"), &source(), Duration::from_secs(1));
        assert!(missing.unwrap_err()[0].contains("cannot be read as a directory"));
    }
}
