//! Turns timeline outputs into Paraver records (a [`Sink`]): states with their Paraver
//! numbers, calls on the user-function type, GC and monitor events, wakeups as
//! communications. Every value written is one the `.pcf` will label: values the
//! trace's metadata does not name are remembered and labelled with their number.
//!
//! Times are shifted to Paraver's 0 (the trace's origin, or the window's start):
//! anything before it is left out and a state that straddles it is clipped.
//!
//! CPUs: Paraver builds each CPU's row from every record that names that CPU, ordered
//! by time only, with ties in thread order. At a context switch the outgoing thread's
//! state ends at the very instant the incoming one's begins, so when the incoming
//! thread has the lower row, Paraver's CPU view would show the outgoing one (or
//! nothing) for the whole next time slice. Running states still carry their CPU (every
//! record names the CPU its thread is on; other states are on no CPU, 0), but the CPU
//! view of the ready-made `.cfg` is made of events of type [`event::CPU_THREAD`]
//! instead, which Paraver orders right: a thread's row number with its CPU
//! when it starts running there, 0 when it stops, with the CPU only when no other
//! thread of the trace takes over at that instant (else CPU 0, out of the CPU's row).
//! Other events and communications carry the CPU their thread runs on, and 0 when it
//! is not running.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rustc_hash::{FxHashMap, FxHashSet};
use sonda_timeline::names::one_line;
use sonda_timeline::{
    At, CallEnter, CallExit, Edge, ExitKind, Frame, GcSpan, Interval, MonitorWait, OnCpu, Sink,
    ThreadState, UserValue, WakeEdge,
};
use sonda_trace::{Cpu, Meta, Time, TraceMeta};

use crate::conventions::{event, state_value};
use crate::pcf::{Labels, UserType};
use crate::records::Line;
use crate::reorder::Reorder;

/// Largest value Paraver labels (its `.pcf` parser reads values with `stoi`).
const MAX_VALUE: u64 = i32::MAX as u64;

/// The translating sink.
pub(crate) struct Translate {
    pub reorder: Reorder,
    /// Absolute time of Paraver's 0.
    zero: u64,
    cpus: u16,
    wakeups: bool,
    known_methods: FxHashSet<u32>,
    unknown_methods: BTreeSet<u32>,
    functions: FxHashMap<u64, u32>,
    next_function: u64,
    known_classes: FxHashSet<u32>,
    unknown_classes: BTreeSet<u32>,
    /// C API types with labelled values, and the values used of each.
    user_values: BTreeMap<u32, BTreeSet<u64>>,
    user_types: BTreeSet<u32>,
    /// Values that could not be written (ids too large, CPUs beyond the header's).
    pub skipped: u64,
    /// Whether intervals now come from a cut (they are pieces of longer states).
    pub cutting: bool,
    /// State records that are pieces added by cuts.
    pub pieces: u64,
    /// What was written, for the `.cfg` views.
    pub wrote: Wrote,
    /// The CPU (Paraver's, 1-based) each row runs on, 0 when not running.
    running: Vec<u16>,
}

/// Which kinds of events were written, and their largest values.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Wrote {
    pub cpu_view: bool,
    pub functions: bool,
    pub max_function: u32,
    pub gc: bool,
    pub monitors: bool,
    pub max_monitor: u32,
}

impl Translate {
    /// A sink writing rows for `rows` threads, times from `zero` (absolute).
    pub fn new(meta: &TraceMeta, zero: Time, rows: usize, cpus: u16, wakeups: bool) -> Translate {
        let max_method = meta
            .methods
            .keys()
            .copied()
            .filter(|&id| u64::from(id) <= MAX_VALUE)
            .max()
            .unwrap_or(0);
        let user_values = meta
            .user_types
            .iter()
            .filter_map(|m| match m {
                Meta::UserType {
                    kind,
                    value: Some(_),
                    ..
                } => Some((*kind, BTreeSet::new())),
                _ => None,
            })
            .collect();
        Translate {
            reorder: Reorder::new(rows),
            zero: zero.0,
            cpus,
            wakeups,
            known_methods: meta.methods.keys().copied().collect(),
            unknown_methods: BTreeSet::new(),
            functions: FxHashMap::default(),
            next_function: u64::from(max_method) + 1,
            known_classes: meta.monitor_classes.keys().copied().collect(),
            unknown_classes: BTreeSet::new(),
            user_values,
            user_types: BTreeSet::new(),
            skipped: 0,
            cutting: false,
            pieces: 0,
            wrote: Wrote::default(),
            running: vec![0; rows],
        }
    }

