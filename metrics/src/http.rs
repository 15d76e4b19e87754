//! The HTTP endpoint: one thread, nonblocking sockets, one `poll(2)` loop.
//!
//! Why not a thread per connection (as `tiny_http` does): a client that connects and
//! sends nothing would hold a thread each; a loop holds only a small buffer per
//! connection, and every limit below is enforced in one place:
//!
//! - at most [`Limits::connections`] connections: a new one beyond closes the one idle
//!   the longest (one that never sent a whole request first), so a flood of idle
//!   connections cannot keep a scraper out, nor close its connection;
//! - a request (its head: request line and headers) must arrive within
//!   [`Limits::request_time`] of its first byte and hold at most
//!   [`Limits::request_bytes`]; a keep-alive connection idle for [`Limits::idle_time`]
//!   is closed;
//! - a response must be taken by the client within [`Limits::write_time`]; the server
//!   writes only what the socket takes and reads no further request meanwhile, so a
//!   client that never reads costs one page (shared, not copied) and its socket
//!   buffers, until the time is up.
//!
//! It answers `GET /metrics` (and `HEAD`) with the latest page, `GET /` with a short
//! help, 404 for other paths, 405 for other methods, 400 for what is not HTTP/1.x, 431
//! for an oversized head. HTTP/1.1 connections are kept alive (Prometheus reuses its
//! connection), pipelined requests answered in order.

use std::io::{self, Read};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::net::{send, SendFlags};

use crate::page::CONTENT_TYPE;
use crate::Latest;

/// The server's limits (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once.
    pub connections: usize,
    /// Bytes of a request head.
    pub request_bytes: usize,
    /// Time from a request's first byte to the end of its head.
    pub request_time: Duration,
    /// Time a connection may stay open without a request.
    pub idle_time: Duration,
    /// Time a response may take to be written.
    pub write_time: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            connections: 64,
            request_bytes: 8192,
            request_time: Duration::from_secs(5),
            idle_time: Duration::from_secs(30),
            write_time: Duration::from_secs(10),
        }
    }
}

/// How long one poll waits at most, so that the stop flag is seen.
const POLL: Duration = Duration::from_millis(100);
/// Connections accepted per loop turn at most, so that a flood of connects cannot
/// starve the connections already open.
const ACCEPTS_PER_TURN: usize = 64;

const HELP: &str = "sonda: live metrics of the recording in progress.\n\
GET /metrics: Prometheus text format 0.0.4 (per traced method: sonda_method_calls_total, \
sonda_method_cpu_seconds_total, sonda_method_wait_seconds_total, \
sonda_method_blocked_seconds_total; and sonda_events_total, sonda_events_dropped_total, \
sonda_collector_cpu_seconds_total, sonda_metrics_dropped_total).\n";

/// A response being written.
#[derive(Debug)]
struct Response {
    head: Vec<u8>,
    body: Arc<Vec<u8>>,
    /// Whether the body is sent (not for HEAD).
    with_body: bool,
    /// Bytes of head + body written.
    written: usize,
    close: bool,
}

impl Response {
    fn new(
        status: &str,
        content_type: &str,
        body: Arc<Vec<u8>>,
        with_body: bool,
        close: bool,
    ) -> Response {
        let head = format!(
            "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n{}\r\n",
            body.len(),
            if close { "Connection: close\r\n" } else { "" }
        )
        .into_bytes();
        Response {
            head,
            body,
            with_body,
            written: 0,
            close,
        }
    }

    fn len(&self) -> usize {
        self.head.len() + if self.with_body { self.body.len() } else { 0 }
    }

    /// The bytes still to write.
    fn rest(&self) -> &[u8] {
        if self.written < self.head.len() {
            &self.head[self.written..]
        } else {
            &self.body[self.written - self.head.len()..]
        }
    }
}

/// One connection.
#[derive(Debug)]
struct Conn {
    stream: TcpStream,
    /// What was read and not yet answered.
    input: Vec<u8>,
    response: Option<Response>,
    /// When the current phase ends the connection: idle, reading a head, writing.
    deadline: Instant,
    /// When it last finished something (accepted, answered): the eviction order.
    active: Instant,
    /// Whether it ever sent a whole request (being answered, or answered): a new
    /// connection beyond the limit closes one that did not (idle since its connect,
    /// or sending half a request) before one that did (a scraper being answered, or
    /// its kept-alive connection between two scrapes).
    served: bool,
    /// The client closed its side.
    eof: bool,
}

/// What became of a connection after it was served.
#[derive(Debug, PartialEq, Eq)]
enum Fate {
    Open,
    Close,
}

