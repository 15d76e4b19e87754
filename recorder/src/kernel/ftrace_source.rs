//! The kernel source read from a private ftrace instance: tracepoint events from its
//! per-CPU buffers, each CPU's in time order, with the switches the tracepoint did not
//! report put back in ([`CpuQueue`]).
//!
//! One read (every few ms, on the reader thread):
//! 1. note the time `now`, then empty the ftrace buffers (pages of tracepoint events);
//! 2. hand each CPU's events to its [`CpuQueue`] and release them up to `now - SLACK`:
//!    a record stamped before that is taken to be readable by then (writers stamp a
//!    record and commit it microseconds later, unless their vCPU is preempted, hence a
//!    generous slack; the recorder holds records far longer anyway). Records past the
//!    horizon stay held: they date a recovered switch that a released one reveals.
//!
//! Losses: a page says when events were overwritten before it (the buffer was full);
//! the per-CPU `stats` file counts them, and those lost otherwise. Each loss becomes an
//! [`sonda_trace::Event::KernelLost`] at the point of the stream where it was noticed,
//! and the counts add up to the kernel's counters.

use std::time::Duration;

use sonda_trace::{Event, Record, Time};

use super::cpu_queue::CpuQueue;
use super::foreign::Foreign;
use super::ftrace_instance::{CpuLoss, Instance};
use super::ftrace_page::{Missed, Page, PageLayout};
use super::missed_moves::MissedMoves;
use super::resched_clock::{ClockNote, ReschedClock};
use super::sched_events::{Hit, SchedDecoder};
use super::task_filter::TaskFilter;
use super::tgids::Tgids;
use super::{Drained, KernelStats};
use crate::clock;

/// How long after its timestamp a record is taken to be readable.
pub(super) const SLACK: Duration = Duration::from_millis(10);
/// Most pages of one CPU read in one read (1 MiB of 4 KiB pages), so that the other
/// CPUs' buffers are read again before they fill while a busy CPU's is being emptied.
const MAX_PAGES: usize = 256;
/// The `stats` files are read every this many reads (and when a page reports a loss).
const STATS_EVERY: u32 = 20;

/// Per CPU of an instance: the loss counters already passed on and where reading is.
struct CpuRead {
    cpu: u16,
    /// Loss counters accounted for by `KernelLost` records so far.
    accounted: CpuLoss,
    /// Time of the last event read (where a loss noticed now is placed).
    last_time: u64,
    /// Whether the last read left pages in the buffer.
    backlog: bool,
}

/// One instance and its CPUs (in the order of the source's queues).
struct Stream {
    instance: Instance,
    cpus: Vec<CpuRead>,
    /// The unfiltered instance: its events go in place among the others and reveal
    /// nothing about the task running (see [`CpuQueue::unfiltered_event`]).
    unfiltered: bool,
    /// Whether anything of it was lost or did not decode since the start.
    damaged: bool,
}

impl Stream {
    fn new(instance: Instance, unfiltered: bool) -> Stream {
        let cpus = instance
            .cpus()
            .map(|cpu| CpuRead {
                cpu,
                accounted: CpuLoss::default(),
                last_time: 0,
                backlog: false,
            })
            .collect();
        Stream {
            instance,
            cpus,
            unfiltered,
            damaged: false,
        }
    }
}

/// What decoding a page needs.
struct Decoding {
    layout: PageLayout,
    decoder: SchedDecoder,
    tgids: Tgids,
    /// Which records are other programs', left out as the queues release them.
    foreign: Foreign,
    stats: KernelStats,
    page: Vec<u8>,
}

/// Tracepoints from ftrace.
///
/// Two instances. The main one has the switches, wakeups and the tasks' lives, and the
/// task filter narrows it to the traced tasks. The other, never filtered, has the two
/// events the kernel writes about a task from *another* task's context:
/// `sched_migrate_task` (the load balancer run from any task's context, another
/// program's wakeup choosing a CPU for one of ours) and `sched_stat_runtime` (a
/// wakeup enqueueing a task on another CPU charges the CPU time of the task running
/// there). With the filter on, the main instance would lose those made by untraced
/// tasks; a lost charge would count as time stolen by the hypervisor.
pub struct FtraceSource {
    main: Stream,
    unfiltered: Option<Stream>,
    /// Per CPU, in the order of the instances' CPUs.
    queues: Vec<CpuQueue>,
    decoding: Decoding,
    /// The main instance's task filter.
    filter: TaskFilter,
    /// Migrations the instances did not record, recovered.
    moves: MissedMoves,
    /// Preempting switches dated by the clock a skipped update left (`resched_clock`).
    resched: ReschedClock,
    /// What this read's records said about the clocks, for `resched`.
    notes: Vec<ClockNote>,
    /// Every record up to this time has been passed on by an earlier read.
    passed_on: u64,
    reads: u32,
    stopped: bool,
}

