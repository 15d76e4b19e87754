//! The agent source of a recording: the shared buffer file that JVM agents (and the C
//! API) write into, and its periodic drain.
//!
//! Each cycle the recorder drains every slot (a thread's ring), turning its records into
//! trace events stamped with the agent clock, notes drops, frees the slots of threads
//! that ended (or whose process is gone), and copies new metadata from the log into
//! the trace. Converting agent clock stamps to trace time is the recorder's business
//! (see [`crate::tsc`]), because it calibrates *after* draining.

pub mod buffer_file;
pub mod maps;
pub mod native_functions;
pub mod pid_map;
pub mod ring_map;

use std::io;
use std::path::{Path, PathBuf};

use sonda_shm::records::decode;
use sonda_shm::{AgentState, Clock, Geometry, Region, SlotState};
use sonda_trace::codec::{Item, Items};
use sonda_trace::{Event, Meta, Pid, Tid};

/// Free slots scanned above the highest slot seen in use.
const SCAN_MARGIN: u32 = 64;
/// Drains between scans of every slot.
const FULL_SCAN_EVERY: u32 = 40;

/// How the buffer file is sized and what agents are told.
#[derive(Clone, Debug)]
pub struct AgentSettings {
    /// The `methods=` lines of the agent configuration (`sonda_filter` renders them).
    pub method_lines: String,
    /// Per-thread slots (threads beyond these lose their events, counted).
    pub slots: u32,
    /// Bytes of ring per thread (a power of two).
    pub ring_len: u32,
    /// Bytes of metadata log.
    pub meta_len: u64,
    /// The clock agents stamp with.
    pub clock: Clock,
    /// Whether the agent is attached to a running JVM (`mode=attach`), rather than
    /// given to JVMs the recorded command starts (`mode=launch`).
    pub attach: bool,
}

/// One drained agent record, stamped with the agent clock.
#[derive(Clone, Debug, PartialEq)]
pub struct Stamped {
    /// Raw time on the buffer's clock (TSC ticks or monotonic ns).
    pub raw: u64,
    /// The event.
    pub event: Event,
}

/// Tally of the drain.
#[derive(Clone, Copy, Default, Debug)]
pub struct AgentStats {
    /// Ring records turned into events.
    pub records: u64,
    /// Ring records of a kind this collector does not know.
    pub unknown: u64,
    /// Events agents dropped because a thread's ring was full.
    pub dropped: u64,
    /// Of those, method or region entries: recorded entries plus these are the calls.
    pub dropped_enters: u64,
    /// Metadata records copied.
    pub metas: u64,
    /// Metadata records that did not decode.
    pub bad_metas: u64,
    /// Of the metadata, the agents' warnings (a class left unchanged, an internal error
    /// caught at the FFI boundary, ...): all are in the trace, for `sonda report`.
    pub warnings: u64,
}

/// The collector's side of the buffer file.
pub struct AgentSource {
    region: Region,
    path: PathBuf,
    meta_cursor: u64,
    /// Last `dropped` value seen per slot (the counter is cumulative over the slot's
    /// owners, so the growth belongs to whoever owns it now).
    seen_dropped: Vec<u64>,
    /// Likewise for dropped entries.
    seen_dropped_enters: Vec<u64>,
    /// The agents' warning to show in the end-of-recording summary (see
    /// [`note_warning`]).
    summary_warning: Option<String>,
    /// Slots in use are found among the first `scan_limit` (see [`AgentSource::drain`]).
    scan_limit: u32,
    /// Drains since the last scan of every slot.
    since_full_scan: u32,
    scratch: Vec<u8>,
    stats: AgentStats,
    /// The attached process's pid namespace, when it is not ours (a container).
    pid_map: Option<pid_map::PidMap>,
    /// Compiler-instrumented native functions, turned into methods.
    natives: native_functions::NativeFunctions,
}

/// The configuration text agents read (`key=value` lines, see the architecture doc).
pub fn config_text(method_lines: &str, attach: bool) -> String {
    let mode = if attach { "attach" } else { "launch" };
    format!("mode={mode}\n{method_lines}")
}

