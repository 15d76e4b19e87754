//! The agent source of a recording: the shared buffer file that JVM agents (and the C
//! API) write into, and its periodic drain.
//!
//! Each cycle the recorder drains every slot (a thread's ring), turning its records into
//! trace events stamped with the agent clock, notes drops, frees the slots of threads
//! that ended (or whose process is gone), and copies new metadata from the log into
//! the trace. Converting agent clock stamps to trace time is the recorder's business
//! (see [`crate::tsc`]), because it calibrates *after* draining.

pub mod buffer_file;
pub mod copier;
pub mod maps;
pub mod native_functions;
pub mod packed;
pub mod pid_map;
pub mod ring_map;
pub mod sizing;

use std::io;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::Arc;

use anyhow::anyhow;
use sonda_shm::config::{AgentConfig, Mode};
use sonda_shm::records::decode;
use sonda_shm::{AgentState, Clock, CreateError, Region, SlotState};

use crate::liveness::Watchers;
use buffer_file::{BufferFile, BufferPlace};
use copier::Copier;
use packed::PackedRun;
use sizing::{human, Bound, Room, Sizing, TooSmall, Wanted};
use sonda_trace::codec::{Item, Items};
use sonda_trace::{Event, Meta, Pid, Record, Tid, Time};

/// Free slots scanned above the highest slot seen in use.
const SCAN_MARGIN: u32 = 64;
/// Drains between scans of every slot.
const FULL_SCAN_EVERY: u32 = 40;

/// How the buffer file is sized and what agents are told.
#[derive(Clone, Debug)]
pub struct AgentSettings {
    /// The method patterns for agents, in order (`MethodFilter::patterns`).
    pub methods: Vec<String>,
    /// The overhead budget for agents, hundredths of a percent (`AgentConfig::budget`).
    pub budget: Option<u32>,
    /// The sizes the user gave: per-thread slots (threads beyond these lose their
    /// events, counted) and bytes of ring per thread; the rest is chosen to fit
    /// ([`sizing`]).
    pub wanted: Wanted,
    /// The clock agents stamp with.
    pub clock: Clock,
    /// Whether the agent is attached to a running JVM (`mode=attach`), rather than
    /// given to JVMs the recorded command starts (`mode=launch`).
    pub attach: bool,
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

/// Where [`AgentSource::drain`] puts what it drains.
pub struct Drained<'a> {
    /// Records decoded at drain time (and drop reports), in no particular order.
    pub records: &'a mut Vec<Record>,
    /// Slots' bytes kept as they came, each run in time order.
    pub packed: &'a mut Vec<PackedRun>,
    /// Empty buffers to drain into (the watermark gives them back once released).
    pub pool: &'a mut Vec<Vec<u8>>,
}

/// The collector's side of the buffer file.
pub struct AgentSource {
    region: Arc<Region>,
    /// The thread that empties rings that ring the doorbell (`None` if it could not
    /// be started: the cycle then waits for the doorbell itself).
    copier: Option<Copier>,
    /// Staged buffers being taken (kept for its capacity).
    chunks: Vec<Vec<u8>>,
    file: BufferFile,
    /// What to tell the user about the buffer's size, if it is not what was asked.
    notice: Option<String>,
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
    /// The doorbell count last seen (see [`AgentSource::wait_for_bell`]).
    bell_seen: u32,
    stats: AgentStats,
    /// The attached process's pid namespace, when it is not ours (a container).
    pid_map: Option<pid_map::PidMap>,
    /// Compiler-instrumented native functions, turned into methods.
    natives: native_functions::NativeFunctions,
    /// The processes of idle slots, to free the slots of those killed without retiring
    /// them (a pidfd each: reading /proc/<pid>/stat for this at every drain was most of
    /// the collector's fixed cost, docs/overhead.md).
    watchers: Watchers,
}

/// The configuration agents read (see the architecture doc).
pub fn agent_config(methods: &[String], attach: bool) -> AgentConfig {
    let mode = if attach { Mode::Attach } else { Mode::Launch };
    AgentConfig {
        methods: methods.to_vec(),
        mode: Some(mode),
        ..AgentConfig::default()
    }
}