/// A request head, parsed.
#[derive(Debug, PartialEq, Eq)]
struct Request<'a> {
    method: &'a str,
    path: &'a str,
    /// Whether the connection may serve another request afterwards.
    keep_alive: bool,
    /// Whether it announces a body (not supported: answered, then closed).
    has_body: bool,
}

/// The end of the head in `buf` (the index after the blank line), if complete.
fn head_end(buf: &[u8]) -> Option<usize> {
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Parses a request head; `None` when it is not HTTP/1.x.
fn parse(head: &[u8]) -> Option<Request<'_>> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let mut parts = lines.next()?.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || method.is_empty() || !target.starts_with('/') {
        return None;
    }
    let mut keep_alive = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        _ => return None,
    };
    let mut has_body = false;
    for line in lines.filter(|l| !l.is_empty()) {
        let (name, value) = line.split_once(':')?;
        let value = value.trim();
        if name.eq_ignore_ascii_case("connection") {
            if value.eq_ignore_ascii_case("close") {
                keep_alive = false;
            } else if value.eq_ignore_ascii_case("keep-alive") {
                keep_alive = true;
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding")
            || (name.eq_ignore_ascii_case("content-length") && value != "0")
        {
            has_body = true;
        }
    }
    let path = target.split(['?', '#']).next().unwrap_or(target);
    Some(Request {
        method,
        path,
        keep_alive,
        has_body,
    })
}

/// The answer to one request head (`None`: not HTTP, a 400).
fn answer(request: Option<&Request<'_>>, latest: &Latest) -> Response {
    let text = |s: &str| Arc::new(s.as_bytes().to_vec());
    let Some(r) = request else {
        return Response::new(
            "400 Bad Request",
            "text/plain",
            text("bad request\n"),
            true,
            true,
        );
    };
    let close = !r.keep_alive || r.has_body;
    let head_only = r.method == "HEAD";
    if r.method != "GET" && !head_only {
        return Response::new(
            "405 Method Not Allowed",
            "text/plain",
            text("only GET and HEAD\n"),
            true,
            true,
        );
    }
    match r.path {
        "/metrics" => Response::new("200 OK", CONTENT_TYPE, latest.get(), !head_only, close),
        "/" => Response::new(
            "200 OK",
            "text/plain; charset=utf-8",
            text(HELP),
            !head_only,
            close,
        ),
        _ => Response::new(
            "404 Not Found",
            "text/plain",
            text("not found: try /metrics\n"),
            !head_only,
            close,
        ),
    }
}

impl Conn {
    fn new(stream: TcpStream, now: Instant, limits: &Limits) -> Conn {
        Conn {
            stream,
            input: Vec::new(),
            response: None,
            deadline: now + limits.idle_time,
            active: now,
            served: false,
            eof: false,
        }
    }

    fn wants(&self) -> PollFlags {
        if self.response.is_some() {
            PollFlags::OUT
        } else {
            PollFlags::IN
        }
    }

    /// Reads what arrived (while no response is pending), answers complete requests and
    /// writes what the socket takes.
    fn serve(&mut self, now: Instant, latest: &Latest, limits: &Limits) -> Fate {
        loop {
            if self.response.is_some() {
                match self.write(now, limits) {
                    Ok(true) => continue,
                    Ok(false) => return Fate::Open,
                    Err(_) => return Fate::Close,
                }
            }
            // No response pending: a complete request in the input is answered first.
            let complete = head_end(&self.input);
            if let Some(end) = complete.filter(|&end| end <= limits.request_bytes) {
                let response = answer(parse(&self.input[..end]).as_ref(), latest);
                self.input.drain(..end);
                self.deadline = now + limits.write_time;
                self.response = Some(response);
                self.served = true;
                continue;
            }
            if complete.is_some() || self.input.len() > limits.request_bytes {
                let body = Arc::new(b"request head too large\n".to_vec());
                self.response = Some(Response::new(
                    "431 Request Header Fields Too Large",
                    "text/plain",
                    body,
                    true,
                    true,
                ));
                self.input.clear();
                self.deadline = now + limits.write_time;
                continue;
            }
            if self.eof {
                return Fate::Close;
            }
            match self.read(now, limits) {
                Ok(true) => continue,
                Ok(false) => return Fate::Open,
                Err(_) => return Fate::Close,
            }
        }
    }

    /// Reads once; `Ok(true)` when something came (or the end), `Ok(false)` when the
    /// socket has nothing now.
    fn read(&mut self, now: Instant, limits: &Limits) -> io::Result<bool> {
        let mut buf = [0u8; 4096];
        match self.stream.read(&mut buf) {
            Ok(0) => {
                self.eof = true;
                Ok(true)
            }
            Ok(n) => {
                if self.input.is_empty() {
                    // The first byte of a request: it has this long to complete.
                    self.deadline = now + limits.request_time;
                }
                self.input.extend_from_slice(&buf[..n]);
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(true),
            Err(e) => Err(e),
        }
    }

    /// Writes once; `Ok(true)` when it made progress (bytes went out, or the response
    /// is done and the connection stays: the caller goes on), `Ok(false)` when the
    /// socket takes no more now. An error closes it, as does the end of a response
    /// that closes.
    fn write(&mut self, now: Instant, limits: &Limits) -> io::Result<bool> {
        let Some(r) = &mut self.response else {
            return Ok(true);
        };
        // MSG_NOSIGNAL: a client gone must not raise SIGPIPE in the recording.
        match send(self.stream.as_fd(), r.rest(), SendFlags::NOSIGNAL) {
            Ok(n) => r.written += n,
            Err(rustix::io::Errno::AGAIN) => return Ok(false),
            Err(rustix::io::Errno::INTR) => return Ok(true),
            Err(e) => return Err(e.into()),
        }
        if r.written < r.len() {
            return Ok(true);
        }
        if r.close {
            let _ = self.stream.shutdown(std::net::Shutdown::Write);
            return Err(io::Error::other("closed after the response"));
        }
        self.response = None;
        self.active = now;
        self.deadline = if self.input.is_empty() {
            now + limits.idle_time
        } else {
            now + limits.request_time
        };
        Ok(true)
    }
}

/// The server loop: until `stop`.
pub(crate) fn serve(listener: TcpListener, latest: &Latest, stop: &AtomicBool, limits: Limits) {
    let mut conns: Vec<Conn> = Vec::new();
    let mut ready: Vec<bool> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        let wait = conns
            .iter()
            .map(|c| c.deadline.saturating_duration_since(now))
            .min()
            .unwrap_or(POLL)
            .min(POLL);
        let listener_ready = {
            let mut fds = Vec::with_capacity(conns.len() + 1);
            fds.push(PollFd::new(&listener, PollFlags::IN));
            for c in &conns {
                fds.push(PollFd::new(&c.stream, c.wants()));
            }
            let timeout = Timespec {
                tv_sec: 0,
                tv_nsec: wait.as_nanos().min(999_999_999) as _,
            };
            match poll(&mut fds, Some(&timeout)) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => {
                    // Should not happen (EINVAL, ENOMEM): do not spin.
                    std::thread::sleep(POLL);
                    continue;
                }
            }
            ready.clear();
            ready.extend(fds[1..].iter().map(|f| !f.revents().is_empty()));
            !fds[0].revents().is_empty()
        };
        let now = Instant::now();
        // Serve the connections that are ready; close those past their deadline.
        let mut k = 0;
        conns.retain_mut(|c| {
            let is_ready = ready.get(k).copied().unwrap_or(false);
            k += 1;
            let keep = if is_ready {
                c.serve(now, latest, &limits) == Fate::Open
            } else {
                true
            };
            keep && now < c.deadline
        });
        if listener_ready {
            accept(&listener, &mut conns, now, latest, &limits);
        }
    }
}