impl AgentSource {
    /// Removes stale buffer files of dead collectors and creates a fresh one in `dir`.
    pub fn create(dir: &Path, settings: &AgentSettings) -> io::Result<AgentSource> {
        buffer_file::remove_stale(dir);
        let path = buffer_file::fresh_path(dir);
        let geo = Geometry {
            slots: settings.slots,
            ring_len: settings.ring_len,
            meta_len: settings.meta_len,
        };
        let region = Region::create(
            &path,
            geo,
            settings.clock,
            &config_text(&settings.method_lines, settings.attach),
        )?;
        Ok(AgentSource {
            region,
            path,
            meta_cursor: 0,
            seen_dropped: vec![0; settings.slots as usize],
            seen_dropped_enters: vec![0; settings.slots as usize],
            summary_warning: None,
            scan_limit: 0,
            since_full_scan: 0,
            scratch: Vec::with_capacity(settings.ring_len as usize),
            stats: AgentStats::default(),
            pid_map: None,
            natives: native_functions::NativeFunctions::default(),
        })
    }

    /// Translates the ids the agent writes from its pid namespace to ours (an attach to
    /// a JVM in a container).
    pub fn translate_ids(&mut self, map: pid_map::PidMap) {
        self.pid_map = Some(map);
    }

    /// Agent thread ids that could not be translated to ours (threads gone too soon).
    pub fn unmapped_ids(&self) -> u64 {
        self.pid_map.as_ref().map_or(0, pid_map::PidMap::unmapped)
    }

    /// The buffer file, for the agent's `shm=` option.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Tells agents the collector is alive (`now` on the trace clock).
    pub fn heartbeat(&self, now: u64) {
        self.region.heartbeat(now);
    }

    /// Drains every slot into `out`. `now_raw` (the agent clock, read before draining)
    /// stamps drop reports of slots with no record this time; `thread(pid, tid)` is told
    /// of every thread with records. Slots of threads that ended are freed, and so are
    /// those of processes that are gone, once drained.
    pub fn drain(
        &mut self,
        now_raw: u64,
        out: &mut Vec<Stamped>,
        mut thread: impl FnMut(Pid, Tid),
    ) {
        // Agents take the lowest free slot, so slots in use sit below the highest one
        // ever seen in use (plus those claimed since, right above it): scanning past a
        // margin above it is wasted, and costly (each slot header is on its own page).
        // Every FULL_SCAN_EVERY drains all slots are looked at anyway.
        let slots = self.region.slots();
        self.since_full_scan += 1;
        let mut limit = if self.since_full_scan >= FULL_SCAN_EVERY {
            self.since_full_scan = 0;
            slots
        } else {
            self.scan_limit.saturating_add(SCAN_MARGIN).min(slots)
        };
        let mut i = 0;
        while i < limit {
            let info = self.region.slot_info(i);
            i += 1;
            if info.state != SlotState::Free {
                self.scan_limit = self.scan_limit.max(i);
                limit = limit.max(i.saturating_add(SCAN_MARGIN).min(slots));
            }
            if !matches!(info.state, SlotState::Owned | SlotState::Retired) {
                continue;
            }
            let i = i - 1;
            let (mut pid, mut tid) = (Pid(info.pid), Tid(info.tid));
            if let Some(map) = &mut self.pid_map {
                (pid, tid) = (map.pid(pid), map.tid(tid));
            }
            self.scratch.clear();
            self.region.drain(i, &mut self.scratch);
            let mut last_raw = None;
            for rec in decode(&self.scratch) {
                let region = &self.region;
                let event = ring_map::event(&rec, pid, tid)
                    .map(|e| self.natives.translate(pid, e, || region.next_method_id()));
                match event {
                    Some(event) => {
                        self.stats.records += 1;
                        last_raw = Some(rec.time);
                        out.push(Stamped {
                            raw: rec.time,
                            event,
                        });
                    }
                    None => self.stats.unknown += 1,
                }
            }
            if last_raw.is_some() {
                thread(pid, tid);
            }
            let seen_enters = &mut self.seen_dropped_enters[i as usize];
            self.stats.dropped_enters += info.dropped_enters.saturating_sub(*seen_enters);
            *seen_enters = info.dropped_enters;
            let seen = &mut self.seen_dropped[i as usize];
            if info.dropped > *seen {
                let count = info.dropped - *seen;
                *seen = info.dropped;
                self.stats.dropped += count;
                thread(pid, tid);
                out.push(Stamped {
                    raw: last_raw.unwrap_or(now_raw),
                    event: Event::Dropped { tid, count },
                });
            }
            match info.state {
                SlotState::Retired => {
                    self.region.free_if_drained(i);
                }
                SlotState::Owned if last_raw.is_none() && !process_alive(pid.0) => {
                    // Its process died without retiring the slot (killed): drained above.
                    self.region.force_free(i);
                }
                _ => {}
            }
        }
    }

