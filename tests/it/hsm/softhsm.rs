//! A SoftHSM2 of a test's own: its token directory and configuration
//! file (`SOFTHSM2_CONF`), a PIN file, and `softhsm2-util` run against it.
//!
//! SoftHSM2 reads `SOFTHSM2_CONF` when the module is initialised, and this
//! process's environment cannot be changed safely, so whatever loads the
//! module runs as a child with the variable set: the `lanyard` binary, or
//! this test binary again ([`in_child`]) for the checks that need lanyard's
//! library in-process.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where Debian's `softhsm2` puts the module (`scripts/test` installs it).
pub const MODULE: &str = "/usr/lib/softhsm/libsofthsm2.so";
/// A PIN no output may ever show: every test looks for it.
pub const PIN: &str = "Zq8w-user-4417";
const SO_PIN: &str = "Zq8w-so-5678";
pub const TOKEN: &str = "lanyard";
pub const OBJECT: &str = "sa-key";
/// Set in a child run by [`in_child`]; its presence makes a test take its
/// child's part.
const CHILD: &str = "LANYARD_TEST_SOFTHSM_CHILD";

pub struct SoftHsm {
    root: PathBuf,
    /// Removed with the test; none in a child, which uses its parent's.
    _temp: Option<tempfile::TempDir>,
}

impl SoftHsm {
    /// An empty SoftHSM2: no token yet.
    pub fn new() -> SoftHsm {
        assert!(
            Path::new(MODULE).exists(),
            "{MODULE} is missing: install Debian's softhsm2 (scripts/test does)"
        );
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path().to_path_buf();
        std::fs::create_dir(root.join("tokens")).unwrap();
        let conf = format!(
            "directories.tokendir = {}\nobjectstore.backend = file\nlog.level = ERROR\n",
            root.join("tokens").display()
        );
        std::fs::write(root.join("softhsm2.conf"), conf).unwrap();
        std::fs::write(root.join("pin"), format!("{PIN}\n")).unwrap();
        SoftHsm {
            root,
            _temp: Some(temp),
        }
    }

    /// A token `lanyard` holding `fixture` as `sa-key`, id 01.
    pub fn with_key(fixture: &str) -> SoftHsm {
        let hsm = SoftHsm::new();
        hsm.init_token(TOKEN, PIN);
        hsm.import(fixture, TOKEN, OBJECT, "01", PIN);
        hsm
    }

    /// In a child of [`in_child`]: the parent's SoftHSM2.
    pub fn of_parent() -> SoftHsm {
        let conf = PathBuf::from(std::env::var("SOFTHSM2_CONF").expect("SOFTHSM2_CONF is set"));
        SoftHsm {
            root: conf.parent().unwrap().to_path_buf(),
            _temp: None,
        }
    }

    pub fn conf(&self) -> PathBuf {
        self.root.join("softhsm2.conf")
    }

    pub fn pin_file(&self) -> PathBuf {
        self.root.join("pin")
    }

    /// Writes a file under this SoftHSM2's directory and returns its path.
    pub fn write(&self, name: &str, content: &str) -> PathBuf {
        let path = self.root.join(name);
        std::fs::write(&path, content).unwrap();
        path
    }

    /// The URI of `sa-key` on `lanyard`, the PIN from the PIN file.
    pub fn uri(&self) -> String {
        format!(
            "pkcs11:token={TOKEN};object={OBJECT}?module-path={MODULE}&pin-source=file:{}",
            self.pin_file().display()
        )
    }

