//! Who may share the machine with whom while tests run. The tests of one test binary
//! run on parallel threads; some end-to-end tests hold what they measure to the
//! kernel's or the JVM's own figures within 1 to 5% (run and wait times against
//! schedstat, a method's cost before and after an attach, per-call CPU and wall
//! times, Tomcat's throughput), and a second JVM on the other CPU would move those
//! figures. Such a test takes the machine with [`exclusive`] for its whole run; every
//! other end-to-end test takes [`shared`], so that it runs beside its peers but never
//! beside an exclusive one. (Before the end-to-end tests were one binary, the only
//! separation was one binary after the other; a timing test still ran beside the
//! other tests of its own file. Now it runs alone.)

use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

static MACHINE: RwLock<()> = RwLock::new(());

/// The machine to this test alone, until the guard drops: waits for the tests
/// holding [`shared`] to finish, and keeps new ones from starting (the lock prefers
/// waiting writers, so an exclusive test is not starved).
pub fn exclusive() -> RwLockWriteGuard<'static, ()> {
    // A test that failed while holding the lock poisons it; the next ones still run.
    MACHINE.write().unwrap_or_else(PoisonError::into_inner)
}

/// The machine shared with other tests holding this guard, never with an
/// [`exclusive`] one.
pub fn shared() -> RwLockReadGuard<'static, ()> {
    MACHINE.read().unwrap_or_else(PoisonError::into_inner)
}
