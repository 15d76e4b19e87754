//! The agent's one instance: start-up (options, shared file, configuration, JVMTI
//! capabilities and events) and the state the event handlers share.
//!
//! Start-up fails closed: any problem prints one `sonda: ...` line on stderr (there is
//! no trace to put it in yet) and leaves the JVM running, unrecorded. Later problems go
//! to the trace as `Meta::Warning`s.
//!
//! # Recordings
//! A JVM started with `-agentpath` has one recording, for its whole life. A JVM the
//! collector attached to may have several, one after the other: the collector stops a
//! recording (the shared file's stop flag, see `stop`), the agent restores the classes
//! and goes idle, and a later attach loads the library again. HotSpot then calls
//! `Agent_OnAttach` of the library it already has, whose statics survived: the agent
//! starts a new [`State`] on the new buffer file, keeping the JVMTI environment of the
//! first load (its capabilities, callbacks and object tags). Each `State` is leaked, so
//! an event handler that still holds the previous one never sees it freed. Only one
//! recording runs at a time: an attach while one runs is refused with a return code
//! (`sonda_shm::attach_codes`) that the collector turns into a message, unless the
//! running one's collector is gone (killed: its lock on the buffer file is free, see
//! `sonda_shm::lock`). Then nobody reads that recording, and the new attach ends it
//! at once (classes restored) and starts its own.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Mutex, Once, OnceLock};

use sonda_filter::MethodFilter;
use sonda_shm::config::{AgentConfig, AgentOptions};
use sonda_shm::{attach_codes, AgentState, Region};
use sonda_trace::{Meta, Pid, Runtime};

use crate::jvmti::{self, Capabilities, Event, Jni, Jvmti, LoadMode, Vm};
use crate::monitors::Monitors;
use crate::threads::Threads;
use crate::transform::Transformer;
use crate::{buffers, clock, counters, meta, os, probe};

/// The agent: the JVMTI environment of its first load and the current recording.
pub struct Agent {
    /// The JVMTI environment, kept from the first load that succeeded.
    env: OnceLock<Jvmti>,
    /// The current (or last) recording: null before the first; a leaked `State`.
    current: AtomicPtr<State>,
    /// One load at a time.
    loading: Mutex<()>,
}

/// One recording: what the event handlers share while it runs.
pub struct State {
    /// The agent's JVMTI environment.
    pub jvmti: Jvmti,
    /// How the library was loaded for this recording.
    pub mode: LoadMode,
    /// This recording's buffer file (mapped for good).
    pub region: &'static Region,
    /// The collector's configuration.
    pub config: AgentConfig,
    /// Method tracing, when `methods=` selected some.
    pub transformer: Option<Transformer>,
    /// Thread naming.
    pub threads: Threads,
    /// Monitor class interning.
    pub monitors: Monitors,
    /// Whether the live-phase start (VMInit, or attach) ran.
    pub live: AtomicBool,
    /// When it started (`CLOCK_MONOTONIC` ns), for `agent.ready_ns`.
    pub live_since: AtomicU64,
    /// Whether the end (VMDeath, or stop) was handled.
    pub ended: AtomicBool,
    /// Whether the collector's stop request was handled.
    pub stopped: AtomicBool,
    /// Whether the recording is entirely over (stopped, restored, reported): only then
    /// may another start.
    pub over: AtomicBool,
    /// Serialises instrumenting the loaded classes with restoring them, which run on
    /// different agent threads.
    pub transforming: Mutex<()>,
    /// The JVMTI events enabled at start-up.
    pub events: OnceLock<Vec<Event>>,
}

static AGENT: Agent = Agent {
    env: OnceLock::new(),
    current: AtomicPtr::new(std::ptr::null_mut()),
    loading: Mutex::new(()),
};

thread_local! {
    /// The last panic's message and location, for the warning the glue's guard writes.
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs the agent as the JVMTI event handler, and a panic hook that keeps panic
/// messages off stderr (they become warnings in the trace). The hook only sees panics
/// of this library: a cdylib has its own copy of the Rust runtime.
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        jvmti::set_handler(&AGENT);
        std::panic::set_hook(Box::new(|info| {
            let text = info.to_string();
            let _ = LAST_PANIC.try_with(|p| p.borrow_mut().replace(text));
        }));
    });
}

/// Why a load did not start a recording: the code `Agent_OnAttach` returns, and the
/// line for the JVM's stderr.
struct Refusal {
    code: i32,
    message: String,
}

impl Refusal {
    fn new(code: i32, message: impl Into<String>) -> Refusal {
        Refusal {
            code,
            message: message.into(),
        }
    }
}

