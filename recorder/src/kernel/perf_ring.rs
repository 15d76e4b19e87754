//! The perf_event_open side: one sampling event per tracepoint and CPU, system-wide
//! (pid = -1), plus a context-switch event per CPU, and one mmap ring per CPU that
//! every event of that CPU writes into (`PERF_EVENT_IOC_SET_OUTPUT`). One ring per CPU
//! keeps each CPU's records in the order they were written, which the switch repair
//! relies on, and needs a ninth of the memory of one ring per event.
//!
//! `perf-event2` opens the events and reads the rings (its `Sampler` implements the
//! `data_head`/`data_tail` protocol); the one thing it lacks, redirecting an event's
//! output into another event's ring, is a single ioctl here. Records are handed out as
//! `(type, misc, body bytes)` for [`super::perf_record`] to decode.

use std::io;
use std::os::fd::AsRawFd;

use perf_event::events::{Software, Tracepoint};
use perf_event::{Builder, Clock, Counter, SampleFlag, Sampler};

/// Why the kernel events could not be opened.
#[derive(Debug)]
pub enum OpenError {
    /// Not allowed (not root, no CAP_PERFMON): the caller falls back to /proc.
    Permission(io::Error),
    /// Anything else (a kernel without a tracepoint, out of memory for the rings).
    Other(String),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Permission(e) => write!(f, "no permission for kernel tracepoints: {e}"),
            OpenError::Other(what) => f.write_str(what),
        }
    }
}

fn open_error(e: io::Error, what: String) -> OpenError {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => OpenError::Permission(e),
        _ => OpenError::Other(format!("{what}: {e}")),
    }
}

/// The events and ring of one CPU.
struct CpuRing {
    cpu: u16,
    /// The first event, which owns the ring.
    sampler: Sampler,
    /// The other events, writing into `sampler`'s ring. Kept open: closing them would
    /// stop their events.
    members: Vec<Counter>,
}

/// Every CPU's ring.
pub struct KernelRings {
    rings: Vec<CpuRing>,
    ring_bytes: usize,
}

impl KernelRings {
    /// Opens tracepoints `ids` on every CPU of `cpus`, disabled, and a context-switch
    /// event (see [`super::switch_repair`]), each CPU with one ring of `ring_bytes`
    /// (rounded up to a power of two pages) that all its events write into.
    pub fn open(ids: &[u64], cpus: &[u16], ring_bytes: usize) -> Result<KernelRings, OpenError> {
        let mut rings = Vec::with_capacity(cpus.len());
        for &cpu in cpus {
            let mut sampler = None;
            let mut members = Vec::with_capacity(ids.len());
            let mut builders: Vec<(String, Builder)> = ids
                .iter()
                .map(|&id| {
                    (
                        format!("tracepoint {id}"),
                        Builder::new(Tracepoint::with_id(id)),
                    )
                })
                .collect();
            let mut switches = Builder::new(Software::DUMMY);
            switches.context_switch(true);
            builders.push(("context-switch records".into(), switches));
            for (what, mut builder) in builders {
                let counter = builder
                    .any_pid()
                    .one_cpu(usize::from(cpu))
                    .sample(SampleFlag::TID | SampleFlag::TIME | SampleFlag::CPU | SampleFlag::RAW)
                    .sample_period(1)
                    .sample_id_all(true)
                    .clockid(Clock::MONOTONIC)
                    .exclude_kernel(false)
                    .build()
                    .map_err(|e| open_error(e, format!("cannot open {what} on CPU {cpu}")))?;
                match &sampler {
                    None => {
                        let s = counter.sampled(ring_bytes).map_err(|e| {
                            open_error(
                                e,
                                format!("cannot map a {ring_bytes}-byte ring on CPU {cpu}"),
                            )
                        })?;
                        sampler = Some(s);
                    }
                    Some(s) => {
                        set_output(&counter, s).map_err(|e| {
                            OpenError::Other(format!("cannot share the ring of CPU {cpu}: {e}"))
                        })?;
                        members.push(counter);
                    }
                }
            }
            let sampler = sampler.expect("at least the context-switch event was opened");
            rings.push(CpuRing {
                cpu,
                sampler,
                members,
            });
        }
        Ok(KernelRings {
            rings,
            ring_bytes: ring_bytes.next_power_of_two(),
        })
    }

    /// Starts every event.
    pub fn enable(&mut self) -> io::Result<()> {
        for ring in &mut self.rings {
            ring.sampler.as_counter_mut().enable()?;
            for m in &mut ring.members {
                m.enable()?;
            }
        }
        Ok(())
    }

    /// Stops every event (records already in the rings stay readable).
    pub fn disable(&mut self) -> io::Result<()> {
        for ring in &mut self.rings {
            ring.sampler.as_counter_mut().disable()?;
            for m in &mut ring.members {
                m.disable()?;
            }
        }
        Ok(())
    }

    /// Hands every record now in the rings to `each(cpu, type, misc, body)`, consuming
    /// them.
    /// Reads at most `max_bytes` per CPU so that a CPU producing faster than the reader
    /// cannot keep it here forever; the CPUs left with records are appended to
    /// `backlog`. Returns the most bytes read from one CPU's ring.
    pub fn read(
        &mut self,
        max_bytes: usize,
        mut each: impl FnMut(u16, u32, u16, &[u8]),
        backlog: &mut Vec<u16>,
    ) -> usize {
        let mut most = 0;
        for ring in &mut self.rings {
            let mut bytes = 0usize;
            while let Some(record) = ring.sampler.next_record() {
                bytes += record.len() + 8;
                let body = record.to_contiguous();
                each(ring.cpu, record.ty(), record.misc(), &body);
                // Dropping `record` hands its space back to the kernel.
                if bytes >= max_bytes {
                    backlog.push(ring.cpu);
                    break;
                }
            }
            most = most.max(bytes);
        }
        most
    }

    /// Bytes of one CPU's ring.
    pub fn ring_bytes(&self) -> usize {
        self.ring_bytes
    }
}

/// Makes `counter` write its records into `target`'s ring.
fn set_output(counter: &Counter, target: &Sampler) -> io::Result<()> {
    // SAFETY: both descriptors are open perf events owned by the caller for the duration
    // of the call; SET_OUTPUT takes the target descriptor by value and touches no memory
    // of ours.
    let rc =
        unsafe { perf_event_open_sys::ioctls::SET_OUTPUT(counter.as_raw_fd(), target.as_raw_fd()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
