//! How Kiln treats a poisoned lock, written once: a thread that panicked while holding a
//! `Mutex`/`RwLock` (or waiting on a `Condvar`) leaves data that Kiln's tables and caches keep
//! consistent at every step, so the guard is taken back instead of spreading the panic (which
//! could otherwise cross an `extern "C"` boundary).

use std::sync::{LockResult, PoisonError};

/// Recovers the guard (or value) of a possibly poisoned lock: `m.lock().recover()`,
/// `rw.read().recover()`, `cv.wait(g).recover()`, `m.into_inner().recover()`.
pub trait RecoverPoison<G> {
    /// The guard, whether or not another thread panicked while holding the lock.
    fn recover(self) -> G;
}

impl<G> RecoverPoison<G> for LockResult<G> {
    fn recover(self) -> G {
        self.unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::RecoverPoison;
    use std::sync::{Arc, Mutex};

    #[test]
    fn a_poisoned_mutex_is_recovered() {
        let m = Arc::new(Mutex::new(1));
        let m2 = Arc::clone(&m);
        let _ = std::thread::spawn(move || {
            let _g = m2.lock().recover();
            panic!("poison the lock");
        })
        .join();
        assert!(m.is_poisoned());
        *m.lock().recover() += 1;
        assert_eq!(*m.lock().recover(), 2);
    }
}