    /// Hands every metadata record published since the last call to `each`, then the
    /// collector's own about the native functions drained so far (see
    /// [`native_functions`]).
    pub fn read_meta(&mut self, mut each: impl FnMut(Meta)) {
        let stats = &mut self.stats;
        let pid_map = &mut self.pid_map;
        let natives = &mut self.natives;
        let summary_warning = &mut self.summary_warning;
        self.region.read_meta(&mut self.meta_cursor, |bytes| {
            for item in Items::new(bytes) {
                match item {
                    Ok(Item::Meta(m)) => {
                        stats.metas += 1;
                        if let Meta::Warning { text } = &m {
                            stats.warnings += 1;
                            note_warning(summary_warning, text);
                        }
                        let m = match pid_map {
                            Some(map) => map.meta(m),
                            None => m,
                        };
                        natives.note(&m);
                        each(m);
                    }
                    Ok(_) | Err(_) => stats.bad_metas += 1,
                }
            }
        });
        self.natives.take_metas(maps::read, each);
    }

    /// Distinct native functions seen, and records kept by address for want of ids.
    pub fn native_functions(&self) -> (usize, u64) {
        (self.natives.count(), self.natives.without_id())
    }

    /// The agents' first internal error, else their first warning, if any.
    pub fn summary_warning(&self) -> Option<&str> {
        self.summary_warning.as_deref()
    }

    /// What was drained so far.
    pub fn stats(&self) -> AgentStats {
        self.stats
    }

    /// Events lost because every slot was taken.
    pub fn no_slot_drops(&self) -> u64 {
        self.region.no_slot_drops()
    }

    /// Metadata records lost because the log was full.
    pub fn meta_drops(&self) -> u64 {
        self.region.meta_drops()
    }

    /// Number of processes that mapped the buffer.
    pub fn attached(&self) -> u32 {
        self.region.attached()
    }

    /// Asks agents to stop recording and, after an attach, to restore their classes.
    pub fn request_stop(&self) {
        self.region.request_stop();
    }

    /// Where the attached agent is (`Starting` until it reports).
    pub fn agent_state(&self) -> AgentState {
        self.region.agent_state()
    }

    /// Removes the buffer file (agents still mapping it keep their mapping).
    pub fn remove(self) -> io::Result<()> {
        std::fs::remove_file(&self.path)
    }
}

