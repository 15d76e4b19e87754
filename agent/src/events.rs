//! What each JVMTI event does. The glue (`jvmti::callbacks`) calls these inside its
//! panic guard; each forwards to the module of its concern.

use std::sync::atomic::Ordering;

use sonda_shm::records;
use sonda_shm::AgentState;

use crate::agent::{Agent, State};
use crate::jvmti::{ClassLoad, EventHandler, Jni, Jvmti, LoadMode, Local, Vm};
use crate::{buffers, clock, counters, meta, os, probe};

impl EventHandler for Agent {
    fn agent_load(
        &self,
        vm: Vm,
        jvmti: Jvmti,
        jni: Option<&Jni<'_>>,
        options: &str,
        mode: LoadMode,
    ) -> i32 {
        self.load(vm, jvmti, jni, options, mode)
    }

    fn vm_init(&self, jni: &Jni<'_>, thread: Local<'_>) {
        if let Some(state) = crate::agent::agent_state() {
            live_start(state, jni, Some(thread), None);
        }
    }

    fn vm_death(&self, _jni: &Jni<'_>) {
        let Some(state) = self.state() else { return };
        if state.stopped.load(Ordering::Acquire) {
            return;
        }
        buffers::record(clock::now(), records::VM_DEATH, 0);
        finish(state);
    }

    fn thread_start(&self, jni: &Jni<'_>, thread: Local<'_>) {
        if let Some(state) = self.state() {
            state.threads.started(state.jvmti, jni, thread);
        }
    }

    fn thread_end(&self, _jni: &Jni<'_>, _thread: Local<'_>) {
        if let Some(state) = self.state() {
            state.threads.ended();
        }
    }

    // On the VM thread at a safepoint: no JNI, no JVMTI; only the ring.
    fn gc_start(&self) {
        buffers::record(clock::now(), records::GC_START, 0);
    }

    fn gc_finish(&self) {
        buffers::record(clock::now(), records::GC_END, 0);
    }

    fn monitor_contended_enter(&self, jni: &Jni<'_>, _thread: Local<'_>, object: Local<'_>) {
        if let Some(state) = self.state() {
            state.monitors.contended(state.jvmti, jni, object);
        }
    }

    fn monitor_contended_entered(&self, jni: &Jni<'_>, _thread: Local<'_>, object: Local<'_>) {
        if let Some(state) = self.state() {
            state.monitors.entered(state.jvmti, jni, object);
        }
    }

    fn class_file_load(&self, load: &ClassLoad<'_>) -> Option<Vec<u8>> {
        self.state()?.transformer.as_ref()?.class_file_load(load)
    }

    fn internal_error(&self, place: &'static str, message: &str) {
        Agent::internal_error(self, place, message);
    }
}

/// The start of the live phase: VMInit after a launch, or the attach itself. Defines
/// the probes, names the threads alive now, and instruments the classes loaded so far.
///
/// After a first attach (`vm` given) the probe natives cannot link until
/// `Agent_OnAttach` returned (see `probe::link`): linking and retransformation then
/// continue on an agent thread ("sonda-attach") that retries for a few seconds, so the
/// attach returns at once. After a later attach they are linked already, and the
/// classes are instrumented before the attach returns.
///
/// When the loaded classes are instrumented (or that proved impossible), the header
/// says `AgentState::Recording`: the collector waits for it.
pub fn live_start(state: &'static State, jni: &Jni<'_>, thread: Option<Local<'_>>, vm: Option<Vm>) {
    if state.live.swap(true, Ordering::AcqRel) {
        return;
    }
    let since = os::monotonic_ns();
    state.live_since.store(since, Ordering::Release);
    buffers::record(clock::now(), records::VM_INIT, 0);
    // Without methods to trace the probe class is not needed: not defined, so that a
    // JVM holds it only when something calls it (and a second agent library, from
    // another sonda build attached later, is not refused a class it does not need).
    let traces = state.transformer.is_some();
    let defined = if traces { probe::define(jni) } else { Ok(()) };
    os::urgently(|| state.threads.name_live_threads(state.jvmti, jni, thread));
    counters::NAMING_NS.set(os::monotonic_ns().saturating_sub(since));
    if !traces {
        return recording(state);
    }
    if let Err(e) = defined {
        meta::warning(format!(
            "probe class {} not defined, no method is traced: {e}",
            probe::PROBE.class
        ));
        return recording(state);
    }
    match (probe::link(jni), vm) {
        (Ok(()), _) => instrument_loaded(state, jni),
        (Err(_), Some(vm)) => {
            let spawned = vm.spawn_daemon("sonda-attach", move |jni| {
                let mut last = None;
                for delay_ms in [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000] {
                    std::thread::sleep(std::time::Duration::from_millis(delay_ms));
                    match probe::link(jni) {
                        Ok(()) => return instrument_loaded(state, jni),
                        Err(e) => last = Some(e),
                    }
                }
                if let Some(e) = last {
                    meta::warning(format!(
                        "probe natives never linked, no method is traced: {e}"
                    ));
                }
                recording(state);
            });
            if let Err(e) = spawned {
                meta::warning(format!(
                    "cannot start the agent thread, no method is traced: {e}"
                ));
                recording(state);
            }
        }
        (Err(e), None) => {
            meta::warning(format!(
                "probe natives not linked, no method is traced: {e}"
            ));
            recording(state);
        }
    }
}

/// Retransforms the loaded classes the filter may match (probes ready), unless the
/// recording was stopped meanwhile; then says the recording runs.
fn instrument_loaded(state: &'static State, jni: &Jni<'_>) {
    if let Some(t) = &state.transformer {
        let _serial = state.transforming.lock();
        if !state.stopped.load(Ordering::Acquire) {
            os::urgently(|| t.retransform_loaded(state.jvmti, jni));
        }
    }
    recording(state);
}

/// Tells the collector the recording runs (instrumentation in place), unless it is
/// already over.
fn recording(state: &'static State) {
    let since = state.live_since.load(Ordering::Acquire);
    counters::READY_NS.set(os::monotonic_ns().saturating_sub(since));
    if !state.stopped.load(Ordering::Acquire) {
        state.region.set_agent_state(AgentState::Recording);
        crate::budget::start(state);
    }
}

/// The end (VMDeath, or the collector's stop request): warnings for patterns that
/// matched nothing, and the totals.
pub fn finish(state: &State) {
    if state.ended.swap(true, Ordering::AcqRel) {
        return;
    }
    crate::budget::end_recording();
    if let Some(t) = &state.transformer {
        t.report_unmatched();
    }
    counters::publish();
}