impl AgentSource {
    /// Creates a fresh buffer file in `place` (removing those of collectors that are
    /// gone first), sized to fit the room there is ([`sizing`]) and reserved whole.
    /// Errors are one line, naming the directory, its file system and free space, and
    /// the options that help.
    pub fn create(place: &BufferPlace, settings: &AgentSettings) -> anyhow::Result<AgentSource> {
        let where_ = place_text(place);
        let dir = place
            .open_dir()
            .map_err(|e| anyhow!("cannot open the agent buffer directory {where_}: {e}"))?;
        buffer_file::remove_stale_in(&dir);
        let (free, fs) =
            room_in(&dir).map_err(|e| anyhow!("cannot see the free space in {where_}: {e}"))?;
        let room = Room {
            free,
            memory: crate::host::available_memory(),
        };
        let there = format!("{where_} ({fs}, {} free)", human(free));
        let chosen = sizing::choose(settings.wanted, room).map_err(|too_small| {
            anyhow!(refusal(&there, &too_small, room.memory, settings.wanted))
        })?;
        let (file, fd) = BufferFile::create(dir, place)
            .map_err(|e| anyhow!("cannot create the agent buffer file in {where_}: {e}"))?;
        let geo = chosen.geometry;
        let region = match Region::create_on(
            fd,
            geo,
            settings.clock,
            &AgentConfig {
                budget: settings.budget,
                ..agent_config(&settings.methods, settings.attach)
            },
        ) {
            Ok(r) => r,
            Err(e) => {
                let _ = file.remove();
                return Err(match e {
                    CreateError::Reserve { bytes, error } => anyhow!(
                        "cannot reserve {} for the agent buffer in {there}: {error}; {HELP}",
                        human(bytes)
                    ),
                    e => anyhow!(
                        "cannot make the agent buffer file {}: {e}",
                        file.shown.display()
                    ),
                });
            }
        };
        let notice = chosen.reduced_from.map(|from| {
            let there = format!("{where_}, {fs} with {} free", human(free));
            reduced_notice(&there, &chosen, &from, room.memory)
        });
        let region = Arc::new(region);
        let copier = Copier::start(Arc::clone(&region)).ok();
        Ok(AgentSource {
            region,
            copier,
            chunks: Vec::new(),
            file,
            notice,
            meta_cursor: 0,
            seen_dropped: vec![0; geo.slots as usize],
            seen_dropped_enters: vec![0; geo.slots as usize],
            summary_warning: None,
            scan_limit: 0,
            since_full_scan: 0,
            bell_seen: 0,
            stats: AgentStats::default(),
            pid_map: None,
            natives: native_functions::NativeFunctions::default(),
            watchers: Watchers::default(),
        })
    }

