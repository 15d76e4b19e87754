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
pub use feed::{Counters, Feed};
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
        let stop = Arc::new(AtomicBool::new(false));
        let (feed, batches, dropped) = feed::channel();
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
    threads: Vec<JoinHandle<()>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
