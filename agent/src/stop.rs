//! Stopping when the collector asks (the shared file's stop flag, set at the end of an
//! attach): the agent turns its JVMTI events off, gives the JVM back its original
//! classes, waits (briefly) for the calls still running the instrumented code to
//! return, writes its end-of-recording warnings and counters, and says so in the
//! file's header (`AgentState::Stopped`), leaving the application as it was before
//! the agent came. The library stays loaded, idle, ready for another attach.
//!
//! A plain OS thread ("sonda-watch", not a Java thread) polls the flag every 100 ms;
//! when it is set it starts a Java agent thread for the JVMTI and JNI work. After an
//! attach it also stops the recording when the collector fell silent (no heartbeat for
//! [`SILENCE`]: killed, say), so that a JVM is never left instrumented for nobody.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use sonda_shm::AgentState;

use crate::agent::State;
use crate::jvmti::{Event, Jni, LoadMode, Vm};
use crate::{buffers, events, meta, os};

const POLL: Duration = Duration::from_millis(100);
/// How long the end of a recording waits for frames still running instrumented code
/// after the classes were restored (a request in flight finishes in milliseconds; a
/// traced run loop never does, and costs this once per stop).
const FRAMES_GRACE: Duration = Duration::from_millis(500);
/// How often the stacks are looked at meanwhile (each look is a safepoint operation).
const FRAMES_POLL: Duration = Duration::from_millis(5);
/// How deep into each stack a look goes: a traced frame deeper than this (below a
/// deeper stack of untraced calls) is not waited for.
const FRAMES_DEPTH: i32 = 1024;
/// How long an attach's collector may stay silent before the agent stops by itself. A
/// live collector beats every 50-100 ms.
const SILENCE: Duration = Duration::from_secs(10);

/// Starts the thread that watches the stop flag of `state`'s recording.
pub fn watch(state: &'static State, vm: Vm) {
    let spawned = std::thread::Builder::new()
        .name("sonda-watch".into())
        .spawn(move || loop {
            std::thread::sleep(POLL);
            if state.ended.load(Ordering::Acquire) {
                return;
            }
            let requested = state.region.stop_requested();
            let silent = !requested && state.mode == LoadMode::Attach && collector_silent(state);
            if (requested || silent) && state.live.load(Ordering::Acquire) {
                if silent {
                    meta::warning(format!(
                        "the collector sent no heartbeat for {} s: recording stopped",
                        SILENCE.as_secs()
                    ));
                }
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

/// Whether the collector's last heartbeat (same clock: `CLOCK_MONOTONIC`) is older
/// than [`SILENCE`]. A file without heartbeats yet is not silent.
fn collector_silent(state: &State) -> bool {
    let beat = state.region.last_heartbeat();
    beat != 0 && os::monotonic_ns().saturating_sub(beat) > SILENCE.as_nanos() as u64
}

/// Stops recording and restores the original classes (live phase, once). Then the
/// recording is over: nothing more goes to its file, and another may start.
pub fn stop(state: &State, jni: &Jni<'_>) {
    if state.stopped.swap(true, Ordering::AcqRel) {
        return;
    }
    crate::budget::end_recording();
    for &event in state.events.get().map(Vec::as_slice).unwrap_or_default() {
        if event != Event::ClassFileLoadHook {
            let _ = state.jvmti.set_event(event, false);
        }
    }
    if let Some(t) = &state.transformer {
        let before = {
            // After an instrumentation still running on the attach thread, if any.
            let _serial = state.transforming.lock();
            // Frames already running replaced code (an earlier recording's, another
            // agent's) are not this recording's to wait for.
            let before = running_obsolete(state, jni).unwrap_or_default();
            // The hook must stay enabled while it hands back the original bytes.
            t.restore(state.jvmti, jni);
            let _ = state.jvmti.set_event(Event::ClassFileLoadHook, false);
            before
        };
        wait_for_replaced_frames(state, jni, &before);
    }
    events::finish(state);
    buffers::end_recording();
    state.region.set_agent_state(AgentState::Stopped);
    state.over.store(true, Ordering::Release);
}

/// The obsolete method versions that live threads' frames run (see
/// [`crate::jvmti::Jvmti::obsolete_frames`]), per thread.
fn running_obsolete(state: &State, jni: &Jni<'_>) -> Result<Vec<Vec<usize>>, String> {
    state
        .jvmti
        .obsolete_frames(jni, FRAMES_DEPTH)
        .map_err(|e| format!("cannot look for calls still running instrumented code: {e}"))
}

/// Waits (at most [`FRAMES_GRACE`]) until no thread runs a method version that
/// `restore` replaced, that is an obsolete version not in `before`.
///
/// A frame that was inside an instrumented method when `restore` gave the class back
/// keeps running the instrumented code to its end, and its exit probe records into the
/// recording still open: ending the recording at once would keep the call's entry and
/// lose its exit (a thread preempted for a moment in the middle of a traced call was
/// enough). Frames still there after the grace (a traced loop that never returns) are
/// said in a warning: their calls stay open in the trace.
fn wait_for_replaced_frames(state: &State, jni: &Jni<'_>, before: &[Vec<usize>]) {
    let old: HashSet<usize> = before.iter().flatten().copied().collect();
    let deadline = Instant::now() + FRAMES_GRACE;
    loop {
        let inside = match running_obsolete(state, jni) {
            Ok(threads) => threads
                .iter()
                .filter(|methods| methods.iter().any(|m| !old.contains(m)))
                .count(),
            Err(e) => {
                meta::warning(e);
                return;
            }
        };
        if inside == 0 {
            return;
        }
        if Instant::now() >= deadline {
            meta::warning(format!(
                "{inside} thread(s) were still inside instrumented methods {} ms after the \
                 recording stopped (a loop that never returns?): those calls have no exit \
                 in the trace",
                FRAMES_GRACE.as_millis()
            ));
            return;
        }
        std::thread::sleep(FRAMES_POLL);
    }
}
