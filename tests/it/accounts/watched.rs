//! The directory under a running sidecar: a file added, changed or removed
//! is taken up without a restart, a bad file is refused on its own while
//! the others keep serving, and a Kubernetes Secret's atomic swap of
//! `..data` is seen. Each test awaits the watcher's own report
//! (`Process::directory`), never a sleep.

use super::*;

use http::StatusCode;
use support::logs::Logs;

#[tokio::test]
async fn a_file_added_under_a_running_sidecar_serves_its_organization() {
    let fleet = Fleet::new().await;
    for (name, member) in [("a.json", &fleet.a), ("b.json", &fleet.b)] {
        write(&fleet.dir(), name, &member.file(&fleet.mock));
    }
    let c_file = fleet.c.file(&fleet.mock);
    let sidecar = fleet.start(false).await;
    let answer = sidecar.get(&sidecar.c.rule_path()).await;
    assert_refusal(&answer, 403, "no_account_for_organization");

    // Found by the poll alone, with no SIGHUP.
    put(&sidecar.dir, "c.json", &c_file);
    let done = sidecar.reloaded(|r| r.added == 1).await;
    assert_eq!((done.changed, done.removed, done.refused), (0, 0, 0));
    sidecar.assert_served(&sidecar.c).await;
    sidecar.assert_served(&sidecar.a).await;
}

/// B's file gets a new key for the same client; the mock forgets the old
/// key, so a token after the change proves the new one signed for it.
#[tokio::test]
async fn a_changed_file_is_used_for_its_organization() {
    let sidecar = Fleet::all_written().await;
    sidecar.assert_served(&sidecar.b).await;
    let tokens = sidecar.tokens_of(&sidecar.b);
    let first = tokens.current().expect("B holds a token");
    assert_eq!(tokens.state().borrow().generation, 1);

    let rotated = member_with_new_key(sidecar.mock(), sidecar.b.org, sidecar.b.client);
    put(&sidecar.dir, "b.json", &rotated.file(sidecar.mock()));
    assert!(sidecar.running.process.reload_credentials());
    let done = sidecar.reloaded(|r| r.changed == 1).await;
    assert_eq!((done.added, done.removed, done.refused), (0, 0, 0));
    // The renewal the change forces, with the new key.
    wait_for(&mut tokens.state(), NOTICED_WITHIN, |s| s.generation >= 2).await;
    let second = tokens.current().expect("B holds a token");
    assert_ne!(
        first.authorization(),
        second.authorization(),
        "the same token after the change"
    );
    sidecar.assert_served(&sidecar.b).await;
    let request = sidecar.mock().last_api_request().unwrap();
    assert_eq!(
        request.headers.get(http::header::AUTHORIZATION),
        Some(second.authorization())
    );
    assert_eq!(
        sidecar.mock().last_accepted().unwrap().claims["iss"],
        "sa-b"
    );
    // The same account still: the route table kept its token handle.
    assert_eq!(sidecar.tokens_of(&sidecar.b).state().borrow().generation, 2);
}

#[tokio::test]
async fn a_removed_file_leaves_its_organization_without_an_account() {
    let sidecar = Fleet::all_written().await;
    sidecar.assert_served(&sidecar.a).await;

    std::fs::remove_file(sidecar.dir.join("a.json")).unwrap();
    let done = sidecar.reloaded(|r| r.removed == 1).await;
    assert_eq!((done.added, done.changed, done.refused), (0, 0, 0));
    let before = sidecar.api_requests();
    let answer = sidecar.get(&sidecar.a.rule_path()).await;
    let message = assert_refusal(&answer, 403, "no_account_for_organization");
    assert!(message.contains("`org-A`"), "{message}");
    assert_eq!(sidecar.api_requests(), before, "forwarded after removal");
    sidecar.assert_served(&sidecar.b).await;
}

#[tokio::test]
async fn a_bad_file_is_refused_on_its_own_and_the_others_keep_serving() {
    let sidecar = Fleet::all_written().await;
    sidecar.assert_served(&sidecar.b).await;
    let invalid = |sidecar: &Sidecar| {
        sidecar
            .running
            .process
            .metrics
            .credentials_reloads
            .with_label_values(&["invalid"])
            .get()
    };

    put(
        &sidecar.dir,
        "broken.json",
        "{ \"private_key\": \"-----BEGIN",
    );
    let done = sidecar.reloaded(|r| r.refused == 1).await;
    let problem = done.last_problem.unwrap();
    assert!(problem.contains("broken.json"), "{problem}");
    assert!(!problem.contains("BEGIN"), "key material in: {problem}");
    assert_eq!((done.added, done.changed, done.removed), (0, 0, 0));
    assert_eq!(invalid(&sidecar), 1);
    for member in [&sidecar.a, &sidecar.b, &sidecar.c] {
        sidecar.assert_served(member).await;
    }

    // A second file for B's organization, with another client: refused,
    // naming the file that serves B, which keeps B.
    let mut impostor = sidecar.b.clone();
    impostor.client = "sa-b-other";
    impostor.register(sidecar.mock(), fixture_public_der());
    put(&sidecar.dir, "b-other.json", &impostor.file(sidecar.mock()));
    let done = sidecar.reloaded(|r| r.refused == 2).await;
    let problem = done.last_problem.unwrap();
    assert!(
        problem.contains("`org-B`") && problem.contains("b.json"),
        "{problem}"
    );
    assert_eq!(invalid(&sidecar), 2);
    assert_eq!(sidecar.tokens_of(&sidecar.b).state().borrow().generation, 1);
    sidecar.assert_served(&sidecar.b).await;

    // Mended, the broken file is an account like any other.
    let d = member_with_new_key(sidecar.mock(), "org-D", "sa-d");
    put(&sidecar.dir, "broken.json", &d.file(sidecar.mock()));
    let done = sidecar.reloaded(|r| r.added == 1).await;
    // The refused twin, unchanged, is not refused again at each look.
    assert_eq!(done.refused, 2, "{:?}", done.last_problem);
    sidecar.assert_served(&d).await;
    sidecar.assert_served(&sidecar.b).await;

    // The file it clashed with removed, the twin is judged again, and
    // serves B's organization with its own client.
    std::fs::remove_file(sidecar.dir.join("b.json")).unwrap();
    let done = sidecar.reloaded(|r| r.removed == 1 && r.added == 2).await;
    assert_eq!(done.refused, 2, "{:?}", done.last_problem);
    sidecar.assert_served(&impostor).await;
}

