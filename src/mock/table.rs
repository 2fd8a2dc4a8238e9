//! A table the mock's handlers share, behind a lock that a panic does not
//! poison: what a panicking handler leaves is plain data, and the mock
//! keeps serving rather than failing every later request of a test.
//!
//! Generic and imports nothing of the mock; each part of the mock keeps
//! its own table.

use std::sync::{Mutex, MutexGuard};

#[derive(Debug, Default)]
pub(super) struct Table<T>(Mutex<T>);

impl<T> Table<T> {
    pub(super) fn new(value: T) -> Table<T> {
        Table(Mutex::new(value))
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, T> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
