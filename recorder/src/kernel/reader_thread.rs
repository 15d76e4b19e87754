//! A thread of its own for reading the kernel rings.
//!
//! Under a heavy scheduling load (200k switches/s) the rings fill at tens of MB/s per
//! CPU while the recorder's cycle also sorts, filters and writes. Reading is cheap
//! (about 100 ns a record) but must not wait for the rest: this thread only empties the
//! rings every few milliseconds into batches that the recorder takes when it is ready,
//! so a slow cycle costs memory for a while instead of lost events.
//!
//! The thread asks for a higher priority ([`NICE`]) when it is allowed to: on a machine
//! whose CPUs are all busy, a reader with an equal share of a CPU falls behind a
//! producer at 500k switches/s and the kernel buffers overflow (measured with
//! `perf bench sched pipe` next to ten busy processes: millions of events lost at nice
//! 0, none at nice −10). It sleeps whenever the buffers are empty, so the CPU it takes
//! is what the event rate needs.
//!
//! How long it sleeps follows the busiest CPU's rate ([`Pacing`]): up to 40 ms while a
//! buffer fills slowly, shorter as it fills faster, so that no buffer gets past an
//! eighth full between two reads at the rate just seen, nor past half full if the rate
//! jumps to [`BURST_RATE`] during a pause (a program starting its work after a quiet
//! spell: with 256 KiB buffers a fixed 40 ms pause lost thousands of events at the
//! start of `perf bench sched pipe`). Each read has a fixed cost per CPU and instance
//! (two system calls, and a partly filled ftrace page is copied out event by event with
//! interrupts off, where a full one is swapped): under Tomcat, reading every 5 ms
//! whatever the rate took a quarter more collector CPU than this pacing
//! (docs/overhead.md).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use sonda_trace::Record;

use super::{Drained, KernelSource, KernelStats};

/// Longest pause between two reads, with buffers large enough. The recorder holds
/// records for `--lag` (200 ms by default) before writing them, far longer than this.
const LONGEST: Duration = Duration::from_millis(40);
/// The fastest one CPU's buffer is taken to fill, bytes a second: `perf bench sched
/// pipe` on one CPU writes about 40 MB/s of scheduler events (760k a second).
const BURST_RATE: f64 = 64e6;
/// Shortest pause between two reads that emptied every buffer.
const SHORTEST: Duration = Duration::from_millis(2);
/// The share of a CPU's buffer that may fill between two reads at the current rate:
/// the rest absorbs a burst, or the reader's being late on a saturated machine.
const FILL_TARGET: f64 = 0.125;
/// The reader's nice value, when permitted (root or CAP_SYS_NICE).
const NICE: i32 = -10;

/// The running reader.
///
/// Batches go to the recorder on one channel and their buffers come back, emptied, on
/// another: a steady recording reuses a few buffers instead of growing a new vector
/// from nothing every period (in a profile of `perf bench sched pipe`, the page faults
/// of fresh buffers and their reallocations' copies were a tenth of the collector's
/// CPU).
pub struct KernelReader {
    stop: Arc<AtomicBool>,
    batches: Receiver<Vec<Record>>,
    spares: Sender<Vec<Record>>,
    thread: Option<JoinHandle<KernelStats>>,
}

impl KernelReader {
    /// Starts reading `source` (already enabled) on a new thread.
    pub fn start(mut source: KernelSource) -> std::io::Result<KernelReader> {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, batches) = mpsc::channel();
        let (spares, returned) = mpsc::channel::<Vec<Record>>();
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("sonda-kernel".into())
                .spawn(move || {
                    raise_priority();
                    // Kept while empty: an idle period does not use up a spare.
                    let mut batch = Vec::new();
                    let pacing = Pacing::new(source.buffer_bytes());
                    let mut previous = Instant::now();
                    loop {
                        let last = stop.load(Ordering::Acquire);
                        if last {
                            // Stop the events, then take what they left.
                            let _ = source.disable();
                        }
                        let started = Instant::now();
                        let drained = source.read(&mut batch);
                        let mut more = drained.more;
                        while last && more {
                            more = source.read(&mut batch).more;
                        }
                        if !batch.is_empty() {
                            let spare = returned.try_recv().unwrap_or_default();
                            if tx.send(std::mem::replace(&mut batch, spare)).is_err() {
                                break; // the recorder is gone
                            }
                        }
                        if last {
                            break;
                        }
                        // A buffer left with records is read again at once.
                        if !more {
                            std::thread::sleep(pacing.pause(started - previous, drained));
                        }
                        previous = started;
                    }
                    source.stats()
                })?
        };
        Ok(KernelReader {
            stop,
            batches,
            spares,
            thread: Some(thread),
        })
    }

    /// Hands every batch read so far to `each`, which takes its records (or swaps
    /// its buffer for an empty one); what is left in it is cleared and the buffer goes
    /// back to the reader.
    pub fn take(&self, mut each: impl FnMut(&mut Vec<Record>)) {
        for mut batch in self.batches.try_iter() {
            each(&mut batch);
            batch.clear();
            if batch.capacity() > 0 {
                // The reader has stopped when this fails; the buffer is freed.
                let _ = self.spares.send(batch);
            }
        }
    }

    /// Stops the events, appends everything left to `out`, and returns the tally.
    pub fn finish(&mut self, out: &mut Vec<Record>) -> KernelStats {
        self.stop.store(true, Ordering::Release);
        let stats = self
            .thread
            .take()
            .map(|t| t.join().unwrap_or_default())
            .unwrap_or_default();
        self.take(|batch| out.append(batch));
        stats
    }
}

