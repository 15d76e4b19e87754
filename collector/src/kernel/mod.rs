//! The kernel source of a recording: scheduler tracepoints on every CPU, read through
//! perf rings and decoded into trace events.
//!
//! - [`tracefs`] finds tracefs and reads tracepoint descriptions;
//! - [`tp_format`] parses them (field offsets are never hard-coded);
//! - [`perf_ring`] opens the events and reads the per-CPU rings;
//! - [`reader_thread`] empties them on a thread of its own;
//! - [`perf_record`] decodes ring records from bytes;
//! - [`sched_events`] turns tracepoint payloads into [`sonda_trace::Event`]s;
//! - [`switch_repair`] recovers switches the tracepoint did not report.

pub mod perf_record;
pub mod perf_ring;
pub mod reader_thread;
pub mod sched_events;
pub mod switch_repair;
pub mod tp_format;
pub mod tracefs;

use sonda_trace::{Cpu, Event, Record, Time};

use perf_record::{PerfRecord, Truncated};
use perf_ring::KernelRings;
use sched_events::{SchedDecoder, TRACEPOINTS};
use switch_repair::CpuSwitches;
use tracefs::{Tracefs, TracefsError};

/// Why the kernel source could not start.
#[derive(Debug)]
pub enum KernelError {
    /// Not allowed (not root, no CAP_PERFMON): the recording falls back to /proc.
    Permission(String),
    /// Anything else: the recording cannot go on.
    Other(String),
}

impl std::fmt::Display for KernelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KernelError::Permission(s) | KernelError::Other(s) => f.write_str(s),
        }
    }
}

/// Tally of what was read.
#[derive(Clone, Copy, Default, Debug)]
pub struct KernelStats {
    /// Samples decoded into events.
    pub samples: u64,
    /// Records the kernel lost (rings full).
    pub lost: u64,
    /// Samples whose payload did not decode (never expected).
    pub undecodable: u64,
    /// Switches recovered from switch-in records (see [`switch_repair`]).
    pub repaired: u64,
}

/// Open tracepoints on every CPU.
pub struct KernelSource {
    rings: KernelRings,
    decoder: SchedDecoder,
    /// Per CPU number.
    switches: Vec<CpuSwitches>,
    stats: KernelStats,
}

impl KernelSource {
    /// Reads the tracepoint formats and opens them, disabled, on `cpus` with rings of
    /// `ring_bytes` per CPU.
    pub fn open(cpus: &[u16], ring_bytes: usize) -> Result<KernelSource, KernelError> {
        let tracefs = Tracefs::locate().map_err(tracefs_error)?;
        let mut formats = Vec::with_capacity(TRACEPOINTS.len());
        for (sys, name) in TRACEPOINTS {
            formats.push(tracefs.format(sys, name).map_err(tracefs_error)?);
        }
        let formats: [_; 8] = formats.try_into().expect("one format per tracepoint");
        let decoder = SchedDecoder::new(&formats).map_err(|e| KernelError::Other(e.to_string()))?;
        let ids: Vec<u64> = formats.iter().map(|f| f.id).collect();
        let rings = KernelRings::open(&ids, cpus, ring_bytes).map_err(|e| match e {
            perf_ring::OpenError::Permission(e) => KernelError::Permission(e.to_string()),
            perf_ring::OpenError::Other(s) => KernelError::Other(s),
        })?;
        let max_cpu = cpus.iter().copied().max().unwrap_or(0);
        Ok(KernelSource {
            rings,
            decoder,
            switches: vec![CpuSwitches::default(); usize::from(max_cpu) + 1],
            stats: KernelStats::default(),
        })
    }

    /// Starts recording.
    pub fn enable(&mut self) -> std::io::Result<()> {
        self.rings.enable()
    }

    /// Stops recording; what is in the rings can still be read.
    pub fn disable(&mut self) -> std::io::Result<()> {
        self.rings.disable()
    }

