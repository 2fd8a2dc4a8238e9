//! `SA_CREDENTIALS_DIR` (docs/accounts.md): a directory of
//! credentials files, one account each, read and checked as
//! `SA_CREDENTIALS_FILE` is, and the organizations they serve, each by
//! one file. At start-up every problem stops lanyard; at run time the
//! watcher (`crate::accounts`) reads a changed file with [`load_file`] and
//! refuses a bad one on its own.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::credentials::{self, CredentialSettings, Credentials, Fingerprint};
use super::settings::{
    CLIENT_ID, CREDENTIALS_DIR, CREDENTIALS_FILE, IAM_AUDIENCE, ORGANIZATION_ID, PRIVATE_KEY,
    TOKEN_URI,
};
use super::sources::{Layers, Source, Sourced};

/// Far more accounts than one sidecar serves; a directory with more is
/// refused rather than read.
pub const MAX_ACCOUNT_FILES: usize = 10_000;
/// An organization id, at most.
const MAX_ORGANIZATION: usize = 128;

/// An organization id as a path carries it plainly (docs/service.md
/// §2.8): RFC 3986 unreserved characters only. A request for any other
/// could not be told from a path trick (`accounts::organization`), so a file
/// naming one is refused rather than loaded to serve nothing.
pub fn is_organization_id(id: &str) -> bool {
    id.len() <= MAX_ORGANIZATION && super::verifier::is_path_segment(id)
}

/// One file of the directory, read and checked.
#[derive(Debug, Clone)]
pub struct AccountFile {
    pub path: PathBuf,
    pub credentials: Credentials,
    /// Its content as loaded, for the watcher to start from.
    pub fingerprint: Option<Fingerprint>,
}

/// `SA_CREDENTIALS_DIR`, read: where it is, and its accounts.
#[derive(Debug, Clone)]
pub struct AccountsDir {
    pub dir: Sourced<PathBuf>,
    pub files: Vec<AccountFile>,
}

/// Reads the directory for [`super::loaded::accounts`], recording its
/// problems, each naming its file. `default` is `SA_CREDENTIALS_FILE`'s
/// account, whose organization no file of the directory may serve too.
pub(super) fn load(
    dir: &Sourced<PathBuf>,
    default: Option<(&str, &Path)>,
    key_timeout: Duration,
    layers: &mut Layers,
) -> Option<AccountsDir> {
    let setting = format!("{} ({})", CREDENTIALS_DIR.env, dir.source);
    let mut problems = match load_dir(&dir.value, &dir.source, key_timeout) {
        Ok(files) => {
            let clash = default.and_then(|(organization, path)| {
                let file = files
                    .iter()
                    .find(|f| f.credentials.organization_id == organization)?;
                Some(format!(
                    "organization `{organization}` has more than one credentials file: {} and {} ({}); keep one",
                    file.path.display(),
                    path.display(),
                    CREDENTIALS_FILE.env
                ))
            });
            match clash {
                None => {
                    return Some(AccountsDir {
                        dir: dir.clone(),
                        files,
                    });
                }
                Some(clash) => vec![clash],
            }
        }
        Err(problems) => problems,
    };
    layers
        .errors
        .extend(problems.drain(..).map(|why| format!("{setting}: {why}")));
    None
}

