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
use super::ftrace_instance::{CpuLoss, Instance};
use super::ftrace_page::{Missed, Page, PageLayout};
use super::sched_events::{Hit, SchedDecoder};
use super::task_filter::TaskFilter;
use super::tgids::Tgids;
use super::KernelStats;
use crate::clock;

/// How long after its timestamp a record is taken to be readable.
const SLACK: Duration = Duration::from_millis(10);
/// Most pages of one CPU read in one read (1 MiB of 4 KiB pages), so that the other
/// CPUs' buffers are read again before they fill while a busy CPU's is being emptied.
const MAX_PAGES: usize = 256;
/// The `stats` files are read every this many reads (and when a page reports a loss).
const STATS_EVERY: u32 = 20;

/// Per CPU: its queue and the loss counters already passed on.
struct CpuState {
    cpu: u16,
    queue: CpuQueue,
    /// Loss counters accounted for by `KernelLost` records so far.
    accounted: CpuLoss,
    /// Time of the last event read (where a loss noticed now is placed).
    last_time: u64,
    /// Whether the last read left pages in the buffer.
    backlog: bool,
}

/// Tracepoints from ftrace.
pub struct FtraceSource {
    instance: Instance,
    layout: PageLayout,
    decoder: SchedDecoder,
    /// In the order of the instance's CPUs.
    cpus: Vec<CpuState>,
    tgids: Tgids,
    /// The instance's task filter.
    filter: TaskFilter,
    stats: KernelStats,
    page: Vec<u8>,
    reads: u32,
    stopped: bool,
}

impl FtraceSource {
    /// Reads `instance` (configured, not started) with pages of `layout`.
    pub fn new(instance: Instance, layout: PageLayout, decoder: SchedDecoder) -> FtraceSource {
        let layout = layout.with_page_size(instance.page_size());
        let cpus: Vec<CpuState> = instance
            .cpus()
            .map(|cpu| CpuState {
                cpu,
                queue: CpuQueue::new(cpu),
                accounted: CpuLoss::default(),
                last_time: 0,
                backlog: false,
            })
            .collect();
        let filter = instance.task_filter();
        FtraceSource {
            filter,
            page: vec![0; layout.page_size()],
            instance,
            layout,
            decoder,
            cpus,
            tgids: Tgids::default(),
            stats: KernelStats {
                ftrace: true,
                ..KernelStats::default()
            },
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
        self.instance.start()
    }

    /// Stops recording; the next read takes everything left.
    pub fn disable(&mut self) -> std::io::Result<()> {
        self.stopped = true;
        self.instance.stop()
    }

    /// Appends what can be released now to `out`, in time order per CPU; returns
    /// whether a buffer was left with records (read again soon).
    pub fn read(&mut self, out: &mut Vec<Record>) -> bool {
        let horizon = if self.stopped {
            u64::MAX
        } else {
            clock::monotonic().0.saturating_sub(SLACK.as_nanos() as u64)
        };
        self.reads = self.reads.wrapping_add(1);
        let check_stats = self.stopped || self.reads.is_multiple_of(STATS_EVERY);
        for i in 0..self.cpus.len() {
            self.cpus[i].backlog = self.read_cpu(i);
            if check_stats && !self.cpus[i].backlog {
                self.check_loss(i);
            }
        }
        let mut more = false;
        for c in &mut self.cpus {
            // Records not read yet are later than the last one read.
            let mut h = horizon;
            if c.backlog {
                h = h.min(c.last_time);
            }
            more |= c.backlog;
            c.queue.release(h, out, &mut self.stats);
        }
        more
    }

    /// What was read so far.
    pub fn stats(&self) -> KernelStats {
        self.stats
    }

    /// Reads the buffer of the `i`th CPU into its queue, up to [`MAX_PAGES`]; returns
    /// whether pages were left.
    fn read_cpu(&mut self, i: usize) -> bool {
        for _ in 0..MAX_PAGES {
            match self.instance.read_page(i, &mut self.page) {
                Ok(true) => {}
                Ok(false) => return false,
                Err(_) => {
                    self.stats.undecodable += 1;
                    return false;
                }
            }
            let page = match Page::parse(&self.layout, &self.page) {
                Ok(p) => p,
                Err(_) => {
                    self.stats.undecodable += 1;
                    continue;
                }
            };
            let c = &mut self.cpus[i];
            if page.missed != Missed::No {
                // The position is known (just before this page); the count is the
                // kernel's overrun counter, which the page's own count (if it had room
                // for one) is part of.
                let now = self.instance.loss(c.cpu).ok();
                let count = match (now, page.missed) {
                    (Some(now), _) if now.overrun > c.accounted.overrun => {
                        let n = now.overrun - c.accounted.overrun;
                        c.accounted.overrun = now.overrun;
                        n
                    }
                    (None, Missed::Count(n)) => n,
                    _ => 0,
                };
                c.queue.lost(page.timestamp, count);
            }
            for e in page.events() {
                let e = match e {
                    Ok(e) => e,
                    Err(_) => {
                        self.stats.undecodable += 1;
                        c.queue.lost(c.last_time, 0);
                        break;
                    }
                };
                c.last_time = e.time;
                match decode(&self.decoder, &mut self.tgids, c.cpu, e.time, e.payload) {
                    Some((r, current)) => c.queue.event(r, current),
                    None => self.stats.undecodable += 1,
                }
            }
        }
        true
    }

    /// Passes on losses the `stats` file counts and the pages did not report.
    fn check_loss(&mut self, i: usize) {
        let c = &mut self.cpus[i];
        let Ok(now) = self.instance.loss(c.cpu) else {
            return;
        };
        // Overwritten events are passed on where a page reports them, but for those
        // of pages not read yet, which the end takes in.
        let overrun = if self.stopped {
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
            c.queue.lost(c.last_time, new);
        }
        c.accounted = CpuLoss { overrun, ..now };
    }
}

/// Decodes one ftrace event of `cpu` at `time`, with the task that was running when it
/// was written; what it says about tasks' lives goes to the tid→process map.
fn decode(
    decoder: &SchedDecoder,
    tgids: &mut Tgids,
    cpu: u16,
    time: u64,
    payload: &[u8],
) -> Option<(Record, u32)> {
    let tid = decoder.current_tid(payload)?;
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
    Some((record, tid))
}

#[cfg(test)]
mod tests {
    use super::super::ftrace_page::tests::real_layout;
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
    }

    fn lines(text: &str) -> Vec<Line> {
        text.lines()
            .map(|l| {
                // "  comm-123   [000] d..2.  3813.790891: sched_switch: a=b c=d ..."
                let (head, rest) = l.split_once("]").unwrap();
                let current = head.split('[').next().unwrap().trim();
                let current = current.rsplit('-').next().unwrap().parse().unwrap();
                let mut words = rest.split_whitespace().skip(1);
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
            let (r, current) = decode(&decoder, &mut tgids, 0, e.time, e.payload).unwrap();
            assert_eq!(current, want.current);
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
