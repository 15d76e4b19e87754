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

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use sonda_trace::Record;

use super::{KernelSource, KernelStats};

/// How often the rings are emptied.
const PERIOD: Duration = Duration::from_millis(5);
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
                    loop {
                        let last = stop.load(Ordering::Acquire);
                        if last {
                            // Stop the events, then take what they left.
                            let _ = source.disable();
                        }
                        let mut more = source.read(&mut batch);
                        while last && more {
                            more = source.read(&mut batch);
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
                            std::thread::sleep(PERIOD);
                        }
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