/// Accepts what is waiting, evicting the connection idle the longest when full.
fn accept(
    listener: &TcpListener,
    conns: &mut Vec<Conn>,
    now: Instant,
    latest: &Latest,
    limits: &Limits,
) {
    for _ in 0..ACCEPTS_PER_TURN {
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // Out of descriptors, a connection reset before it was taken: try later.
            Err(_) => return,
        };
        if stream.set_nonblocking(true).is_err() {
            continue;
        }
        let _ = stream.set_nodelay(true);
        if conns.len() >= limits.connections.max(1) {
            if let Some(oldest) = conns
                .iter()
                .enumerate()
                .min_by_key(|(_, c)| (c.served, c.active))
                .map(|(i, _)| i)
            {
                conns.swap_remove(oldest);
            }
        }
        let mut c = Conn::new(stream, now, limits);
        // A request often comes with the connection: answer it now.
        if c.serve(now, latest, limits) == Fate::Open {
            conns.push(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::SocketAddr;

    #[test]
    fn parses_heads() {
        let r = parse(b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
        assert_eq!(r.path, "/metrics");
        assert!(r.keep_alive);
        let r = parse(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n").unwrap();
        assert!(!r.keep_alive);
        let r = parse(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        assert!(!r.keep_alive);
        let r = parse(b"POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\n").unwrap();
        assert!(r.has_body);
        for bad in [
            &b"GET\r\n\r\n"[..],
            b"GET x HTTP/1.1\r\n\r\n",
            b"GET / HTTP/2\r\n\r\n",
            b"\xff\r\n\r\n",
        ] {
            assert!(parse(bad).is_none(), "{bad:?}");
        }
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nrest"), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.1\n\n"), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n"), None);
    }

    fn server(
        limits: Limits,
    ) -> (
        SocketAddr,
        Arc<Latest>,
        Arc<AtomicBool>,
        std::thread::JoinHandle<()>,
    ) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let latest = Arc::new(Latest::default());
        latest.set(b"x 1\n".to_vec());
        let stop = Arc::new(AtomicBool::new(false));
        let (l, s) = (Arc::clone(&latest), Arc::clone(&stop));
        let t = std::thread::spawn(move || serve(listener, &l, &s, limits));
        (addr, latest, stop, t)
    }

    fn get(addr: SocketAddr, request: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    #[test]
    fn answers_and_limits() {
        let limits = Limits {
            connections: 4,
            request_bytes: 100,
            request_time: Duration::from_millis(300),
            idle_time: Duration::from_millis(300),
            write_time: Duration::from_millis(300),
        };
        let (addr, latest, stop, t) = server(limits);
        let ok = get(addr, "GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains(CONTENT_TYPE));
        assert!(ok.ends_with("\r\n\r\nx 1\n"), "{ok}");
        latest.set(b"x 2\n".to_vec());
        assert!(get(addr, "GET /metrics HTTP/1.0\r\n\r\n").ends_with("x 2\n"));
        assert!(get(addr, "GET /nope HTTP/1.0\r\n\r\n").starts_with("HTTP/1.1 404"));
        assert!(get(addr, "DELETE / HTTP/1.0\r\n\r\n").starts_with("HTTP/1.1 405"));
        assert!(get(addr, "hello\r\n\r\n").starts_with("HTTP/1.1 400"));
        let big = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(200));
        assert!(get(addr, &big).starts_with("HTTP/1.1 431"));
        let head = get(addr, "HEAD /metrics HTTP/1.0\r\n\r\n");
        assert!(head.ends_with("\r\n\r\n"), "{head}");
        // Pipelined keep-alive requests, answered in order; then closed when idle.
        let two = get(addr, "GET / HTTP/1.1\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n");
        assert_eq!(two.matches("HTTP/1.1 200 OK").count(), 2, "{two}");
        // Idle and half-sent connections fill the table; a new client still gets in,
        // and the idle ones are closed in time.
        let mut idle: Vec<TcpStream> = (0..10).map(|_| TcpStream::connect(addr).unwrap()).collect();
        for s in idle.iter_mut().step_by(2) {
            s.write_all(b"GET /met").unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
        assert!(get(addr, "GET /metrics HTTP/1.0\r\n\r\n").ends_with("x 2\n"));
        std::thread::sleep(Duration::from_millis(600));
        for s in &mut idle {
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let mut b = [0u8; 16];
            // Closed by the server: end of stream (or a reset of an evicted one).
            assert!(matches!(s.read(&mut b), Ok(0) | Err(_)));
        }
        stop.store(true, Ordering::Relaxed);
        t.join().unwrap();
    }

    #[test]
    fn a_flood_of_idle_connections_leaves_a_kept_alive_scraper_alone() {
        let limits = Limits {
            connections: 4,
            ..Limits::default()
        };
        let (addr, _latest, stop, t) = server(limits);
        let mut scraper = TcpStream::connect(addr).unwrap();
        scraper
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let scrape = |s: &mut TcpStream| {
            s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
            let mut got = Vec::new();
            let mut b = [0u8; 256];
            while !got.ends_with(b"x 1\n") {
                let n = s.read(&mut b).unwrap();
                assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
                got.extend_from_slice(&b[..n]);
            }
        };
        scrape(&mut scraper);
        let _idle: Vec<TcpStream> = (0..10).map(|_| TcpStream::connect(addr).unwrap()).collect();
        std::thread::sleep(Duration::from_millis(100));
        scrape(&mut scraper);
        stop.store(true, Ordering::Relaxed);
        t.join().unwrap();
    }

    #[test]
    fn a_client_that_never_reads_is_dropped_in_time() {
        let limits = Limits {
            write_time: Duration::from_millis(300),
            ..Limits::default()
        };
        let (addr, latest, stop, t) = server(limits);
        latest.set(vec![b'#'; 16 << 20]);
        let mut hog = TcpStream::connect(addr).unwrap();
        hog.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        // Others are answered meanwhile (with the big page: read it all).
        let started = Instant::now();
        let ok = get(addr, "GET /metrics HTTP/1.0\r\n\r\n");
        assert!(ok.len() > 16 << 20, "{}", ok.len());
        assert!(started.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(500));
        // The hog was closed: what it can read ends before the whole page.
        hog.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut got = Vec::new();
        let _ = hog.read_to_end(&mut got);
        assert!(got.len() < 16 << 20, "{}", got.len());
        stop.store(true, Ordering::Relaxed);
        t.join().unwrap();
    }
}