impl FtraceSource {
    /// Reads `instance` and `unfiltered` (configured on the same CPUs, not started) with
    /// pages of `layout`.
    pub fn new(
        instance: Instance,
        unfiltered: Option<Instance>,
        layout: PageLayout,
        decoder: SchedDecoder,
    ) -> FtraceSource {
        let layout = layout.with_page_size(instance.page_size());
        let filter = instance.task_filter();
        let listed = filter.listed();
        let queues = instance.cpus().map(CpuQueue::new).collect();
        FtraceSource {
            filter,
            decoding: Decoding {
                page: vec![0; layout.page_size()],
                layout,
                decoder,
                tgids: Tgids::default(),
                foreign: Foreign::new(listed),
                stats: KernelStats {
                    ftrace: true,
                    ..KernelStats::default()
                },
            },
            queues,
            main: Stream::new(instance, false),
            unfiltered: unfiltered.map(|m| Stream::new(m, true)),
            moves: MissedMoves::default(),
            resched: ReschedClock::default(),
            notes: Vec::new(),
            passed_on: 0,
            reads: 0,
            stopped: false,
        }
    }

    /// The instance's task filter, for the recorder to give it the traced tasks.
    pub fn task_filter(&self) -> TaskFilter {
        self.filter.clone()
    }

    /// Starts recording.
    pub fn enable(&mut self) -> std::io::Result<()> {
        if let Some(m) = &self.unfiltered {
            m.instance.start()?;
        }
        self.main.instance.start()
    }

    /// Stops recording; the next read takes everything left.
    pub fn disable(&mut self) -> std::io::Result<()> {
        self.stopped = true;
        let main = self.main.instance.stop();
        if let Some(m) = &self.unfiltered {
            m.instance.stop()?;
        }
        main
    }

    /// Appends what can be released now to `out`, in time order per CPU and instance.
    pub fn read(&mut self, out: &mut Vec<Record>) -> Drained {
        let readable = clock::monotonic().0.saturating_sub(SLACK.as_nanos() as u64);
        let horizon = if self.stopped { u64::MAX } else { readable };
        self.reads = self.reads.wrapping_add(1);
        let check_stats = self.stopped || self.reads.is_multiple_of(STATS_EVERY);
        let (stopped, d) = (self.stopped, &mut self.decoding);
        let queues = &mut self.queues;
        d.foreign.refresh();
        let mut busiest = 0.0f64;
        let mut read_stream = |stream: &mut Stream, d: &mut Decoding| {
            let buffer = stream.instance.buffer_bytes().max(1) as f64;
            for (i, queue) in queues.iter_mut().enumerate() {
                let (pages, backlog) = read_cpu(stream, i, queue, d);
                stream.cpus[i].backlog = backlog;
                busiest = busiest.max((pages * d.layout.page_size()) as f64 / buffer);
                if check_stats && !stream.cpus[i].backlog {
                    check_loss(stream, i, queue, stopped);
                }
            }
        };
        read_stream(&mut self.main, d);
        // The filtered instance is read up to `readable`, or to the last record of a
        // CPU that has more: the unfiltered records before that can be judged.
        let read_up_to = self
            .main
            .cpus
            .iter()
            .filter(|c| c.backlog)
            .map(|c| c.last_time)
            .fold(readable, u64::min);
        if self.main.damaged {
            // A creation record may be among what was lost: which tasks are traced is
            // no longer known here (the follower looks them up in /proc).
            d.foreign.give_up();
        }
        d.foreign.read_up_to(read_up_to);
        if let Some(unfiltered) = self.unfiltered.as_mut() {
            read_stream(unfiltered, d);
        }
        let mut more = false;
        let start = out.len();
        let mut released_to = u64::MAX;
        for (i, queue) in queues.iter_mut().enumerate() {
            // Records not read yet are later than the last one read from their stream.
            let mut h = horizon;
            for stream in std::iter::once(&self.main).chain(self.unfiltered.as_ref()) {
                let c = &stream.cpus[i];
                if c.backlog {
                    h = h.min(c.last_time);
                    more = true;
                }
            }
            // Released records stamped from `read_up_to` on (another CPU's backlog,
            // the end) cannot be judged yet and are kept.
            let foreign = &mut d.foreign;
            queue.release_noting(
                h,
                out,
                &mut d.stats,
                |r| foreign.skips(r),
                Some(&mut self.notes),
            );
            released_to = released_to.min(h);
        }
        let released = &mut out[start..];
        released.sort_by_key(|r| r.time);
        // Preempting switches dated by the clock they were made by (`resched_clock`).
        if self.resched.date(released, &mut self.notes, self.passed_on) {
            released.sort_by_key(|r| r.time);
        }
        // Migrations the instances did not record, found in time order (see
        // `missed_moves`), dated no earlier than what earlier reads passed on.
        let mut made = Vec::new();
        let foreign = &d.foreign;
        for r in released.iter() {
            self.moves
                .see(r, |t| foreign.traced(t), self.passed_on, &mut made);
        }
        out.extend(made);
        self.passed_on = self.passed_on.max(released_to);
        Drained {
            more,
            busiest: busiest.min(1.0),
        }
    }