    /// One line for the user when the buffer is smaller than the defaults (or than
    /// the sizes asked for) because of the room there is.
    pub fn notice(&self) -> Option<&str> {
        self.notice.as_deref()
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

    /// The buffer file as the traced processes see it, for the agent's `shm=` option.
    pub fn path(&self) -> &Path {
        &self.file.agent_path
    }

    /// Waits up to `timeout` for an agent's ring to pass a quarter full (its producer rings
    /// the buffer's doorbell); returns whether one did. A thread writing millions of
    /// events a second fills a ring in milliseconds, far less than the drain period,
    /// so the collector drains when told rather than only on its period.
    ///
    /// With the copier running, the copier answers the doorbell (a futex wakes one
    /// waiter): this only sleeps, and says no.
    pub fn wait_for_bell(&mut self, timeout: std::time::Duration) -> bool {
        if self.copier.is_some() {
            std::thread::sleep(timeout);
            return false;
        }
        let now = self.region.wait_doorbell(self.bell_seen, timeout);
        let rang = now != self.bell_seen;
        self.bell_seen = now;
        rang
    }

    /// Tells agents the collector is alive (`now` on the trace clock).
    pub fn heartbeat(&self, now: u64) {
        self.region.heartbeat(now);
    }

    /// Drains every slot into `out`, whose times are still the raw agent clock (TSC
    /// ticks or monotonic ns): the caller converts them in place once it has
    /// calibrated, which spares a copy of every event. A slot's bytes are kept as they
    /// came, as one [`PackedRun`] in `out.packed`, when they can be
    /// ([`packed::scan`]); otherwise they are decoded into `out.records`, as are drop
    /// reports. `now_raw` (the agent clock, read before draining) stamps drop reports
    /// of slots with no record this time; `thread(pid, tid)` is told of every thread
    /// with records. Slots of threads that ended are freed, and so are those of
    /// processes that are gone, once drained.
    pub fn drain(&mut self, now_raw: u64, mut out: Drained<'_>, mut thread: impl FnMut(Pid, Tid)) {
        // Agents take the lowest free slot, so slots in use sit below the highest one
        // ever seen in use (plus those claimed since, right above it): scanning past a
        // margin above it is wasted, and costly (each slot header is on its own page).
        // Every FULL_SCAN_EVERY drains all slots are looked at anyway.
        let slots = self.region.slots();
        self.since_full_scan += 1;
        let mut limit = if self.since_full_scan >= FULL_SCAN_EVERY {
            self.since_full_scan = 0;
            // Processes no idle slot asked about since the last full scan are let go.
            self.watchers.forget_unasked();
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
            // What the copier took from the ring first, then what is left in it. The
            // staged bytes are taken out under the slot's lock and decoded outside it:
            // the copier skips a locked slot, so it must never wait for this thread's
            // work (a ring fills meanwhile). Under the lock again: what it staged
            // since, the ring, and the slot's freeing, so that staged bytes are always
            // taken before the slot can change owner.
            let staging = self.copier.as_ref().map(|c| Arc::clone(c.staging()));
            let mut chunks = std::mem::take(&mut self.chunks);
            let mut last_raw = None;
            if let Some(s) = &staging {
                s.take(&mut s.slot(i), &mut chunks);
            }
            for chunk in chunks.drain(..) {
                self.take_bytes(chunk, pid, tid, &mut out, &mut last_raw);
            }
            let mut bytes = out.pool.pop().unwrap_or_default();
            bytes.clear();
            let guard = staging.as_ref().map(|s| {
                let mut g = s.slot(i);
                s.take(&mut g, &mut chunks);
                g
            });
            self.region.drain(i, &mut bytes);
            let got_bytes = last_raw.is_some() || !chunks.is_empty() || !bytes.is_empty();
            match info.state {
                SlotState::Retired => {
                    self.region.free_if_drained(i);
                }
                SlotState::Owned if !got_bytes && !self.watchers.alive(pid) => {
                    // Its process died without retiring the slot (killed): drained above.
                    self.region.force_free(i);
                }
                _ => {}
            }
            drop(guard);
            for chunk in chunks.drain(..) {
                self.take_bytes(chunk, pid, tid, &mut out, &mut last_raw);
            }
            self.chunks = chunks;
            self.take_bytes(bytes, pid, tid, &mut out, &mut last_raw);
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
                out.records.push(Record {
                    time: Time(last_raw.unwrap_or(now_raw)),
                    event: Event::Dropped { tid, count },
                });
            }
        }
        if let Some(c) = &self.copier {
            c.staging().set_scan_limit(limit);
            c.staging().refill(out.pool);
        }
    }

    /// One slot's drained bytes into `out`: kept whole as a packed run when they can
    /// be, else decoded (and the buffer goes back to the pool); `last_raw` becomes the
    /// time of the last record.
    fn take_bytes(
        &mut self,
        mut bytes: Vec<u8>,
        pid: Pid,
        tid: Tid,
        out: &mut Drained<'_>,
        last_raw: &mut Option<u64>,
    ) {
        if bytes.is_empty() {
            out.pool.push(bytes);
            return;
        }
        if let Some(scan) = packed::scan(&bytes) {
            self.stats.records += scan.records;
            *last_raw = Some(scan.last_raw);
            out.packed.push(PackedRun::new(bytes, pid, tid));
            return;
        }
        for rec in decode(&bytes) {
            let region = &self.region;
            let event = ring_map::event(&rec, pid, tid)
                .map(|e| self.natives.translate(pid, e, || region.next_method_id()));
            match event {
                Some(event) => {
                    self.stats.records += 1;
                    *last_raw = Some(rec.time);
                    out.records.push(Record {
                        time: Time(rec.time),
                        event,
                    });
                }
                None => self.stats.unknown += 1,
            }
        }
        bytes.clear();
        out.pool.push(bytes);
    }

    /// Stops the copier (the recording's end: the agents stopped writing); what it
    /// staged is taken by the next drain.
    pub fn stop_copier(&mut self) {
        if let Some(c) = &mut self.copier {
            c.stop();
        }
    }

    /// Times the copier woke to a doorbell (`None` without a copier).
    pub fn copier_bells(&self) -> Option<u64> {
        self.copier.as_ref().map(|c| c.staging().bells())
    }