/// Whether process `pid` still exists (a zombie counts as gone).
fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().as_bytes().first() != Some(&b'Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

/// Keeps the warning the summary shows: the first internal error (a panic the agent
/// caught at the FFI boundary, which must never go unseen), else the first warning.
fn note_warning(kept: &mut Option<String>, text: &str) {
    let internal = |t: &str| t.starts_with("internal error in ");
    if kept
        .as_deref()
        .is_none_or(|k| !internal(k) && internal(text))
    {
        *kept = Some(text.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sonda_shm::records::{head, ENTER, LEAVE};
    use sonda_trace::codec::encode_meta;

    #[test]
    fn the_summary_shows_the_first_internal_error_else_the_first_warning() {
        let mut kept = None;
        note_warning(&mut kept, "class A left unchanged: too big");
        note_warning(&mut kept, "class B left unchanged: too big");
        assert_eq!(kept.as_deref(), Some("class A left unchanged: too big"));
        note_warning(&mut kept, "internal error in ClassFileLoadHook: boom");
        note_warning(&mut kept, "internal error in SondaProbe: later");
        note_warning(&mut kept, "class C left unchanged: too big");
        assert_eq!(
            kept.as_deref(),
            Some("internal error in ClassFileLoadHook: boom")
        );
    }

    fn settings() -> AgentSettings {
        let filter = sonda_filter::MethodFilter::parse(&["a.B::c", "!a.B::d"]).unwrap();
        AgentSettings {
            method_lines: filter.to_config_lines(),
            slots: 4,
            ring_len: 256,
            meta_len: 1 << 16,
            clock: Clock::Monotonic,
            attach: false,
        }
    }

    #[test]
    fn config_lists_methods_in_order() {
        let text = config_text(&settings().method_lines, false);
        assert_eq!(text, "mode=launch\nmethods=a.B::c\nmethods=!a.B::d\n");
        assert!(config_text("", true).starts_with("mode=attach\n"));
        // The agent reads the same filter back.
        let back = sonda_filter::MethodFilter::from_config_lines(&text).unwrap();
        assert_eq!(back.patterns(), ["a.B::c", "!a.B::d"]);
    }

    /// The drain against a real buffer file with a producer in this process.
    #[test]
    fn drains_records_drops_and_metadata_and_frees_ended_slots() {
        let dir = tempfile::tempdir().unwrap();
        let mut src = AgentSource::create(dir.path(), &settings()).unwrap();
        assert_eq!(
            Region::open(src.path()).unwrap().config(),
            config_text(&settings().method_lines, false)
        );
        let agent: &'static Region = Box::leak(Box::new(Region::open(src.path()).unwrap()));
        let me = std::process::id();
        let p = agent.claim(me, 77).unwrap();
        let mut meta = Vec::new();
        encode_meta(
            &mut meta,
            &Meta::Method {
                id: 1,
                class: "a.B".into(),
                name: "c".into(),
                descriptor: "()V".into(),
            },
        );
        assert!(agent.meta_append(&meta));
        // 256-byte ring: 16 units fit, the rest are dropped.
        for t in 0..20u64 {
            p.push(t, head(if t % 2 == 0 { ENTER } else { LEAVE }, 0, 0), 1);
        }
        let mut out = Vec::new();
        let mut threads = Vec::new();
        src.drain(1000, &mut out, |pid, tid| threads.push((pid, tid)));
        assert_eq!(out.len(), 17);
        assert_eq!(
            out[0],
            Stamped {
                raw: 0,
                event: Event::Enter {
                    tid: Tid(77),
                    method: 1
                }
            }
        );
        assert_eq!(
            out[16],
            Stamped {
                raw: 15,
                event: Event::Dropped {
                    tid: Tid(77),
                    count: 4
                }
            }
        );
        assert!(threads.contains(&(Pid(me), Tid(77))));
        let mut metas = Vec::new();
        src.read_meta(|m| metas.push(m));
        assert_eq!(metas.len(), 1);
        p.retire();
        out.clear();
        src.drain(2000, &mut out, |_, _| {});
        assert!(out.is_empty());
        assert_eq!(agent.slot_info(0).state, SlotState::Free);
        let s = src.stats();
        assert_eq!((s.records, s.dropped, s.metas), (16, 4, 1));
        let path = src.path().to_path_buf();
        src.remove().unwrap();
        assert!(!path.exists());
    }

    #[test]
    fn finds_every_slot_in_use_without_scanning_all() {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = settings();
        settings.slots = 400;
        let mut src = AgentSource::create(dir.path(), &settings).unwrap();
        let agent: &'static Region = Box::leak(Box::new(Region::open(src.path()).unwrap()));
        let me = std::process::id();
        // A burst of threads claims slots 0..150 between two drains.
        let producers: Vec<_> = (0..150)
            .map(|t| agent.claim(me, 1000 + t).unwrap())
            .collect();
        for (t, p) in producers.iter().enumerate() {
            p.push(t as u64, head(ENTER, 0, 0), 1);
        }
        let mut out = Vec::new();
        src.drain(0, &mut out, |_, _| {});
        assert_eq!(out.len(), 150);
        // All end but the last; its slot stays far above the free ones.
        for p in &producers[..149] {
            p.retire();
        }
        src.drain(0, &mut out, |_, _| {});
        producers[149].push(7, head(LEAVE, 0, 0), 1);
        let newcomer = agent.claim(me, 5000).unwrap();
        newcomer.push(8, head(ENTER, 0, 0), 2);
        out.clear();
        src.drain(0, &mut out, |_, _| {});
        let tids: Vec<u32> = out
            .iter()
            .filter_map(|s| s.event.tid())
            .map(|t| t.0)
            .collect();
        assert_eq!(tids, [5000, 1149]);
    }
}