    /// Bytes of one CPU's buffer (each instance has the same).
    pub fn buffer_bytes(&self) -> usize {
        self.main.instance.buffer_bytes()
    }

    /// What was read so far.
    pub fn stats(&self) -> KernelStats {
        KernelStats {
            foreign_misjudged: self.decoding.foreign.misjudged(),
            migrations_recovered: self.moves.recovered(),
            switches_resched_dated: self.resched.dated(),
            ..self.decoding.stats
        }
    }
}

/// Reads the buffer of `stream`'s `i`th CPU into its queue, up to [`MAX_PAGES`]; returns
/// the pages read and whether pages were left.
fn read_cpu(
    stream: &mut Stream,
    i: usize,
    queue: &mut CpuQueue,
    d: &mut Decoding,
) -> (usize, bool) {
    for pages in 0..MAX_PAGES {
        match stream.instance.read_page(i, &mut d.page) {
            Ok(true) => {}
            Ok(false) => return (pages, false),
            Err(_) => {
                d.stats.undecodable += 1;
                stream.damaged = true;
                return (pages, false);
            }
        }
        let page = match Page::parse(&d.layout, &d.page) {
            Ok(p) => p,
            Err(_) => {
                d.stats.undecodable += 1;
                stream.damaged = true;
                continue;
            }
        };
        let c = &mut stream.cpus[i];
        if page.missed != Missed::No {
            // The position is known (just before this page); the count is the
            // kernel's overrun counter, which the page's own count (if it had room
            // for one) is part of.
            let now = stream.instance.loss(c.cpu).ok();
            let count = match (now, page.missed) {
                (Some(now), _) if now.overrun > c.accounted.overrun => {
                    let n = now.overrun - c.accounted.overrun;
                    c.accounted.overrun = now.overrun;
                    n
                }
                (None, Missed::Count(n)) => n,
                _ => 0,
            };
            queue.lost(page.timestamp, count);
            stream.damaged = true;
        }
        for e in page.events() {
            let e = match e {
                Ok(e) => e,
                Err(_) => {
                    d.stats.undecodable += 1;
                    queue.lost(c.last_time, 0);
                    stream.damaged = true;
                    break;
                }
            };
            c.last_time = e.time;
            match decode(&d.decoder, &mut d.tgids, c.cpu, e.time, e.payload) {
                Some((r, _, flags)) if stream.unfiltered => {
                    queue.unfiltered_event_in(r, None, flags)
                }
                Some((r, current, flags)) => {
                    d.foreign.filtered(&r);
                    queue.event_in(r, current, flags);
                }
                None => {
                    d.stats.undecodable += 1;
                    stream.damaged = true;
                }
            }
        }
    }
    (MAX_PAGES, true)
}