    /// Times the copier looked again soon after a look that could not copy a ring
    /// (`None` without a copier).
    pub fn copier_retries(&self) -> Option<u64> {
        self.copier.as_ref().map(|c| c.staging().retries())
    }

    /// [`AgentSource::drain`] into a list: the packed runs' records (in slot order),
    /// then the decoded ones.
    #[cfg(test)]
    pub fn drain_records(
        &mut self,
        now_raw: u64,
        out: &mut Vec<Record>,
        thread: impl FnMut(Pid, Tid),
    ) {
        let (mut records, mut packed, mut pool) = (Vec::new(), Vec::new(), Vec::new());
        let drained = Drained {
            records: &mut records,
            packed: &mut packed,
            pool: &mut pool,
        };
        self.drain(now_raw, drained, thread);
        for mut run in packed {
            out.extend(std::iter::from_fn(|| run.pop()));
        }
        out.append(&mut records);
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
        self.file.remove()
    }
}

/// What helps when the buffer does not fit.
const HELP: &str = "give --buffer-dir DIR on a file system with more room (as /tmp), or a smaller --agent-buffer or --agent-slots";

/// The directory for messages: ours, or the traced process's (`/dev/shm inside
/// /proc/42/root`).
fn place_text(place: &BufferPlace) -> String {
    if place.root == Path::new("/") {
        place.dir.display().to_string()
    } else {
        format!("{} inside {}", place.dir.display(), place.root.display())
    }
}

/// The free bytes and the file system's name of directory `dir`.
fn room_in(dir: impl AsFd) -> io::Result<(u64, String)> {
    let vfs = rustix::fs::fstatvfs(&dir)?;
    // `f_type`'s width differs between architectures (i64 on x86_64).
    #[allow(clippy::unnecessary_cast)]
    let fs = rustix::fs::fstatfs(&dir)
        .map_or_else(|_| "file system".to_string(), |s| fs_name(s.f_type as i64));
    Ok((vfs.f_bavail.saturating_mul(vfs.f_frsize), fs))
}

/// The usual name of a file system type (`statfs.f_type`).
fn fs_name(magic: i64) -> String {
    match magic {
        0x0102_1994 => "tmpfs",
        0x8584_58f6 => "ramfs",
        0xef53 => "ext4",
        0x5846_5342 => "xfs",
        0x9123_683e => "btrfs",
        0x794c_7630 => "overlayfs",
        0x6969 => "nfs",
        0x6573_5546 => "fuse",
        0x2fc1_2fc1 => "zfs",
        0x0102_1997 => "9p",
        _ => return format!("file system type {magic:#x}"),
    }
    .to_string()
}

/// Why the buffer does not fit, and what helps.
fn refusal(there: &str, e: &TooSmall, memory: Option<u64>, wanted: Wanted) -> String {
    let least = format!(
        "{}, {}",
        sizing::describe(&e.least),
        human(sizing::bytes(&e.least))
    );
    let what = if wanted.slots.is_some() && wanted.ring.is_some() {
        format!("the buffer asked for ({least}) does not fit")
    } else {
        let bound = match e.bound {
            Bound::Memory => format!(
                "a quarter of the {} of memory available",
                human(memory.unwrap_or(0))
            ),
            _ => "half of the free space".to_string(),
        };
        format!("even the least buffer sonda makes by itself ({least}) takes more than {bound}")
    };
    format!("cannot make the agent buffer in {there}: {what}; give --buffer-dir DIR on a file system with more room (as /tmp), or both --agent-buffer and --agent-slots (which may use all of the free space)")
}