impl Agent {
    /// The current (or last) recording, once one started.
    pub fn state(&self) -> Option<&'static State> {
        let p = self.current.load(Ordering::Acquire);
        // SAFETY: `current` is null or a pointer from Box::leak (in `load`), never
        // freed: valid for the rest of the process.
        unsafe { p.as_ref() }
    }

    /// `Agent_OnLoad` / `Agent_OnAttach`: starts a recording. Returns what
    /// `Agent_OnAttach` returns (`attach_codes`); `Agent_OnLoad` always returns 0.
    ///
    /// A refusal comes before anything is started (no callbacks, no thread), so that
    /// HotSpot may unload the library again if this was its first load.
    pub fn load(
        &self,
        vm: Vm,
        jvmti: Jvmti,
        jni: Option<&Jni<'_>>,
        options: &str,
        mode: LoadMode,
    ) -> i32 {
        let Ok(_one_at_a_time) = self.loading.lock() else {
            return attach_codes::INTERNAL;
        };
        match self.try_load(vm, jvmti, jni, options, mode) {
            Ok(()) => attach_codes::OK,
            Err(r) => {
                // A busy JVM is no fault: the attaching collector says why, and the
                // application's stderr stays as it was.
                let busy = matches!(
                    r.code,
                    attach_codes::BUSY | attach_codes::STOPPING | attach_codes::LAUNCHED
                );
                if !busy {
                    eprintln!("sonda: {}; the JVM runs without recording", r.message);
                }
                r.code
            }
        }
    }

    fn try_load(
        &self,
        vm: Vm,
        fresh: Jvmti,
        jni: Option<&Jni<'_>>,
        options: &str,
        mode: LoadMode,
    ) -> Result<(), Refusal> {
        if let Some(previous) = self.state() {
            let busy = match (previous.mode, previous.over.load(Ordering::Acquire)) {
                (LoadMode::Launch, _) => Some(attach_codes::LAUNCHED),
                (LoadMode::Attach, false) if previous.stopped.load(Ordering::Acquire) => {
                    Some(attach_codes::STOPPING)
                }
                (LoadMode::Attach, false) if previous.region.collector_alive() => {
                    Some(attach_codes::BUSY)
                }
                // Its collector is gone (killed: its lock on the buffer file went with
                // it), so nobody reads this recording: end it now rather than when the
                // heartbeat's silence shows, and take the new one.
                (LoadMode::Attach, false) => take_over(previous, jni),
                (LoadMode::Attach, true) => None,
            };
            if let Some(code) = busy {
                fresh.dispose();
                let why = attach_codes::describe(code).unwrap_or("busy");
                return Err(Refusal::new(code, format!("not attached: {why}")));
            }
        }
        // Later loads reuse the first environment: its capabilities, callbacks and tags.
        let jvmti = match self.env.get() {
            Some(&env) => {
                fresh.dispose();
                env
            }
            None => fresh,
        };
        let state = match start(jvmti, options, mode) {
            Ok(s) => s,
            Err(r) => {
                if self.env.get().is_none() {
                    jvmti.dispose();
                }
                return Err(r);
            }
        };
        if let Err(e) = enable(&state) {
            meta::warning(format!("agent disabled: {e}"));
            buffers::end_recording();
            if self.env.get().is_none() {
                jvmti.dispose();
            }
            return Err(Refusal::new(attach_codes::JVMTI, e));
        }
        let _ = self.env.set(jvmti);
        let state: &'static State = Box::leak(Box::new(state));
        self.current
            .store((state as *const State).cast_mut(), Ordering::Release);
        crate::budget::set_vm(vm);
        crate::stop::watch(state, vm);
        if mode == LoadMode::Attach {
            match jni {
                Some(jni) => crate::events::live_start(state, jni, None, Some(vm)),
                None => {
                    meta::warning("attach without a JNI environment: nothing recorded");
                    state.region.set_agent_state(AgentState::Recording);
                }
            }
        }
        Ok(())
    }

    /// A handler panicked: report it once it is caught.
    pub fn internal_error(&self, place: &'static str, message: &str) {
        let text = LAST_PANIC
            .try_with(|p| p.borrow_mut().take())
            .ok()
            .flatten()
            .unwrap_or_else(|| message.to_string());
        if buffers::region().is_some() {
            meta::warning(format!(
                "internal error in {place}: {}",
                text.replace('\n', " ")
            ));
        } else {
            eprintln!(
                "sonda: internal error in {place}: {}",
                text.replace('\n', " ")
            );
        }
    }
}

/// Ends `previous`, an attached recording whose collector is gone, as the collector's
/// stop request would (events off, classes restored). `None` once it is over, so that
/// the new recording may start; else (no JNI environment here, or another thread is
/// already stopping it) the code that says "try again shortly".
fn take_over(previous: &'static State, jni: Option<&Jni<'_>>) -> Option<i32> {
    if let Some(jni) = jni {
        meta::warning("the collector is gone (killed?): recording stopped for a new attach");
        crate::stop::stop(previous, jni);
    }
    (!previous.over.load(Ordering::Acquire)).then_some(attach_codes::STOPPING)
}

/// The current (or last) recording, once one started.
pub fn agent_state() -> Option<&'static State> {
    AGENT.state()
}

