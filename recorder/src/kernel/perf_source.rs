//! The kernel source read entirely from perf: tracepoint samples and switch-in records
//! in one ring per CPU, in the order each CPU wrote them. Used when no ftrace instance
//! can be made (CAP_PERFMON without write access to tracefs). On some kernels perf
//! does not deliver tracepoint samples while the idle task runs, so wakeups done from
//! interrupts on idle CPUs are missing (see [`super`]).

use sonda_trace::{Cpu, Event, Record, Time};

use super::perf_record::{self, PerfRecord, Truncated};
use super::perf_ring::KernelRings;
use super::sched_events::SchedDecoder;
use super::switch_repair::CpuSwitches;
use super::{Drained, KernelStats};

/// Tracepoints and switch records from perf rings.
pub struct PerfSource {
    rings: KernelRings,
    decoder: SchedDecoder,
    /// Per CPU number.
    switches: Vec<CpuSwitches>,
    stats: KernelStats,
    /// CPUs whose ring was not emptied by the last read.
    backlog: Vec<u16>,
}

impl PerfSource {
    /// Reads `rings` (opened, disabled), which carry the tracepoints `decoder` knows, on
    /// CPUs up to `max_cpu`.
    pub fn new(rings: KernelRings, decoder: SchedDecoder, max_cpu: u16) -> PerfSource {
        PerfSource {
            rings,
            decoder,
            switches: vec![CpuSwitches::default(); usize::from(max_cpu) + 1],
            stats: KernelStats::default(),
            backlog: Vec::new(),
        }
    }

    /// Starts recording.
    pub fn enable(&mut self) -> std::io::Result<()> {
        self.rings.enable()
    }

    /// Stops recording; what is in the rings can still be read.
    pub fn disable(&mut self) -> std::io::Result<()> {
        self.rings.disable()
    }

    /// Appends the records now in the rings to `out`, decoded, up to a ring's worth per
    /// CPU; returns whether some were left. Each CPU's records come in the order that
    /// CPU wrote them (almost, but not exactly, time order).
    pub fn read(&mut self, out: &mut Vec<Record>) -> Drained {
        let decoder = &self.decoder;
        let stats = &mut self.stats;
        let switches = &mut self.switches;
        self.backlog.clear();
        let max = self.rings.ring_bytes();
        let most = self.rings.read(
            max,
            |cpu, ty, misc, body| {
                let Some(cpu_switches) = switches.get_mut(usize::from(cpu)) else {
                    return;
                };
                match decode(decoder, cpu, ty, misc, body) {
                    Ok(Decoded::Event(r)) => {
                        match r.event {
                            Event::Switch { next, .. } => cpu_switches.saw_switch(next.0, r.time.0),
                            _ => cpu_switches.saw_record(r.time.0),
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
            },
            &mut self.backlog,
        );
        Drained {
            more: !self.backlog.is_empty(),
            busiest: (most as f64 / max.max(1) as f64).min(1.0),
        }
    }

    /// Bytes of one CPU's ring.
    pub fn buffer_bytes(&self) -> usize {
        self.rings.ring_bytes()
    }

    /// What was read so far.
    pub fn stats(&self) -> KernelStats {
        KernelStats {
            switch_delay_ns: self
                .switches
                .iter()
                .filter_map(|c| c.delay())
                .max()
                .unwrap_or(0),
            ..self.stats
        }
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
        PerfRecord::Sample(s) => match decoder.decode(&s.hit(), |_| s.pid) {
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
    use super::super::perf_record::tests::sample_body;
    use super::super::sched_events::tests::{payload, real_formats, Value};
    use super::*;
    use sonda_trace::{Pid, Tid};

    #[test]
    fn ring_records_become_trace_records() {
        let formats = real_formats();
        let d = SchedDecoder::new(&formats, None).unwrap();
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
                    next: Tid(6),
                    charge: None,
                }
            })
        );
        // A new thread joins the process of the sample's task.
        let thread = payload(
            &formats[4],
            &[
                ("pid", Value::Int(31)),
                ("comm", Value::Str("w")),
                ("clone_flags", Value::Int(0x3d0f00)),
            ],
        );
        let body = sample_body(20, 21, 78, 0, &thread);
        assert_eq!(
            decode(&d, 0, perf_record::PERF_RECORD_SAMPLE, 0, &body).unwrap(),
            Decoded::Event(Record {
                time: Time(78),
                event: Event::NewTask {
                    parent: Tid(21),
                    child: Tid(31),
                    pid: Pid(20),
                    comm: "w".into()
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
