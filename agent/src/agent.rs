//! The agent's one instance: start-up (options, shared file, configuration, JVMTI
//! capabilities and events) and the state the event handlers share.
//!
//! Start-up fails closed: any problem prints one `sonda: ...` line on stderr (there is
//! no trace to put it in yet) and leaves the JVM running, unrecorded. Later problems go
//! to the trace as `Meta::Warning`s.

use std::cell::RefCell;
use std::sync::atomic::AtomicBool;
use std::sync::{Once, OnceLock};

use sonda_filter::MethodFilter;
use sonda_shm::Region;
use sonda_trace::{Meta, Pid, Runtime};

use crate::jvmti::{self, Capabilities, Event, Jni, Jvmti, LoadMode, Vm};
use crate::monitors::Monitors;
use crate::options::{parse_config, parse_options, Config};
use crate::threads::Threads;
use crate::transform::Transformer;
use crate::{buffers, clock, meta, os};

/// The agent: its state exists once start-up succeeded.
pub struct Agent {
    state: OnceLock<State>,
}

/// What the event handlers share.
pub struct State {
    /// The agent's JVMTI environment.
    pub jvmti: Jvmti,
    /// The collector's configuration.
    pub config: Config,
    /// Method tracing, when `methods=` selected some.
    pub transformer: Option<Transformer>,
    /// Thread naming.
    pub threads: Threads,
    /// Monitor class interning.
    pub monitors: Monitors,
    /// Whether the live-phase start (VMInit, or attach) ran.
    pub live: AtomicBool,
    /// Whether the end (VMDeath, or stop) was handled.
    pub ended: AtomicBool,
    /// Whether the collector's stop request was handled.
    pub stopped: AtomicBool,
    /// The JVMTI events enabled at start-up.
    pub events: OnceLock<Vec<Event>>,
}

static AGENT: Agent = Agent {
    state: OnceLock::new(),
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

impl Agent {
    /// The state, once start-up succeeded.
    pub fn state(&self) -> Option<&State> {
        self.state.get()
    }

    /// `Agent_OnLoad` / `Agent_OnAttach`.
    pub fn load(&self, vm: Vm, jvmti: Jvmti, jni: Option<&Jni<'_>>, options: &str, mode: LoadMode) {
        if self.state.get().is_some() {
            eprintln!("sonda: the agent is already loaded in this JVM; ignoring this load");
            return;
        }
        let state = match start(jvmti, options) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("sonda: {e}; the JVM runs without recording");
                return;
            }
        };
        let _ = self.state.set(state);
        let Some(state) = agent_state() else { return };
        if let Err(e) = enable(state, mode) {
            eprintln!("sonda: {e}; the JVM runs without recording");
            meta::warning(format!("agent disabled: {e}"));
            return;
        }
        crate::stop::watch(state, vm);
        if mode == LoadMode::Attach {
            match jni {
                Some(jni) => crate::events::live_start(state, jni, None, Some(vm)),
                None => meta::warning("attach without a JNI environment: nothing recorded"),
            }
        }
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

/// The agent's state for the life of the process, once start-up succeeded.
pub fn agent_state() -> Option<&'static State> {
    AGENT.state.get()
}

/// Options, shared file, configuration: everything that can fail before recording.
fn start(jvmti: Jvmti, options: &str) -> Result<State, String> {
    let options = parse_options(options).map_err(|e| e.to_string())?;
    let region = Region::open(&options.shm)
        .map_err(|e| format!("cannot use buffer file {}: {e}", options.shm.display()))?;
    clock::select(region.clock());
    let config_text = region.config();
    if !buffers::set_region(region) {
        return Err("buffer file already mapped".into());
    }
    meta::write(&Meta::Process {
        pid: Pid(buffers::pid()),
        ppid: Pid(std::os::unix::process::parent_id()),
        name: process_name(jvmti),
        runtime: Runtime::Java,
    });
    let config = parse_config(&config_text).map_err(|e| {
        meta::warning(format!("agent disabled: {e}"));
        e.to_string()
    })?;
    let filter = MethodFilter::parse(&config.methods).map_err(|e| {
        meta::warning(format!("agent disabled: bad methods filter: {e}"));
        format!("bad methods filter in the buffer file's configuration: {e}")
    })?;
    let transformer = (!filter.is_empty()).then(|| Transformer::new(filter));
    Ok(State {
        jvmti,
        config,
        transformer,
        threads: Threads::new(),
        monitors: Monitors::new(),
        live: AtomicBool::new(false),
        ended: AtomicBool::new(false),
        stopped: AtomicBool::new(false),
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
/// the matching feature off with a warning instead of failing.
fn enable(state: &State, mode: LoadMode) -> Result<(), String> {
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
    if mode == LoadMode::Launch {
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
