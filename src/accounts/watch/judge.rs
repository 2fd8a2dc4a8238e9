//! Which of a directory update's new and changed files are taken up: the
//! update judged as a whole, against itself (docs/accounts.md "Changing
//! the directory"). A Kubernetes Secret changes every file at once, so
//! two files exchanging their organizations arrive together, and each is
//! judged against the other's new content, never against the table the
//! update replaces. Pure: facts in, refusals out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The directory after an update, as the watcher sees it.
#[derive(Debug, Default)]
pub(super) struct Update<'a> {
    /// The organization each file still present serves now, by its
    /// account in use.
    pub(super) serving: BTreeMap<&'a Path, &'a str>,
    /// The organization each new or changed file names (and each file
    /// refused earlier for another file's organization, judged again),
    /// its content read and checked.
    pub(super) named: BTreeMap<&'a Path, &'a str>,
    /// Files whose new content is refused for a problem of its own: their
    /// account in use, if any, keeps its organization.
    pub(super) refused: BTreeSet<&'a Path>,
    /// `SA_CREDENTIALS_FILE`'s organization, which no file may name.
    pub(super) default: Option<&'a str>,
}

/// One claim on an organization.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Claim {
    /// A file unchanged, whose account serves the organization.
    InUse,
    /// A file whose new content is refused: its account keeps serving.
    Kept,
    /// A file naming the organization in its new content.
    Named,
}

/// The files of `named` refused, each with why: one organization named by
/// more than one file of the new set (naming them all), by
/// `SA_CREDENTIALS_FILE`, or served by an account kept while its own file
/// is refused. Every other file of `named` is taken up.
pub(super) fn judge(update: &Update<'_>) -> BTreeMap<PathBuf, String> {
    let mut refusals = BTreeMap::new();
    // A refused file's account keeps its organization, which may be one
    // another file now names: that file is refused in turn, and its own
    // account kept. Each round refuses one more file, or ends.
    loop {
        let before = refusals.len();
        for (organization, claims) in claims(update, &refusals) {
            for (path, why) in refused_claims(organization, &claims, update.default) {
                refusals.entry(path.to_path_buf()).or_insert(why);
            }
        }
        if refusals.len() == before {
            return refusals;
        }
    }
}

/// Every organization claimed, with its claims, `refusals` taken as made.
fn claims<'a>(
    update: &Update<'a>,
    refusals: &BTreeMap<PathBuf, String>,
) -> BTreeMap<&'a str, Vec<(&'a Path, Claim)>> {
    let mut by_organization: BTreeMap<&str, Vec<(&Path, Claim)>> = BTreeMap::new();
    for (&path, &organization) in &update.named {
        if !refusals.contains_key(path) {
            by_organization
                .entry(organization)
                .or_default()
                .push((path, Claim::Named));
        }
    }
    for (&path, &organization) in &update.serving {
        let claim = if refusals.contains_key(path) || update.refused.contains(path) {
            Claim::Kept
        } else if update.named.contains_key(path) {
            continue;
        } else {
            Claim::InUse
        };
        by_organization
            .entry(organization)
            .or_default()
            .push((path, claim));
    }
    by_organization
}

/// The named files among one organization's claims that cannot have it.
fn refused_claims<'a>(
    organization: &str,
    claims: &[(&'a Path, Claim)],
    default: Option<&str>,
) -> Vec<(&'a Path, String)> {
    let named = claims.iter().filter(|(_, claim)| *claim == Claim::Named);
    let why = if default == Some(organization) {
        format!("organization `{organization}` is SA_CREDENTIALS_FILE's account's already")
    } else if let Some((kept, _)) = claims.iter().find(|(_, claim)| *claim == Claim::Kept) {
        format!(
            "organization `{organization}` is still served by the account of {kept}, whose new content is refused; it keeps the organization until {kept} is mended or removed",
            kept = kept.display()
        )
    } else if claims.len() > 1 {
        let mut files: Vec<String> = claims
            .iter()
            .map(|(p, _)| p.display().to_string())
            .collect();
        files.sort();
        let last = files.pop().unwrap_or_default();
        format!(
            "organization `{organization}` has more than one credentials file: {} and {last}; keep one",
            files.join(", ")
        )
    } else {
        return Vec::new();
    };
    named.map(|(path, _)| (*path, why.clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update<'a>(
        serving: &[(&'a str, &'a str)],
        named: &[(&'a str, &'a str)],
        refused: &[&'a str],
    ) -> Update<'a> {
        Update {
            serving: serving.iter().map(|(p, o)| (Path::new(*p), *o)).collect(),
            named: named.iter().map(|(p, o)| (Path::new(*p), *o)).collect(),
            refused: refused.iter().map(|p| Path::new(*p)).collect(),
            default: Some("org-default"),
        }
    }

    fn refused(refusals: &BTreeMap<PathBuf, String>) -> Vec<&str> {
        refusals.keys().map(|p| p.to_str().unwrap()).collect()
    }

    #[test]
    fn two_files_exchanging_their_organizations_are_both_taken_up() {
        let swap = update(
            &[("a.json", "org-A"), ("b.json", "org-B")],
            &[("a.json", "org-B"), ("b.json", "org-A")],
            &[],
        );
        assert!(judge(&swap).is_empty(), "{:?}", judge(&swap));
    }

    #[test]
    fn a_file_naming_an_organization_in_use_is_refused_naming_both_files() {
        let twin = update(
            &[("a.json", "org-A"), ("b.json", "org-B")],
            &[("b-other.json", "org-B")],
            &[],
        );
        let refusals = judge(&twin);
        assert_eq!(refused(&refusals), ["b-other.json"]);
        assert_eq!(
            refusals[Path::new("b-other.json")],
            "organization `org-B` has more than one credentials file: b-other.json and b.json; keep one"
        );
    }

    #[test]
    fn two_new_files_for_one_organization_are_both_refused() {
        let twins = update(
            &[("a.json", "org-A")],
            &[("a.json", "org-C"), ("d.json", "org-C")],
            &[],
        );
        let refusals = judge(&twins);
        assert_eq!(refused(&refusals), ["a.json", "d.json"]);
        assert!(
            refusals
                .values()
                .all(|why| why.contains("a.json and d.json"))
        );
    }

    #[test]
    fn a_file_naming_the_default_accounts_organization_is_refused() {
        let refusals = judge(&update(&[], &[("a.json", "org-default")], &[]));
        assert!(refusals[Path::new("a.json")].contains("SA_CREDENTIALS_FILE"));
    }

    /// a.json and b.json swap, and b.json's new content is bad: b's
    /// account keeps org-B, so a.json cannot have it, and keeps org-A.
    #[test]
    fn a_refused_files_account_keeps_its_organization_and_refusals_follow() {
        let half_swap = update(
            &[
                ("a.json", "org-A"),
                ("b.json", "org-B"),
                ("c.json", "org-C"),
            ],
            &[("a.json", "org-B"), ("c.json", "org-A")],
            &["b.json"],
        );
        let refusals = judge(&half_swap);
        assert_eq!(refused(&refusals), ["a.json", "c.json"]);
        assert!(refusals[Path::new("a.json")].contains("account of b.json"));
        assert!(refusals[Path::new("c.json")].contains("account of a.json"));
    }

    #[test]
    fn a_refused_file_without_an_account_claims_nothing() {
        let refusals = judge(&update(&[], &[("c.json", "org-C")], &["b.json"]));
        assert!(refusals.is_empty());
    }
}