/// Passes on losses the `stats` file of `stream`'s `i`th CPU counts and the pages did
/// not report.
fn check_loss(stream: &mut Stream, i: usize, queue: &mut CpuQueue, stopped: bool) {
    let c = &mut stream.cpus[i];
    let Ok(now) = stream.instance.loss(c.cpu) else {
        return;
    };
    // Overwritten events are passed on where a page reports them, but for those of
    // pages not read yet, which the end takes in.
    let overrun = if stopped {
        now.overrun.max(c.accounted.overrun)
    } else {
        c.accounted.overrun
    };
    let new = (overrun - c.accounted.overrun)
        + now
            .commit_overrun
            .saturating_sub(c.accounted.commit_overrun)
        + now.dropped.saturating_sub(c.accounted.dropped);
    if new > 0 {
        stream.damaged = true;
        queue.lost(c.last_time, new);
    }
    c.accounted = CpuLoss { overrun, ..now };
}

/// Decodes one ftrace event of `cpu` at `time`, with the task that was running when it
/// was written and the context flags it was written with; what it says about tasks'
/// lives goes to the tid→process map.
fn decode(
    decoder: &SchedDecoder,
    tgids: &mut Tgids,
    cpu: u16,
    time: u64,
    payload: &[u8],
) -> Option<(Record, u32, u8)> {
    let tid = decoder.current_tid(payload)?;
    let flags = decoder.context_flags(payload);
    let hit = Hit {
        tid,
        cpu: u32::from(cpu),
        raw: payload,
    };
    let event = decoder.decode(&hit, |t| tgids.of(t))?;
    match &event {
        Event::NewTask { child, pid, .. } => tgids.learn(child.0, pid.0),
        Event::TaskExit { tid } => tgids.forget(tid.0),
        _ => {}
    }
    let record = Record {
        time: Time(time),
        event,
    };
    Some((record, tid, flags))
}

#[cfg(test)]
mod tests {
    use super::super::ftrace_page::tests::real_layout;
    use super::super::sched_events::flags;
    use super::super::sched_events::tests::real_formats;
    use super::*;
    use sonda_trace::{Cpu, Pid, Tid};

    /// One line of the kernel's own text rendering of a page (`trace` file).
    struct Line {
        /// µs, as printed.
        micros: u64,
        name: String,
        fields: Vec<(String, String)>,
        current: u32,
        /// The latency flags column ("dN.4."): irqs off, need-resched, irq context,
        /// preempt count, migrate-disable.
        context: String,
    }

    fn lines(text: &str) -> Vec<Line> {
        text.lines()
            .map(|l| {
                // "  comm-123   [000] d..2.  3813.790891: sched_switch: a=b c=d ..."
                let (head, rest) = l.split_once("]").unwrap();
                let current = head.split('[').next().unwrap().trim();
                let current = current.rsplit('-').next().unwrap().parse().unwrap();
                let mut words = rest.split_whitespace();
                let context = words.next().unwrap().to_string();
                let time = words.next().unwrap().trim_end_matches(':');
                let (s, us) = time.split_once('.').unwrap();
                let micros = s.parse::<u64>().unwrap() * 1_000_000 + us.parse::<u64>().unwrap();
                let name = words.next().unwrap().trim_end_matches(':').to_string();
                let fields = words
                    .filter_map(|w| w.split_once('='))
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                Line {
                    micros,
                    name,
                    fields,
                    current,
                    context,
                }
            })
            .collect()
    }

    /// The CPU a record is about.
    fn cpu_of(r: &Record) -> Option<Cpu> {
        match r.event {
            Event::Switch { cpu, .. } | Event::Waking { cpu, .. } => Some(cpu),
            _ => None,
        }
    }