/// How long the reader sleeps between reads that emptied the buffers.
struct Pacing {
    /// The longest pause for the buffers' size: half of a buffer at [`BURST_RATE`],
    /// within [`SHORTEST`]..=[`LONGEST`].
    longest: Duration,
}

impl Pacing {
    fn new(buffer_bytes: usize) -> Pacing {
        let half_at_burst = Duration::from_secs_f64(buffer_bytes as f64 / 2.0 / BURST_RATE);
        Pacing {
            longest: half_at_burst.clamp(SHORTEST, LONGEST),
        }
    }

    /// The pause after a read that emptied the buffers, `since` the read before it
    /// started: long enough for the busiest CPU to fill [`FILL_TARGET`] of its buffer
    /// at the rate it just had, within [`SHORTEST`]..=`longest`.
    fn pause(&self, since: Duration, drained: Drained) -> Duration {
        if drained.busiest <= 0.0 {
            return self.longest;
        }
        let wanted = since.as_secs_f64() * FILL_TARGET / drained.busiest;
        Duration::from_secs_f64(wanted.min(self.longest.as_secs_f64())).max(SHORTEST)
    }
}

/// Sets the calling thread's nice value to [`NICE`]; without permission it keeps its
/// own.
fn raise_priority() {
    let _ = crate::sys::set_thread_nice(NICE);
}

impl Drop for KernelReader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drained(busiest: f64) -> Drained {
        Drained {
            more: false,
            busiest,
        }
    }

    const MIB: usize = 1 << 20;

    #[test]
    fn an_idle_or_slow_buffer_is_read_at_the_longest_pause() {
        let p = Pacing::new(16 * MIB);
        assert_eq!(p.pause(LONGEST, drained(0.0)), LONGEST);
        // 1% of a buffer in 40 ms: an eighth would take 500 ms.
        assert_eq!(p.pause(LONGEST, drained(0.01)), LONGEST);
    }

    #[test]
    fn a_fast_buffer_is_read_before_an_eighth_of_it_fills() {
        let p = Pacing::new(16 * MIB);
        // A quarter of a buffer in 40 ms: an eighth fills in 20 ms.
        let d = p.pause(LONGEST, drained(0.25));
        assert!(
            d.abs_diff(Duration::from_millis(20)) < Duration::from_micros(10),
            "{d:?}"
        );
        // A full buffer in 5 ms (it overflowed): read again as soon as allowed.
        assert_eq!(p.pause(Duration::from_millis(5), drained(1.0)), SHORTEST);
    }

    #[test]
    fn small_buffers_are_read_before_a_burst_could_fill_half_of_them() {
        // Half of 1 MiB at 64 MB/s: 8.2 ms, even while idle.
        let d = Pacing::new(MIB).pause(LONGEST, drained(0.0));
        assert!(
            d.abs_diff(Duration::from_micros(8192)) < Duration::from_micros(10),
            "{d:?}"
        );
        // Half of 128 KiB lasts 1 ms at that rate: never less than the shortest.
        assert_eq!(Pacing::new(MIB / 8).pause(LONGEST, drained(0.0)), SHORTEST);
        assert_eq!(Pacing::new(4096).pause(LONGEST, drained(0.0)), SHORTEST);
    }
}