/// Options, shared file, configuration: everything that can fail before recording.
/// On success the buffer file is the current recording's.
fn start(jvmti: Jvmti, options: &str, mode: LoadMode) -> Result<State, Refusal> {
    let options = AgentOptions::decode(options)
        .map_err(|e| Refusal::new(attach_codes::BAD_OPTIONS, e.to_string()))?;
    let region = Region::open(&options.shm).map_err(|e| {
        Refusal::new(
            attach_codes::BAD_BUFFER,
            format!("cannot use buffer file {}: {e}", options.shm.display()),
        )
    })?;
    // Ids above every id an earlier recording handed out (see `probe::FIRST_ID`).
    let first_id = region.raise_method_ids_to(probe::next_floor());
    clock::select(region.clock());
    let config = region.config();
    buffers::start_recording(region);
    let region = buffers::region().expect("the recording just started");
    probe::set_first_id(first_id);
    counters::reset();
    meta::write(&Meta::Process {
        pid: Pid(buffers::pid()),
        ppid: Pid(std::os::unix::process::parent_id()),
        name: process_name(jvmti),
        runtime: Runtime::Java,
    });
    let refuse = |what: String| {
        meta::warning(format!("agent disabled: {what}"));
        buffers::end_recording();
        Refusal::new(attach_codes::BAD_CONFIG, what)
    };
    let config = config.map_err(|e| refuse(e.to_string()))?;
    let filter = MethodFilter::parse(&config.methods).map_err(|e| {
        refuse(format!(
            "bad methods filter in the buffer file's configuration: {e}"
        ))
    })?;
    let transformer = (!filter.is_empty()).then(|| Transformer::new(filter));
    crate::budget::new_recording(first_id, config.budget.filter(|_| transformer.is_some()));
    Ok(State {
        jvmti,
        mode,
        region,
        config,
        transformer,
        threads: Threads::new(),
        monitors: Monitors::new(),
        live: AtomicBool::new(false),
        live_since: AtomicU64::new(0),
        ended: AtomicBool::new(false),
        stopped: AtomicBool::new(false),
        over: AtomicBool::new(false),
        transforming: Mutex::new(()),
        events: OnceLock::new(),
    })
}

/// The main class or jar (`sun.java.command`'s first word), else the kernel name.
fn process_name(jvmti: Jvmti) -> String {
    jvmti
        .system_property("sun.java.command")
        .and_then(|c| c.split_whitespace().next().map(str::to_string))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(os::process_comm)
}

/// Capabilities and events. Capabilities the VM cannot grant (after an attach) turn
/// the matching feature off with a warning instead of failing. An error means the
/// callbacks were not installed.
fn enable(state: &State) -> Result<(), String> {
    let jvmti = state.jvmti;
    let potential = jvmti
        .potential_capabilities()
        .map_err(|e| format!("cannot read JVMTI capabilities: {e}"))?;
    let mut want = Capabilities::default();
    let mut methods = state.transformer.is_some();
    if methods {
        if potential.retransform_classes() {
            want.set_retransform_classes();
            if potential.retransform_any_class() {
                want.set_retransform_any_class();
            }
            // To look into classes not yet linked before retransforming them.
            if potential.constant_pool() {
                want.set_constant_pool();
            }
        } else {
            meta::warning("JVMTI cannot retransform classes here: classes loaded before the agent are not instrumented");
        }
    }
    let gc = state.config.gc && potential.gc_events();
    if gc {
        want.set_gc_events();
    }
    let monitors = state.config.monitors && potential.monitor_events();
    if monitors {
        want.set_monitor_events();
        if potential.tag_objects() {
            want.set_tag_objects();
        }
    }
    if state.config.gc && !gc {
        meta::warning("JVMTI cannot report garbage collections here: gc events off");
    }
    if state.config.monitors && !monitors {
        meta::warning("JVMTI cannot report monitor contention here: monitor events off");
    }
    jvmti
        .add_capabilities(&want)
        .map_err(|e| format!("cannot add JVMTI capabilities: {e}"))?;
    jvmti
        .install_callbacks()
        .map_err(|e| format!("cannot set JVMTI callbacks: {e}"))?;
    let mut events = vec![Event::VmDeath, Event::ThreadStart, Event::ThreadEnd];
    if state.mode == LoadMode::Launch {
        events.push(Event::VmInit);
    }
    if methods {
        events.push(Event::ClassFileLoadHook);
    }
    if gc {
        events.extend([
            Event::GarbageCollectionStart,
            Event::GarbageCollectionFinish,
        ]);
    }
    if monitors {
        events.extend([Event::MonitorContendedEnter, Event::MonitorContendedEntered]);
    }
    let mut enabled = Vec::new();
    for event in events {
        match jvmti.set_event(event, true) {
            Ok(()) => enabled.push(event),
            Err(e) => {
                if event == Event::ClassFileLoadHook {
                    methods = false;
                }
                meta::warning(format!("cannot enable JVMTI event {event:?}: {e}"));
            }
        }
    }
    let _ = state.events.set(enabled);
    if state.transformer.is_some() && !methods {
        meta::warning("method tracing off: the ClassFileLoadHook could not be enabled");
    }
    Ok(())
}
