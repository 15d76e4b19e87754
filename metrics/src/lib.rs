//! Live metrics of a recording in progress, for Prometheus (`sonda record --metrics
//! ADDR`, docs/metrics.md).
//!
//! Three parts, each on its own thread, so that nothing a scraper does can slow the
//! recording down:
//!
//! ```text
//!  recording thread ── Feed (copies, bounded queue: drops when full) ──▶ metrics thread
//!     (sonda-recorder's tap)                                   live::Live: Timeline + CallJoin
//!                                                              page::render, at most 5×/s
//!                                                                    │ latest page (Arc)
//!  scrapers ◀── HTTP/1.1, nonblocking sockets, one poll loop ── http thread
//! ```
//!
//! - [`Feed`] is what the recorder's tap calls: it batches the released records and
//!   the metadata and hands each batch to the metrics thread with `try_send` on a
//!   bounded channel; a batch that does not fit is dropped and counted
//!   (`sonda_metrics_dropped_total`), never waited for.
//! - [`live::Live`] joins the records exactly as `sonda services` does (the same
//!   `sonda_timeline::Timeline` and `sonda_model::join::CallJoin`, fed in the same order,
//!   learning threads from `Meta::Thread` as they come), so the live counters converge
//!   on the figures of the finished trace.
//! - the HTTP server ([`Endpoint`]) serves the latest rendered page; it has limits on
//!   connections, request size and time, so that idle, slow or hostile clients cost a
//!   bounded amount and cannot keep others from being answered.
#![forbid(unsafe_code)]

mod address;
mod feed;
mod http;
pub mod live;
pub mod page;

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

pub use address::{parse_address, AddressError};
pub use feed::Feed;
pub use http::Limits;

/// The latest page, shared by the metrics thread (writer) and the HTTP thread (reader).
#[derive(Debug, Default)]
pub(crate) struct Latest(Mutex<Arc<Vec<u8>>>);

impl Latest {
    fn set(&self, page: Vec<u8>) {
        let page = Arc::new(page);
        match self.0.lock() {
            Ok(mut g) => *g = page,
            Err(poisoned) => *poisoned.into_inner() = page,
        }
    }

    fn get(&self) -> Arc<Vec<u8>> {
        match self.0.lock() {
            Ok(g) => Arc::clone(&g),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }
}

/// The endpoint, bound but not serving yet: binding comes first, so that an address
/// in use fails before anything is recorded.
#[derive(Debug)]
pub struct Endpoint {
    listener: TcpListener,
    limits: Limits,
}

impl Endpoint {
    /// Binds `addr` (checked with [`parse_address`] first).
    pub fn bind(addr: SocketAddr) -> io::Result<Endpoint> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        Ok(Endpoint {
            listener,
            limits: Limits::default(),
        })
    }

    /// Replaces the server's limits (tests use small ones).
    pub fn with_limits(mut self, limits: Limits) -> Endpoint {
        self.limits = limits;
        self
    }

    /// The address it is bound to (the port the system chose for port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Starts the metrics and HTTP threads; returns the feed for the recording and the
    /// handle that stops both threads when dropped.
    pub fn start(self) -> io::Result<(Feed, Running)> {
        let latest = Arc::new(Latest::default());
        // The first page is there before any client can ask (all counters at 0).
        latest.set(page::render(&live::Live::new(), 0));
        let stop = Arc::new(AtomicBool::new(false));
        let (feed, batches, dropped) = feed::channel();
        let missed = Arc::clone(&dropped);
        let live = {
            let latest = Arc::clone(&latest);
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("sonda-metrics".into())
                .spawn(move || live::run(&batches, &dropped, &latest, &stop))?
        };
        let server = {
            let latest = Arc::clone(&latest);
            let stop = Arc::clone(&stop);
            let limits = self.limits;
            let listener = self.listener;
            std::thread::Builder::new()
                .name("sonda-http".into())
                .spawn(move || http::serve(listener, &latest, &stop, limits))?
        };
        Ok((
            feed,
            Running {
                stop,
                missed,
                threads: vec![live, server],
            },
        ))
    }
}

/// The running threads; dropping it stops both (within their poll period of a tenth
/// of a second) and waits for them.
#[derive(Debug)]
pub struct Running {
    stop: Arc<AtomicBool>,
    /// Timed records the metrics missed (the feed's drops).
    missed: Arc<std::sync::atomic::AtomicU64>,
    threads: Vec<JoinHandle<()>>,
}

impl Running {
    /// Timed records the metrics missed because the metrics thread fell behind
    /// (`sonda_metrics_dropped_total`): for the recording's summary.
    pub fn missed(&self) -> u64 {
        self.missed.load(Ordering::Relaxed)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sonda_trace::{Event, Meta, Pid, Record, Tid, Time};
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};

    fn get(addr: SocketAddr) -> String {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    /// What the feed gets shows on the page within a fraction of a second, and the
    /// threads stop when the handle drops.
    #[test]
    fn the_page_follows_the_feed() {
        let endpoint = Endpoint::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = endpoint.local_addr().unwrap();
        let (mut feed, running) = endpoint.start().unwrap();
        assert!(get(addr).contains("sonda_events_total 0\n"));
        feed.meta(&crate::live::tests::trace_info());
        feed.meta(&Meta::Method {
            id: 3,
            class: "x.Y".into(),
            name: "z".into(),
            descriptor: "()V".into(),
        });
        feed.meta(&Meta::Thread {
            pid: Pid(5),
            tid: Tid(6),
            comm: "c".into(),
        });
        let tid = Tid(6);
        for i in 0..10 {
            feed.record(&Record {
                time: Time(100 + i * 10),
                event: Event::Enter { tid, method: 3 },
            });
            feed.record(&Record {
                time: Time(105 + i * 10),
                event: Event::Leave {
                    tid,
                    method: 3,
                    exception: false,
                },
            });
        }
        feed.cycle(sonda_recorder::LiveStats {
            events: 20,
            dropped: 1,
            collector_cpu_ns: 1_500_000_000,
        });
        let started = Instant::now();
        let page = loop {
            let page = get(addr);
            if page.contains("sonda_events_total 20\n")
                || started.elapsed() > Duration::from_secs(5)
            {
                break page;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(started.elapsed() < Duration::from_secs(1), "{page}");
        assert!(
            page.contains("sonda_method_calls_total{method=\"x.Y::z\",class=\"x.Y\"} 10\n"),
            "{page}"
        );
        assert!(page.contains("sonda_events_dropped_total 1\n"), "{page}");
        assert!(
            page.contains("sonda_collector_cpu_seconds_total 1.5\n"),
            "{page}"
        );
        drop(feed);
        let stopping = Instant::now();
        drop(running);
        assert!(stopping.elapsed() < Duration::from_secs(1));
        assert!(std::net::TcpStream::connect(addr).is_err());
    }
}
