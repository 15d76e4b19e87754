//! Stopping when the collector asks (the shared file's stop flag, set at the end of an
//! attach): the agent turns its JVMTI events off, gives the JVM back its original
//! classes, and writes its end-of-recording warnings and counters, leaving the
//! application as it was before the agent came.
//!
//! A plain OS thread ("sonda-watch", not a Java thread) polls the flag every 100 ms;
//! when it is set it starts a Java agent thread for the JVMTI and JNI work.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::agent::State;
use crate::jvmti::{Event, Jni, Vm};
use crate::{buffers, events, meta};

const POLL: Duration = Duration::from_millis(100);

/// Starts the thread that watches the stop flag.
pub fn watch(state: &'static State, vm: Vm) {
    let spawned = std::thread::Builder::new()
        .name("sonda-watch".into())
        .spawn(move || loop {
            std::thread::sleep(POLL);
            if state.ended.load(Ordering::Acquire) {
                return;
            }
            let requested = buffers::region().is_some_and(|r| r.stop_requested());
            if requested && state.live.load(Ordering::Acquire) {
                if let Err(e) = vm.spawn_daemon("sonda-stop", move |jni| stop(state, jni)) {
                    meta::warning(format!("cannot stop recording: {e}"));
                }
                return;
            }
        });
    if let Err(e) = spawned {
        meta::warning(format!(
            "cannot watch for the collector's stop request: {e}"
        ));
    }
}

/// Stops recording and restores the original classes (live phase, once).
pub fn stop(state: &State, jni: &Jni<'_>) {
    if state.stopped.swap(true, Ordering::AcqRel) {
        return;
    }
    for &event in state.events.get().map(Vec::as_slice).unwrap_or_default() {
        if event != Event::ClassFileLoadHook {
            let _ = state.jvmti.set_event(event, false);
        }
    }
    if let Some(t) = &state.transformer {
        // The hook must stay enabled while it hands back the original bytes.
        t.restore(state.jvmti, jni);
        let _ = state.jvmti.set_event(Event::ClassFileLoadHook, false);
    }
    events::finish(state);
}
