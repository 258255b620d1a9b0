//! The front's lock rule, checked: a front lock (the hub's tables, a harness's state) is a
//! leaf — nothing else of the front is locked, and no server session is called, while one is
//! held. Debug builds (every test) count the front locks a thread holds and panic on a
//! nested one; release builds only lock.

use std::ops::{Deref, DerefMut};
use std::sync::{Mutex, MutexGuard};

/// A front lock, held.
pub struct Held<'a, T> {
    guard: MutexGuard<'a, T>,
}

#[cfg(debug_assertions)]
thread_local! {
    /// Front locks this thread holds.
    static HELD: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Lock `mutex`, one of the front's (a poisoned lock is taken as it is: its data is plain
/// bookkeeping, consistent after every statement).
pub fn lock<T>(mutex: &Mutex<T>) -> Held<'_, T> {
    assert_free("a front lock taken while another is held");
    #[cfg(debug_assertions)]
    HELD.with(|held| held.set(held.get() + 1));
    Held {
        guard: mutex.lock().unwrap_or_else(|p| p.into_inner()),
    }
}

/// In debug builds, panic with `what` when this thread holds a front lock (before a call
/// that may take one, or may wait: a server session's, a reply's drop).
pub fn assert_free(what: &str) {
    #[cfg(debug_assertions)]
    HELD.with(|held| assert_eq!(held.get(), 0, "{what}"));
    #[cfg(not(debug_assertions))]
    let _ = what;
}

impl<T> Drop for Held<'_, T> {
    fn drop(&mut self) {
        #[cfg(debug_assertions)]
        HELD.with(|held| held.set(held.get().saturating_sub(1)));
    }
}

impl<T> Deref for Held<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> DerefMut for Held<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_lock_at_a_time_is_fine() {
        let a = Mutex::new(1);
        let b = Mutex::new(2);
        {
            let mut held = lock(&a);
            *held += 1;
        }
        let two = *lock(&b);
        assert_eq!(two + *lock(&a), 4);
        assert_free("nothing is held now");
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "a front lock taken while another is held")]
    fn a_nested_lock_is_caught() {
        let a = Mutex::new(());
        let b = Mutex::new(());
        let _outer = lock(&a);
        let _inner = lock(&b);
    }
}