    fn field<'a>(l: &'a Line, k: &str) -> &'a str {
        &l.fields.iter().find(|(n, _)| n == k).unwrap().1
    }

    fn num(l: &Line, k: &str) -> u32 {
        field(l, k).parse().unwrap()
    }

    /// Decodes a real captured page and compares every event with the kernel's text
    /// rendering of the same events.
    fn check_page(page: &[u8], text: &str) -> (Missed, usize) {
        let layout = real_layout();
        let decoder = SchedDecoder::new(&real_formats(), None).unwrap();
        let mut tgids = Tgids::default();
        let page = Page::parse(&layout, page).unwrap();
        let expected = lines(text);
        let mut n = 0;
        for (e, want) in page.events().zip(&expected) {
            let e = e.unwrap();
            // The kernel prints times rounded to the microsecond.
            assert_eq!((e.time + 500) / 1000, want.micros, "time of {}", want.name);
            // Learn the processes of creators from the line, not from /proc.
            tgids.learn(want.current, want.current);
            let (r, current, context) = decode(&decoder, &mut tgids, 0, e.time, e.payload).unwrap();
            assert_eq!(current, want.current);
            // The kernel renders the flags it wrote as letters (`trace_print_lat_fmt`).
            let column: Vec<char> = want.context.chars().collect();
            let rendered = (
                "NnBb".contains(column[1]),
                "hH".contains(column[2]),
                "sH".contains(column[2]),
            );
            let decoded = (
                context & flags::NEED_RESCHED != 0,
                context & flags::HARDIRQ != 0,
                context & flags::SOFTIRQ != 0,
            );
            assert_eq!(
                decoded, rendered,
                "flags {} at {} µs",
                want.context, want.micros
            );
            assert_eq!(cpu_of(&r).unwrap_or(Cpu(0)), Cpu(0));
            let want_event = match want.name.as_str() {
                "sched_switch" => Event::Switch {
                    cpu: Cpu(0),
                    prev: Tid(num(want, "prev_pid")),
                    prev_state: match field(want, "prev_state") {
                        "R" => 0,
                        "S" => 1,
                        "D" => 2,
                        "Z" => 0x20,
                        "I" => 0x80,
                        "R+" => 0x100,
                        other => panic!("state {other}"),
                    },
                    next: Tid(num(want, "next_pid")),
                    charge: None,
                },
                "sched_waking" => Event::Waking {
                    cpu: Cpu(0),
                    waker: Tid(want.current),
                    wakee: Tid(num(want, "pid")),
                },
                "sched_wakeup" | "sched_wakeup_new" => Event::Wakeup {
                    target: Cpu(num(want, "target_cpu") as u16),
                    wakee: Tid(num(want, "pid")),
                    new_task: want.name == "sched_wakeup_new",
                    waking: None,
                },
                "task_newtask" => Event::NewTask {
                    parent: Tid(want.current),
                    child: Tid(num(want, "pid")),
                    // clone_flags=1200000 (hex): a process of its own.
                    pid: Pid(num(want, "pid")),
                    comm: field(want, "comm").to_string(),
                },
                "sched_process_exit" => Event::TaskExit {
                    tid: Tid(num(want, "pid")),
                },
                "sched_process_exec" => Event::Exec {
                    pid: Pid(num(want, "pid")),
                    tid: Tid(want.current),
                    filename: field(want, "filename").to_string(),
                },
                "task_rename" => Event::Rename {
                    tid: Tid(num(want, "pid")),
                    comm: field(want, "newcomm").to_string(),
                },
                other => panic!("unexpected event {other}"),
            };
            assert_eq!(r.event, want_event, "at {} µs", want.micros);
            n += 1;
        }
        assert_eq!(n, expected.len(), "events in the page");
        assert_eq!(page.events().count(), n);
        (page.missed, n)
    }

    #[test]
    fn decodes_a_captured_sparse_page_like_the_kernel() {
        // Read while the writer was on it (a partial page), with 300 ms gaps (time
        // extends) and an exec of a 120-character path (a length-word event).
        let (missed, n) = check_page(
            include_bytes!("../../testdata/ftrace/sparse.page"),
            include_str!("../../testdata/ftrace/sparse.txt"),
        );
        assert_eq!((missed, n), (Missed::No, 43));
    }

    #[test]
    fn decodes_a_captured_page_after_a_loss_like_the_kernel() {
        // A full page swapped out of a small buffer that had overwritten 468 events: the
        // loss is flagged, with no room left for the count.
        let (missed, n) = check_page(
            include_bytes!("../../testdata/ftrace/overwritten.page"),
            include_str!("../../testdata/ftrace/overwritten.txt"),
        );
        assert_eq!((missed, n), (Missed::Unknown, 80));
    }
}