    /// Appends every record now in the rings to `out`, decoded. Each CPU's records come
    /// in the order that CPU wrote them (almost, but not exactly, time order).
    pub fn read(&mut self, out: &mut Vec<Record>) {
        let decoder = &self.decoder;
        let stats = &mut self.stats;
        let switches = &mut self.switches;
        self.rings.read(|cpu, ty, misc, body| {
            let Some(cpu_switches) = switches.get_mut(usize::from(cpu)) else {
                return;
            };
            match decode(decoder, cpu, ty, misc, body) {
                Ok(Decoded::Event(r)) => {
                    if let Event::Switch { next, .. } = r.event {
                        cpu_switches.saw_switch(next.0);
                    }
                    stats.samples += 1;
                    out.push(r);
                }
                Ok(Decoded::SwitchIn { tid, prev, time }) => {
                    if let Some(r) = cpu_switches.saw_switch_in(cpu, tid, prev, time) {
                        stats.repaired += 1;
                        out.push(r);
                    }
                }
                Ok(Decoded::Lost(r, n)) => {
                    cpu_switches.lost();
                    stats.lost += n;
                    out.push(r);
                }
                Ok(Decoded::Nothing) => {}
                Err(_) => stats.undecodable += 1,
            }
        });
    }

    /// What was read so far.
    pub fn stats(&self) -> KernelStats {
        self.stats
    }
}

fn tracefs_error(e: TracefsError) -> KernelError {
    match e {
        TracefsError::Permission(_) => KernelError::Permission(e.to_string()),
        _ => KernelError::Other(e.to_string()),
    }
}

/// What one ring record decodes to.
#[derive(Debug, PartialEq)]
enum Decoded {
    Event(Record),
    SwitchIn { tid: u32, prev: u32, time: u64 },
    Lost(Record, u64),
    Nothing,
}

/// Decodes one ring record of CPU `ring_cpu`.
fn decode(
    decoder: &SchedDecoder,
    ring_cpu: u16,
    ty: u32,
    misc: u16,
    body: &[u8],
) -> Result<Decoded, Truncated> {
    Ok(match perf_record::parse(ty, misc, body)? {
        PerfRecord::Sample(s) => match decoder.decode(&s) {
            Some(event) => Decoded::Event(Record {
                time: Time(s.time),
                event,
            }),
            None => {
                return Err(Truncated {
                    ty,
                    len: body.len(),
                })
            }
        },
        PerfRecord::Lost { lost, time, .. } => Decoded::Lost(
            Record {
                time: Time(time),
                event: Event::KernelLost {
                    cpu: Cpu(ring_cpu),
                    count: lost,
                },
            },
            lost,
        ),
        PerfRecord::SwitchIn {
            tid, prev, time, ..
        } => Decoded::SwitchIn { tid, prev, time },
        PerfRecord::Other(_) => Decoded::Nothing,
    })
}

#[cfg(test)]
mod tests {
    use super::perf_record::tests::sample_body;
    use super::sched_events::tests::{payload, real_formats, Value};
    use super::*;
    use sonda_trace::Tid;

    #[test]
    fn ring_records_become_trace_records() {
        let formats = real_formats();
        let d = SchedDecoder::new(&formats).unwrap();
        let raw = payload(
            &formats[0],
            &[
                ("prev_pid", Value::Int(5)),
                ("prev_state", Value::Int(1)),
                ("next_pid", Value::Int(6)),
            ],
        );
        let body = sample_body(5, 5, 77, 1, &raw);
        assert_eq!(
            decode(&d, 1, perf_record::PERF_RECORD_SAMPLE, 0, &body).unwrap(),
            Decoded::Event(Record {
                time: Time(77),
                event: Event::Switch {
                    cpu: Cpu(1),
                    prev: Tid(5),
                    prev_state: 1,
                    next: Tid(6)
                }
            })
        );
        let mut lost = vec![0u8; 40];
        lost[8..16].copy_from_slice(&12u64.to_ne_bytes());
        lost[24..32].copy_from_slice(&90u64.to_ne_bytes());
        assert_eq!(
            decode(&d, 1, perf_record::PERF_RECORD_LOST, 0, &lost).unwrap(),
            Decoded::Lost(
                Record {
                    time: Time(90),
                    event: Event::KernelLost {
                        cpu: Cpu(1),
                        count: 12
                    }
                },
                12
            )
        );
        assert_eq!(decode(&d, 0, 3, 0, &[]).unwrap(), Decoded::Nothing);
    }
}