/// The notice for a buffer smaller than asked.
fn reduced_notice(
    there: &str,
    s: &Sizing,
    from: &sonda_shm::Geometry,
    memory: Option<u64>,
) -> String {
    let why = match s.bound {
        Bound::Space => "sonda takes at most half of the free space".to_string(),
        Bound::AllSpace => "the log is smaller, to fit in the free space".to_string(),
        Bound::Memory => format!(
            "sonda takes at most a quarter of the {} of memory available",
            human(memory.unwrap_or(0))
        ),
        Bound::Cap => format!(
            "sonda reserves at most {} unless both --agent-buffer and --agent-slots are given",
            human(sizing::AUTO_CAP)
        ),
    };
    format!(
        "sonda: the agent buffer is {} ({} in {there}) instead of {}: {why}; --agent-buffer, --agent-slots and --buffer-dir choose",
        sizing::describe(&s.geometry),
        human(sizing::bytes(&s.geometry)),
        sizing::describe(from),
    )
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

    /// The refusal and the notice: one line each, naming the place, its file system,
    /// its free space, what was made and the options that help.
    #[test]
    fn messages_name_the_place_the_room_and_the_options() {
        let room = |free| Room {
            free,
            memory: Some(8 << 30),
        };
        let there = "/dev/shm (tmpfs, 1 MiB free)";
        let e = sizing::choose(Wanted::default(), room(1 << 20)).unwrap_err();
        let text = refusal(there, &e, Some(8 << 30), Wanted::default());
        for part in [
            there,
            "582 KiB",
            "half of the free space",
            "--buffer-dir",
            "--agent-buffer",
            "--agent-slots",
        ] {
            assert!(text.contains(part), "{part}: {text}");
        }
        let both = Wanted {
            slots: Some(64),
            ring: Some(1 << 20),
        };
        let e = sizing::choose(both, room(1 << 20)).unwrap_err();
        assert!(refusal(there, &e, None, both).contains("the buffer asked for (64 rings of 1 MiB"));
        let s = sizing::choose(Wanted::default(), room(64 << 20)).unwrap();
        let text = reduced_notice(
            "/dev/shm, tmpfs with 64 MiB free",
            &s,
            &s.reduced_from.unwrap(),
            None,
        );
        assert_eq!(
            text,
            "sonda: the agent buffer is 256 rings of 64 KiB and a 4 MiB log (20.1 MiB in /dev/shm, tmpfs with 64 MiB free) instead of 256 rings of 1 MiB and a 16 MiB log: sonda takes at most half of the free space; --agent-buffer, --agent-slots and --buffer-dir choose"
        );
        let s = sizing::choose(both, room(70 << 20)).unwrap();
        assert!(
            reduced_notice("x", &s, &s.reduced_from.unwrap(), None).contains("the log is smaller")
        );
    }

    fn settings() -> AgentSettings {
        let filter = sonda_filter::MethodFilter::parse(&["a.B::c", "!a.B::d"]).unwrap();
        AgentSettings {
            methods: filter.patterns().to_vec(),
            budget: None,
            wanted: Wanted {
                slots: Some(4),
                ring: Some(256),
            },
            clock: Clock::Monotonic,
            attach: false,
        }
    }

    #[test]
    fn config_lists_methods_in_order() {
        let text = agent_config(&settings().methods, false).encode().unwrap();
        assert_eq!(text, "mode=launch\nmethods=a.B::c\nmethods=!a.B::d\n");
        let attach = agent_config(&[], true).encode().unwrap();
        assert!(attach.starts_with("mode=attach\n"));
        // The agent reads the same filter back.
        let methods = AgentConfig::decode(&text).unwrap().methods;
        let back = sonda_filter::MethodFilter::parse(&methods).unwrap();
        assert_eq!(back.patterns(), ["a.B::c", "!a.B::d"]);
    }

    /// The drain against a real buffer file with a producer in this process.
    #[test]
    fn drains_records_drops_and_metadata_and_frees_ended_slots() {
        let dir = tempfile::tempdir().unwrap();
        let mut src = AgentSource::create(&BufferPlace::here(dir.path()), &settings()).unwrap();
        // The drain alone, deterministic (the copier is tested below).
        src.stop_copier();
        assert_eq!(src.notice(), None);
        assert_eq!(
            Region::open(src.path()).unwrap().config(),
            Ok(agent_config(&settings().methods, false))
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
        src.drain_records(1000, &mut out, |pid, tid| threads.push((pid, tid)));
        assert_eq!(out.len(), 17);
        assert_eq!(
            out[0],
            Record {
                time: Time(0),
                event: Event::Enter {
                    tid: Tid(77),
                    method: 1
                }
            }
        );
        assert_eq!(
            out[16],
            Record {
                time: Time(15),
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
        src.drain_records(2000, &mut out, |_, _| {});
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
        settings.wanted.slots = Some(400);
        let mut src = AgentSource::create(&BufferPlace::here(dir.path()), &settings).unwrap();
        src.stop_copier();
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
        src.drain_records(0, &mut out, |_, _| {});
        assert_eq!(out.len(), 150);
        // All end but the last; its slot stays far above the free ones.
        for p in &producers[..149] {
            p.retire();
        }
        src.drain_records(0, &mut out, |_, _| {});
        producers[149].push(7, head(LEAVE, 0, 0), 1);
        let newcomer = agent.claim(me, 5000).unwrap();
        newcomer.push(8, head(ENTER, 0, 0), 2);
        out.clear();
        src.drain_records(0, &mut out, |_, _| {});
        let tids: Vec<u32> = out
            .iter()
            .filter_map(|s| s.event.tid())
            .map(|t| t.0)
            .collect();
        assert_eq!(tids, [5000, 1149]);
    }

    /// The copier empties a ring that rings the doorbell while the cycle does not
    /// drain, so that its producer writes far more than one ring without dropping; the
    /// drain then gives every record once, in order.
    #[test]
    fn the_copier_empties_ringing_rings_and_the_drain_keeps_their_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut src = AgentSource::create(&BufferPlace::here(dir.path()), &settings()).unwrap();
        let agent: &'static Region = Box::leak(Box::new(Region::open(src.path()).unwrap()));
        let p = agent.claim(std::process::id(), 78).unwrap();
        // 256-byte ring (16 units): 400 records are 25 rings' worth.
        let mut written = 0u64;
        let started = std::time::Instant::now();
        while written < 400 && started.elapsed() < std::time::Duration::from_secs(20) {
            if p.push(written, head(ENTER, 0, 0), 1) {
                written += 1;
            } else {
                std::thread::yield_now();
            }
        }
        assert_eq!(
            written, 400,
            "the copier kept the ring from filling for good"
        );
        assert!(src.copier_bells().unwrap() > 0);
        let mut out = Vec::new();
        src.drain_records(0, &mut out, |_, _| {});
        let times: Vec<u64> = out
            .iter()
            .filter(|r| matches!(r.event, Event::Enter { .. }))
            .map(|r| r.time.0)
            .collect();
        assert_eq!(times, (0..400).collect::<Vec<_>>());
    }

    /// A ring whose bell the copier answered while the cycle held the slot (taking
    /// its staged bytes) is copied soon after the cycle lets go, with no new bell: its
    /// producer rings once per drain, and the copier used to sleep a second after such
    /// a look (two threads at 2.5 M calls a second dropped events that way).
    #[test]
    fn a_ring_the_copier_could_not_take_is_taken_soon_after_without_a_new_bell() {
        let dir = tempfile::tempdir().unwrap();
        let src = AgentSource::create(&BufferPlace::here(dir.path()), &settings()).unwrap();
        let agent: &'static Region = Box::leak(Box::new(Region::open(src.path()).unwrap()));
        let p = agent.claim(std::process::id(), 79).unwrap();
        let slot = (0..agent.slots())
            .find(|&i| agent.slot_info(i).tid == 79)
            .unwrap();
        let staging = src.copier.as_ref().unwrap().staging();
        let held = staging.slot(slot);
        // 256-byte ring: 6 records are past its quarter (the bell) and its eighth
        // (worth copying).
        for t in 0..6 {
            assert!(p.push(t, head(ENTER, 0, 0), 1));
        }
        let pending = agent.pending_bytes(slot);
        assert!(pending > 0);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while src.copier_bells().unwrap() == 0 || src.copier_retries().unwrap() == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the copier never answered the bell"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(agent.pending_bytes(slot), pending, "copied while held");
        drop(held);
        let let_go = std::time::Instant::now();
        while agent.pending_bytes(slot) != 0 {
            assert!(
                let_go.elapsed() < std::time::Duration::from_millis(300),
                "the ring was not copied {:?} after the cycle let go",
                let_go.elapsed()
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// The copier sleeps up to a second between doorbells; stopping wakes it, so the
    /// end of a recording does not wait for its timeout. (Three times: a copier that
    /// were not woken would end within the bound by chance once in five.)
    #[test]
    fn stopping_the_copier_does_not_wait_for_its_timeout() {
        for _ in 0..3 {
            let dir = tempfile::tempdir().unwrap();
            let mut src = AgentSource::create(&BufferPlace::here(dir.path()), &settings()).unwrap();
            assert!(src.copier_bells().is_some(), "no copier");
            // Asleep in its wait by now.
            std::thread::sleep(std::time::Duration::from_millis(30));
            let asked = std::time::Instant::now();
            src.stop_copier();
            let took = asked.elapsed();
            assert!(
                took < std::time::Duration::from_millis(200),
                "the copier took {took:?} to stop"
            );
        }
    }
}
