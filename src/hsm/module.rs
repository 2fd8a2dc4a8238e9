//! A PKCS#11 module loaded once per process, and re-initialised when a
//! token stops answering.
//!
//! A module's state is the process's, not a context's: loading the same
//! library twice gives the same library, and a second `C_Initialize` fails
//! (`CKR_CRYPTOKI_ALREADY_INITIALIZED`). Keys open at once on one module
//! (the credentials before and after a reload) therefore share one
//! [`Module`], found by the library's canonical path in a process-wide
//! table: the one global here, because the thing it stands for is global.
//!
//! `C_Finalize` followed by `C_Initialize` is how an application makes a
//! module look at its tokens afresh (SoftHSM2, for one, sees a token
//! re-created on disk only then); it also ends every session of every key
//! on the module. Both are called on the one library, loaded once and
//! kept for the [`Module`]'s life: unloading a vendor's module (`dlclose`)
//! while threads it started still run can crash the process, and a
//! re-initialisation has no need to. Each initialisation has a generation: a session records
//! the one it was opened under, so that a key never uses a session handle
//! from before a re-initialisation (the handle may now name another key's
//! session), and a key whose session was lost re-initialises the module
//! only if nobody has since.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};

use cryptoki::context::{CInitializeArgs, CInitializeFlags, Pkcs11};
use cryptoki::error::{Error, RvError};

use super::error::{HsmError, describe};

/// The modules in use, by canonical path; entries die with their module.
static MODULES: Mutex<Vec<(PathBuf, Weak<Module>)>> = Mutex::new(Vec::new());

/// One PKCS#11 library, initialised on first use.
pub(super) struct Module {
    /// As the URI gave it, for messages.
    shown: String,
    path: PathBuf,
    /// Read-locked for every call through the module, write-locked to
    /// initialise or finalize it and for nothing else: PKCS#11 leaves a
    /// `C_Finalize` racing other calls undefined.
    loaded: RwLock<Loaded>,
}

struct Loaded {
    /// The library, loaded at first use. cryptoki's `Pkcs11` is a shared
    /// handle on the loaded library (an `Arc`, `Clone`), and the library is
    /// unloaded only when the last one is dropped: this one is kept until
    /// the module is, and `C_Finalize` (`Pkcs11::finalize`, which takes a
    /// handle by value) is called on a clone of it.
    library: Option<Pkcs11>,
    /// `C_Initialize` succeeded and no `C_Finalize` came since.
    initialized: bool,
    /// Counts initialisations.
    generation: u64,
}

impl Loaded {
    /// The library, if it is initialised.
    fn context(&self) -> Option<&Pkcs11> {
        self.library.as_ref().filter(|_| self.initialized)
    }
}

/// The module at `path`, shared with every key already using it.
pub(super) fn module(path: &Path) -> Result<Arc<Module>, HsmError> {
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|err| match err.kind() {
        std::io::ErrorKind::NotFound => HsmError::ModuleMissing {
            path: shown.clone(),
        },
        _ => HsmError::NotAModule {
            path: shown.clone(),
            why: err.to_string(),
        },
    })?;
    if !meta.is_file() {
        return Err(HsmError::NotAModule {
            path: shown,
            why: "not a regular file".into(),
        });
    }
    // A symlink and its target are one library to the loader.
    let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut modules = MODULES.lock().unwrap_or_else(PoisonError::into_inner);
    modules.retain(|(_, module)| module.strong_count() > 0);
    if let Some(module) = modules
        .iter()
        .find(|(known, _)| *known == canonical)
        .and_then(|(_, module)| module.upgrade())
    {
        return Ok(module);
    }
    let module = Arc::new(Module {
        shown,
        path: canonical.clone(),
        loaded: RwLock::new(Loaded {
            library: None,
            initialized: false,
            generation: 0,
        }),
    });
    modules.push((canonical, Arc::downgrade(&module)));
    Ok(module)
}

impl Module {
    /// The module's path as the URI gave it.
    pub(super) fn shown(&self) -> &str {
        &self.shown
    }