    fn time(&self, t: Time) -> u64 {
        t.0.saturating_sub(self.zero)
    }

    /// Whether `t` is at or after Paraver's 0 (inside the window).
    fn visible(&self, t: Time) -> bool {
        t.0 >= self.zero
    }

    /// Paraver's CPU: 1-based, 0 for none (or one the header does not have).
    fn cpu(&mut self, cpu: Option<Cpu>) -> u16 {
        match cpu {
            Some(c) if c.0 < self.cpus => c.0 + 1,
            Some(_) => {
                self.skipped += 1;
                0
            }
            None => 0,
        }
    }

    fn event(&mut self, at: &At, ty: u32, value: i64) {
        if !self.visible(at.time) {
            return;
        }
        let cpu = self.running[at.thread.get()];
        self.reorder.event(Line::Event {
            time: self.time(at.time),
            value,
            obj: at.thread.0,
            cpu,
            ty,
        });
    }

    /// At the window's start: the thread of `at` is already running there, so the CPU
    /// view gets its start event.
    pub fn running_at(&mut self, at: &At) {
        let row = at.thread.get();
        if self.running[row] != 0 {
            self.event(at, event::CPU_THREAD, row as i64 + 1);
        }
    }

    /// The user-function value of a frame, `None` when it cannot have one.
    fn function_value(&mut self, frame: Frame) -> Option<i64> {
        match frame {
            Frame::Method(id) if id != 0 && u64::from(id) <= MAX_VALUE => {
                if !self.known_methods.contains(&id) {
                    self.unknown_methods.insert(id);
                }
                Some(i64::from(id))
            }
            Frame::Method(_) => None,
            Frame::Func(addr) => {
                if let Some(&v) = self.functions.get(&addr) {
                    return Some(i64::from(v));
                }
                if self.next_function > MAX_VALUE {
                    return None;
                }
                let v = self.next_function as u32;
                self.next_function += 1;
                self.functions.insert(addr, v);
                Some(i64::from(v))
            }
        }
    }

    /// The `.pcf` labels of every value written, given the method labels.
    pub fn labels(&self, meta: &TraceMeta, method_labels: &HashMap<u32, String>) -> Labels {
        let mut methods: Vec<(u32, String)> = method_labels
            .iter()
            .filter(|(&id, _)| id != 0 && u64::from(id) <= MAX_VALUE)
            .map(|(&id, l)| (id, one_line(l)))
            .chain(
                self.unknown_methods
                    .iter()
                    .map(|&id| (id, format!("method {id} (unnamed)"))),
            )
            .collect();
        methods.sort();
        let mut functions = methods.clone();
        functions.extend(
            self.functions
                .iter()
                .map(|(&addr, &v)| (v, native_label(meta, addr))),
        );
        functions.sort();
        let mut monitors: Vec<(u32, String)> = meta
            .monitor_classes
            .iter()
            .filter(|(&id, _)| id != 0 && u64::from(id) <= MAX_VALUE)
            .map(|(&id, n)| (id, one_line(n)))
            .chain(
                self.unknown_classes
                    .iter()
                    .map(|&id| (id, format!("class {id} (unnamed)"))),
            )
            .collect();
        monitors.sort();
        let user_types = self.user_type_labels(meta);
        Labels {
            functions,
            methods,
            monitors,
            user_types,
            threads: Vec::new(),
        }
    }

    fn user_type_labels(&self, meta: &TraceMeta) -> Vec<UserType> {
        let mut names: BTreeMap<u32, String> = BTreeMap::new();
        let mut values: BTreeMap<u32, BTreeMap<u64, String>> = BTreeMap::new();
        for m in &meta.user_types {
            if let Meta::UserType { kind, value, name } = m {
                match value {
                    None => {
                        names.insert(*kind, one_line(name));
                    }
                    Some(v) => {
                        values.entry(*kind).or_default().insert(*v, one_line(name));
                    }
                }
            }
        }
        self.user_types
            .iter()
            .map(|&kind| {
                let name = names
                    .get(&kind)
                    .cloned()
                    .unwrap_or_else(|| format!("User value {kind}"));
                let mut labelled = values.remove(&kind).unwrap_or_default();
                for &v in self.user_values.get(&kind).into_iter().flatten() {
                    labelled.entry(v).or_insert_with(|| v.to_string());
                }
                UserType {
                    ty: event::USER_BASE + kind,
                    name,
                    values: labelled.into_iter().collect(),
                }
            })
            .collect()
    }
}

