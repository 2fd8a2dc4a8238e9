//! A bounded map whose entries expire: the shop's pending logins and its
//! sessions. What browsers can make the shop remember costs at most
//! `capacity` entries, each for at most `lifetime`. When it is full the
//! oldest entry goes: a flood of logins then costs an earlier visitor a
//! retry, where refusing new entries would lock everyone out until the
//! flood's entries expired.
//!
//! Generic, and imports nothing of the mock. The time is passed in (the
//! callers read tokio's clock), so the rules are tested without a runtime.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

pub(super) struct Memory<T> {
    entries: HashMap<String, Entry<T>>,
    capacity: usize,
    lifetime: Duration,
}

struct Entry<T> {
    value: T,
    made: Instant,
}

impl<T> Memory<T> {
    pub(super) fn new(capacity: usize, lifetime: Duration) -> Memory<T> {
        Memory {
            entries: HashMap::new(),
            capacity,
            lifetime,
        }
    }

    /// Remembers `value` under `key` from `now`, forgetting what has
    /// expired, and the oldest entry if that leaves no room.
    pub(super) fn insert(&mut self, key: String, value: T, now: Instant) {
        let lifetime = self.lifetime;
        self.entries
            .retain(|_, entry| now.duration_since(entry.made) < lifetime);
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&key) {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, entry)| entry.made)
                .map(|(key, _)| key.clone());
            if let Some(oldest) = oldest {
                self.entries.remove(&oldest);
            }
        }
        self.entries.insert(key, Entry { value, made: now });
    }

    /// The value under `key`, if it has not expired.
    pub(super) fn get(&self, key: &str, now: Instant) -> Option<&T> {
        self.entries
            .get(key)
            .filter(|entry| now.duration_since(entry.made) < self.lifetime)
            .map(|entry| &entry.value)
    }

    /// Forgets `key`, answering its value if it had not expired: what is
    /// taken once cannot be used twice.
    pub(super) fn take(&mut self, key: &str, now: Instant) -> Option<T> {
        let entry = self.entries.remove(key)?;
        (now.duration_since(entry.made) < self.lifetime).then_some(entry.value)
    }

    /// How many entries are held, expired ones included until the next
    /// insert.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn an_entry_is_taken_once() {
        let now = Instant::now();
        let mut memory = Memory::new(10, MINUTE);
        memory.insert("a".into(), 1, now);
        assert_eq!(memory.get("a", now), Some(&1));
        assert_eq!(memory.take("a", now), Some(1));
        assert_eq!(memory.take("a", now), None);
        assert_eq!(memory.get("a", now), None);
    }

    #[test]
    fn an_entry_expires_after_its_lifetime() {
        let start = Instant::now();
        let mut memory = Memory::new(10, MINUTE);
        memory.insert("a".into(), 1, start);
        memory.insert("b".into(), 2, start);
        let almost = start + MINUTE - Duration::from_millis(1);
        assert_eq!(memory.get("a", almost), Some(&1));
        assert_eq!(memory.get("a", start + MINUTE), None);
        assert_eq!(memory.take("b", start + MINUTE), None);
    }

    #[test]
    fn an_insert_forgets_what_has_expired() {
        let start = Instant::now();
        let mut memory = Memory::new(10, MINUTE);
        for i in 0..5 {
            memory.insert(format!("old-{i}"), i, start);
        }
        memory.insert("new".into(), 9, start + MINUTE);
        assert_eq!(memory.len(), 1);
    }

    #[test]
    fn a_full_memory_forgets_its_oldest_entry() {
        let start = Instant::now();
        let mut memory = Memory::new(3, MINUTE);
        for i in 0..3u64 {
            memory.insert(format!("k{i}"), i, start + Duration::from_secs(i));
        }
        memory.insert("k3".into(), 3, start + Duration::from_secs(3));
        let now = start + Duration::from_secs(4);
        assert_eq!(memory.len(), 3);
        assert_eq!(memory.get("k0", now), None, "the oldest went");
        for key in ["k1", "k2", "k3"] {
            assert!(memory.get(key, now).is_some(), "{key}");
        }
        // Replacing a held key makes no room and evicts nothing.
        memory.insert("k3".into(), 33, now);
        assert_eq!(memory.len(), 3);
        assert_eq!(memory.get("k1", now), Some(&1));
        assert_eq!(memory.get("k3", now), Some(&33));
    }
}