    /// `softhsm2-util` with `args` against this SoftHSM2; it must succeed.
    pub fn util(&self, args: &[&str]) {
        let out = Command::new("softhsm2-util")
            .args(args)
            .env("SOFTHSM2_CONF", self.conf())
            .output()
            .expect("softhsm2-util runs (install Debian's softhsm2)");
        assert!(
            out.status.success(),
            "softhsm2-util {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    pub fn init_token(&self, label: &str, pin: &str) {
        self.util(&[
            "--init-token",
            "--free",
            "--label",
            label,
            "--pin",
            pin,
            "--so-pin",
            SO_PIN,
        ]);
    }

    /// Imports a PKCS#8 fixture key pair into the token `token`.
    pub fn import(&self, fixture: &str, token: &str, label: &str, id: &str, pin: &str) {
        let path = crate::support::fixture_path(fixture);
        self.import_file(&path, token, label, id, pin);
    }

    /// Imports the PKCS#8 key pair in the file `path`.
    pub fn import_file(&self, path: &Path, token: &str, label: &str, id: &str, pin: &str) {
        self.util(&[
            "--import",
            path.to_str().unwrap(),
            "--token",
            token,
            "--label",
            label,
            "--id",
            id,
            "--pin",
            pin,
        ]);
    }

    /// The serial number and slot id of the token `label`, as
    /// `softhsm2-util --show-slots` prints them (and p11tool puts them in
    /// a URI).
    pub fn serial_and_slot(&self, label: &str) -> (String, u64) {
        let out = Command::new("softhsm2-util")
            .arg("--show-slots")
            .env("SOFTHSM2_CONF", self.conf())
            .output()
            .unwrap();
        let (mut slot, mut serial) = (None, None);
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if let Some(id) = line.strip_prefix("Slot ") {
                slot = id.trim().parse().ok();
            }
            let field = |name: &str| Some(line.trim().strip_prefix(name)?.trim().to_string());
            if let Some(number) = field("Serial number:") {
                serial = Some(number);
            }
            if field("Label:").as_deref() == Some(label) {
                return (serial.unwrap(), slot.unwrap());
            }
        }
        panic!("no token `{label}` in softhsm2-util --show-slots");
    }

    pub fn delete_token(&self, label: &str) {
        self.util(&["--delete-token", "--token", label]);
    }

    /// Sets `CKA_SIGN` false on the private key `sa-key` of `token`, which
    /// `softhsm2-util --import` cannot; through the module, so only in a
    /// child of [`in_child`].
    pub fn forbid_signing(&self, token: &str) {
        use cryptoki::context::{CInitializeArgs, CInitializeFlags, Pkcs11};
        use cryptoki::object::{Attribute, ObjectClass};
        use cryptoki::session::UserType;
        use cryptoki::types::AuthPin;
        assert!(is_child(), "SOFTHSM2_CONF is this test's in a child only");
        let module = Pkcs11::new(MODULE).unwrap();
        module
            .initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK))
            .unwrap();
        let slot = module
            .get_slots_with_initialized_token()
            .unwrap()
            .into_iter()
            .find(|slot| module.get_token_info(*slot).unwrap().label() == token)
            .expect("the token exists");
        let session = module.open_rw_session(slot).unwrap();
        session
            .login(UserType::User, Some(&AuthPin::from(PIN)))
            .unwrap();
        let template = [
            Attribute::Class(ObjectClass::PRIVATE_KEY),
            Attribute::Label(OBJECT.as_bytes().to_vec()),
        ];
        let keys = session.find_objects(&template).unwrap();
        assert_eq!(keys.len(), 1);
        session
            .update_attributes(keys[0], &[Attribute::Sign(false)])
            .unwrap();
    }
}

/// Whether this process is a child of [`in_child`].
pub fn is_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

/// Runs the test `name` of this binary again, alone, as a child that sees
/// `hsm` through `SOFTHSM2_CONF`; the child takes the test's child part
/// ([`is_child`]). Fails with the child's output when the child fails.
pub fn in_child(name: &str, hsm: &SoftHsm) {
    // Test names in the one integration binary carry their module's path.
    let name = format!("hsm::{name}");
    let out = Command::new(std::env::current_exe().unwrap())
        .args([&name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("SOFTHSM2_CONF", hsm.conf())
        .output()
        .unwrap();
    let output = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the child failed:\n{output}");
    // A filter that matched nothing passes too: make sure it ran.
    assert!(
        output.contains("1 passed"),
        "the child ran no test:\n{output}"
    );
    assert!(!output.contains(PIN), "the PIN is in the child's output");
}