/// A native function's label: its address, and the mapped file with the offset in it
/// when the trace has the mapping.
fn native_label(meta: &TraceMeta, addr: u64) -> String {
    for m in &meta.mappings {
        if let Meta::Mapping {
            start,
            end,
            offset,
            path,
            ..
        } = m
        {
            if (*start..*end).contains(&addr) {
                let file = path.rsplit('/').next().unwrap_or(path);
                return format!(
                    "0x{addr:x} ({}+0x{:x})",
                    one_line(file),
                    addr - start + offset
                );
            }
        }
    }
    format!("0x{addr:x}")
}

impl Sink for Translate {
    fn interval(&mut self, iv: &Interval) {
        if !self.visible(iv.end) || iv.end.0 == self.zero {
            return;
        }
        self.pieces += u64::from(self.cutting);
        // A Running state names the CPU it runs on, and so does a Stolen one (the
        // thread holds that CPU, the hypervisor runs something else on it); other
        // states are on no CPU (0).
        let cpu = if matches!(iv.state, ThreadState::Running | ThreadState::Stolen) {
            self.cpu(iv.cpu)
        } else {
            0
        };
        self.reorder.state(Line::State {
            begin: self.time(iv.begin.max(Time(self.zero))),
            end: self.time(iv.end),
            obj: iv.thread.0,
            cpu,
            state: state_value(iv.state) as u16,
        });
    }

    fn enter(&mut self, call: &CallEnter) {
        if !self.visible(call.at.time) {
            return;
        }
        match self.function_value(call.frame) {
            Some(v) => {
                self.wrote.functions = true;
                self.wrote.max_function = self.wrote.max_function.max(v as u32);
                self.event(&call.at, event::USER_FUNCTION, v)
            }
            None => self.skipped += 1,
        }
    }

    fn exit(&mut self, call: &CallExit) {
        // The enter was written only if the frame has a value: keep the pair.
        let Some(v) = self.function_value(call.frame) else {
            return;
        };
        self.event(&call.at, event::USER_FUNCTION, 0);
        if call.kind == ExitKind::Exception {
            self.event(&call.at, event::EXCEPTION_EXIT, v);
        }
    }

    fn gc(&mut self, gc: &GcSpan) {
        let Some(at) = gc.at else {
            self.skipped += 1;
            return;
        };
        let value = if gc.edge == Edge::Begin { 1 } else { 0 };
        self.wrote.gc |= self.visible(at.time);
        self.event(&at, event::GC, value);
    }

    fn monitor(&mut self, wait: &MonitorWait) {
        if wait.class == 0 || u64::from(wait.class) > MAX_VALUE {
            self.skipped += 1;
            return;
        }
        if !self.known_classes.contains(&wait.class) {
            self.unknown_classes.insert(wait.class);
        }
        let value = if wait.edge == Edge::Begin {
            i64::from(wait.class)
        } else {
            0
        };
        if self.visible(wait.at.time) {
            self.wrote.monitors = true;
            self.wrote.max_monitor = self.wrote.max_monitor.max(wait.class);
        }
        self.event(&wait.at, event::MONITOR, value);
    }

    fn wake(&mut self, edge: &WakeEdge) {
        let (true, Some(from)) = (self.wakeups, edge.waker_thread) else {
            return;
        };
        if !self.visible(edge.sent) {
            return;
        }
        let from_cpu = self.running[from.get()];
        let to_cpu = self.running[edge.received.thread.get()];
        self.reorder.comm(Line::Comm {
            sent: self.time(edge.sent),
            received: self.time(edge.received.time),
            from: from.0,
            to: edge.received.thread.0,
            from_cpu,
            to_cpu,
        });
    }

    fn on_cpu(&mut self, r: &OnCpu) {
        let row = r.at.thread.get();
        let cpu = self.cpu(Some(r.cpu));
        if r.starts {
            self.running[row] = cpu;
            self.wrote.cpu_view |= self.visible(r.at.time);
            self.event(&r.at, event::CPU_THREAD, row as i64 + 1);
        } else {
            self.running[row] = if r.handover { 0 } else { cpu };
            self.event(&r.at, event::CPU_THREAD, 0);
            self.running[row] = 0;
        }
    }

    fn user(&mut self, u: &UserValue) {
        if u.kind > event::USER_MAX_KIND || u.value > MAX_VALUE {
            self.skipped += 1;
            return;
        }
        self.user_types.insert(u.kind);
        if let Some(used) = self.user_values.get_mut(&u.kind) {
            used.insert(u.value);
        }
        self.event(&u.at, event::USER_BASE + u.kind, u.value as i64);
    }
}