/// A and B's files laid out as the kubelet mounts a Secret: in a
/// timestamped directory that `..data` links to, each file a link
/// through `..data`; the timestamped directory.
fn as_a_secret_volume(fleet: &Fleet) -> PathBuf {
    use std::os::unix::fs::symlink;

    let dir = fleet.dir();
    let first = dir.join("..2026_01_05_10_00_00.000000001");
    std::fs::create_dir(&first).unwrap();
    write(&first, "a.json", &fleet.a.file(&fleet.mock));
    write(&first, "b.json", &fleet.b.file(&fleet.mock));
    symlink(first.file_name().unwrap(), dir.join("..data")).unwrap();
    for name in ["a.json", "b.json"] {
        symlink(format!("..data/{name}"), dir.join(name)).unwrap();
    }
    first
}

/// The layout the kubelet gives a Secret volume: each file a symlink
/// through `..data`, itself a symlink to a timestamped directory, which
/// an update replaces by renaming a new link over `..data`.
#[tokio::test]
async fn a_kubernetes_secret_swap_is_taken_up() {
    use std::os::unix::fs::symlink;

    let fleet = Fleet::new().await;
    let dir = fleet.dir();
    let first = as_a_secret_volume(&fleet);
    let b_file = fleet.b.file(&fleet.mock);
    let sidecar = fleet.start(false).await;
    sidecar.assert_served(&sidecar.a).await;
    sidecar.assert_served(&sidecar.b).await;

    // A's account rotated to a new client with a new key; B's unchanged.
    let rotated = member_with_new_key(sidecar.mock(), sidecar.a.org, "sa-a-rotated");
    let second = dir.join("..2026_01_05_11_00_00.000000002");
    std::fs::create_dir(&second).unwrap();
    write(&second, "a.json", &rotated.file(sidecar.mock()));
    write(&second, "b.json", &b_file);
    symlink(second.file_name().unwrap(), dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    std::fs::remove_dir_all(&first).unwrap();

    let done = sidecar.reloaded(|r| r.changed == 1).await;
    assert_eq!((done.added, done.removed, done.refused), (0, 0, 0));
    let tokens = sidecar.tokens_of(&sidecar.a);
    wait_for(&mut tokens.state(), NOTICED_WITHIN, |s| s.generation >= 2).await;
    sidecar.assert_served(&rotated).await;
    let answer = sidecar.get(&sidecar.b.rule_path()).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(sidecar.last_caller().as_deref(), Some(sidecar.b.client));
    assert_eq!(
        sidecar.tokens_of(&sidecar.b).state().borrow().generation,
        1,
        "B's unchanged file renewed its token"
    );
}

/// A Secret update in which a.json and b.json exchange their
/// organizations, each with a client of its new organization (a client
/// belongs to one organization): every file changes at once, so each is
/// judged against the other's new content, never against the table it
/// replaces, and both are taken up in the one look, with no restart and
/// no duplicate named in the log.
#[tokio::test]
async fn two_files_exchanging_their_organizations_in_one_secret_update_are_taken_up_together() {
    use std::os::unix::fs::symlink;

    let (logs, _guard) = Logs::capture();
    let fleet = Fleet::new().await;
    let dir = fleet.dir();
    let first = as_a_secret_volume(&fleet);
    let sidecar = fleet.start(false).await;
    sidecar.assert_served(&sidecar.a).await;
    sidecar.assert_served(&sidecar.b).await;

    let a_now_b = member_with_new_key(sidecar.mock(), sidecar.b.org, "sa-b-in-a");
    let b_now_a = member_with_new_key(sidecar.mock(), sidecar.a.org, "sa-a-in-b");
    let second = dir.join("..2026_01_05_11_00_00.000000002");
    std::fs::create_dir(&second).unwrap();
    write(&second, "a.json", &a_now_b.file(sidecar.mock()));
    write(&second, "b.json", &b_now_a.file(sidecar.mock()));
    symlink(second.file_name().unwrap(), dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    std::fs::remove_dir_all(&first).unwrap();

    let done = sidecar.reloaded(|r| r.changed == 2 || r.refused > 0).await;
    assert_eq!(
        (done.changed, done.added, done.removed, done.refused),
        (2, 0, 0, 0),
        "{:?}",
        done.last_problem
    );
    // Each organization now carries its new file's account's token.
    sidecar.assert_served(&b_now_a).await;
    sidecar.assert_served(&a_now_b).await;
    let log = String::from_utf8(logs.bytes()).unwrap();
    for refusal in ["refused", "more than one credentials file", "already"] {
        assert!(!log.contains(refusal), "`{refusal}` in the log:\n{log}");
    }
    assert_eq!(logs.count("credentials file taken up"), 2, "{log}");
}