/// With `SA_CREDENTIALS_DIR` alone, the `SA_*` overrides have no account
/// to apply to: each file is the whole of its account. Each one given is
/// a problem, rather than an override silently ignored.
pub(super) fn refuse_overrides(settings: &CredentialSettings, layers: &mut Layers) {
    let given = [
        (
            CLIENT_ID.env,
            settings.client_id.as_ref().map(|s| &s.source),
        ),
        (
            PRIVATE_KEY.env,
            settings.private_key.as_ref().map(|s| &s.source),
        ),
        (
            IAM_AUDIENCE.env,
            settings.iam_audience.as_ref().map(|s| &s.source),
        ),
        (
            TOKEN_URI.env,
            settings.token_uri.as_ref().map(|s| &s.source),
        ),
        (
            ORGANIZATION_ID.env,
            settings.organization_id.as_ref().map(|s| &s.source),
        ),
    ];
    for (env, source) in given {
        if let Some(source) = source {
            let why = format!(
                "overrides {}'s account only, and only {} is set, whose files are each a whole account; unset it, or set {} to the account it is for",
                CREDENTIALS_FILE.env, CREDENTIALS_DIR.env, CREDENTIALS_FILE.env
            );
            layers.problem(env, source, &why);
        }
    }
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
    let files = json_files(dir)?;
    let mut problems = Vec::new();
    let mut accounts: Vec<AccountFile> = Vec::new();
    for loaded in load_files(&files, source, key_timeout) {
        match loaded {
            Ok(account) => accounts.push(account),
            Err(why) => problems.extend(why),
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

/// Every file, loaded on as many threads as there are cores, in order:
/// checking a key takes a millisecond or two, which a directory of
/// thousands would otherwise add to start-up one after the other.
fn load_files(
    files: &[PathBuf],
    source: &Source,
    key_timeout: Duration,
) -> Vec<Result<AccountFile, Vec<String>>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = files.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let loading: Vec<_> = files
            .chunks(chunk)
            .map(|chunk| {
                scope.spawn(move || {
                    chunk
                        .iter()
                        .map(|path| load_file(path, source, key_timeout))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        loading
            .into_iter()
            .flat_map(|thread| {
                thread.join().unwrap_or_else(|_| {
                    vec![Err(vec!["loading a credentials file failed".to_string()])]
                })
            })
            .collect()
    })
}

/// One credentials file of the directory, read and checked; or its
/// problems, each beginning with its path.
pub fn load_file(
    path: &Path,
    source: &Source,
    key_timeout: Duration,
) -> Result<AccountFile, Vec<String>> {
    let bytes = credentials::read_file(path, source).map_err(|why| {
        let prefix = credentials::file_prefix(path, source);
        vec![file_line(path, &prefix, &why)]
    })?;
    load_bytes(path, source, key_timeout, &bytes)
}

/// As [`load_file`], with the file's content already read.
pub fn load_bytes(
    path: &Path,
    source: &Source,
    key_timeout: Duration,
    bytes: &[u8],
) -> Result<AccountFile, Vec<String>> {
    let settings = CredentialSettings {
        file: Some(Sourced {
            value: path.to_path_buf(),
            source: source.clone(),
        }),
        key_timeout,
        ..CredentialSettings::default()
    };
    match credentials::load_from(&settings, Some(bytes)) {
        Ok(credentials) if !is_organization_id(&credentials.organization_id) => Err(vec![format!(
            "{}: `organization_id` is not an id a path can carry plainly (at most {MAX_ORGANIZATION} letters, digits and -._~), so no request could reach its account",
            path.display()
        )]),
        Ok(credentials) => Ok(AccountFile {
            path: path.to_path_buf(),
            credentials,
            fingerprint: Some(Fingerprint::of(bytes)),
        }),
        Err(err) => {
            let prefix = credentials::file_prefix(path, source);
            Err(err
                .into_lines()
                .into_iter()
                .map(|line| file_line(path, &prefix, &line))
                .collect())
        }
    }
}

/// A problem of one file of the directory, as `<path>: <why>`: the
/// loader's lines name `SA_CREDENTIALS_FILE`'s settings, which a file of
/// the directory does not read, so a field it lacks is named as a field.
fn file_line(path: &Path, prefix: &str, line: &str) -> String {
    let why = line
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix(": "))
        .map(str::to_string)
        .or_else(|| missing_field(line))
        .unwrap_or_else(|| line.to_string());
    format!("{}: {why}", path.display())
}

/// `SA_X: not set (give `field` in the credentials file or …)` as
/// "field `field` is missing".
fn missing_field(line: &str) -> Option<String> {
    let rest = line.split_once(": not set (give `")?.1;
    let field = rest.split_once('`')?.0;
    Some(format!("field `{field}` is missing"))
}

/// The directory's `*.json` files, sorted by name.
pub fn json_files(dir: &Path) -> Result<Vec<PathBuf>, Vec<String>> {
    let unreadable = |err: &std::io::Error| {
        vec![format!(
            "{} cannot be read as a directory: {}",
            dir.display(),
            super::sources::io_reason(err)
        )]
    };
    let entries = std::fs::read_dir(dir).map_err(|err| unreadable(&err))?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|err| unreadable(&err))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with('.') || !name.ends_with(".json") {
            continue;
        }
        if files.len() == MAX_ACCOUNT_FILES {
            return Err(vec![format!(
                "{} holds more than {MAX_ACCOUNT_FILES} credentials files",
                dir.display()
            )]);
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