    /// Runs `f` with the initialised module and its generation, loading
    /// and initialising it first when needed. A re-initialisation waits
    /// until `f` is done.
    pub(super) fn with<T>(
        &self,
        f: impl FnOnce(&Pkcs11, u64) -> Result<T, HsmError>,
    ) -> Result<T, HsmError> {
        loop {
            {
                let loaded = self.loaded.read().unwrap_or_else(PoisonError::into_inner);
                if let Some(context) = loaded.context() {
                    return f(context, loaded.generation);
                }
            }
            // Finalized again before `f` could run (another key lost its
            // session meanwhile): initialised once more.
            self.initialize_once()?;
        }
    }

    /// Loads and initialises the module unless that is done. The write
    /// lock is held for `C_Initialize` alone: the login and the key lookup
    /// that follow run under the read lock, so a token slow to answer them
    /// holds up no other key's signature (nor a key being dropped).
    fn initialize_once(&self) -> Result<(), HsmError> {
        let mut loaded = self.loaded.write().unwrap_or_else(PoisonError::into_inner);
        if loaded.context().is_some() {
            return Ok(());
        }
        let library = match loaded.library.take() {
            Some(library) => library,
            None => self.load()?,
        };
        let initialized = self.initialize(&library);
        loaded.library = Some(library);
        initialized?;
        loaded.initialized = true;
        loaded.generation += 1;
        Ok(())
    }

    /// Finalizes the module if it is still in the generation a lost session
    /// was opened under; the next [`Module::with`] initialises it anew. The
    /// library stays loaded.
    pub(super) fn reinitialize(&self, lost_in: u64) {
        let mut loaded = self.loaded.write().unwrap_or_else(PoisonError::into_inner);
        if loaded.generation != lost_in {
            return;
        }
        if let Some(context) = loaded.context() {
            if let Err(err) = context.clone().finalize() {
                tracing::debug!(module = %self.shown, error = %describe(&err), "C_Finalize failed");
            }
            loaded.initialized = false;
            tracing::info!(module = %self.shown, "PKCS#11 module finalized; it is initialised again for the next signature");
        }
    }

    /// The generation of the module's initialisation, if it is initialised.
    pub(super) fn generation(&self) -> Option<u64> {
        let loaded = self.loaded.read().unwrap_or_else(PoisonError::into_inner);
        loaded.context().map(|_| loaded.generation)
    }

    /// Runs `f` if `generation` is still the module's, holding it there
    /// meanwhile; a session opened under another is gone.
    pub(super) fn if_current<T>(&self, generation: u64, f: impl FnOnce() -> T) -> Option<T> {
        let loaded = self.loaded.read().unwrap_or_else(PoisonError::into_inner);
        (loaded.initialized && loaded.generation == generation).then(f)
    }

    /// Loads the library, once for the module's life.
    fn load(&self) -> Result<Pkcs11, HsmError> {
        Pkcs11::new(&self.path).map_err(|err| match err {
            Error::MissingSymbol(symbol) => HsmError::NotAModule {
                path: self.shown.clone(),
                why: format!("it has no {symbol}"),
            },
            other => HsmError::NotAModule {
                path: self.shown.clone(),
                why: describe(&other),
            },
        })
    }

    fn initialize(&self, library: &Pkcs11) -> Result<(), HsmError> {
        // OS locking: lanyard calls the module from more than one thread
        // (one signature at a time per session, but keys and the check may
        // overlap).
        let args = CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK);
        match library.initialize(args) {
            // Already initialised in this process by something else: the
            // module is usable as it is.
            Ok(()) | Err(Error::Pkcs11(RvError::CryptokiAlreadyInitialized, _)) => Ok(()),
            Err(err) => Err(self.failed("C_Initialize", describe(&err))),
        }
    }

    fn failed(&self, call: &'static str, rv: String) -> HsmError {
        HsmError::Module {
            path: self.shown.clone(),
            call,
            rv,
        }
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        let loaded = self
            .loaded
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(context) = loaded.context() {
            let _ = context.clone().finalize();
        }
        // The library is unloaded as `loaded.library` goes, unless a
        // session still holds a handle on it.
    }
}
