//! Where the endpoint listens: loopback unless the user says otherwise.
//!
//! The page names the traced program's classes and methods and how busy they are:
//! reachable from the network, anyone who can connect learns that. So an address that
//! is not loopback is refused unless the user asks for it explicitly
//! (`--metrics-public`), with an error that says how.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// Why an address was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AddressError {
    /// Not `PORT`, `HOST:PORT` with an IP address or `localhost`, or `[IPv6]:PORT`.
    Syntax(String),
    /// Not a loopback address, and public addresses were not asked for.
    NotLoopback(SocketAddr),
}

impl fmt::Display for AddressError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AddressError::Syntax(text) => write!(
                f,
                "--metrics {text:?}: not an address to listen on (PORT, IP:PORT, localhost:PORT or [IPv6]:PORT)"
            ),
            AddressError::NotLoopback(addr) => write!(
                f,
                "--metrics {addr}: not a loopback address; the metrics name the traced methods, so serving them beyond this machine needs --metrics-public"
            ),
        }
    }
}

impl std::error::Error for AddressError {}

/// Parses `--metrics ADDR`: `PORT` alone is `127.0.0.1:PORT`, `localhost:PORT` too;
/// otherwise an IP address and port. A non-loopback address is refused unless
/// `public` (`--metrics-public`).
pub fn parse_address(text: &str, public: bool) -> Result<SocketAddr, AddressError> {
    let t = text.trim();
    let syntax = || AddressError::Syntax(text.to_string());
    let addr = if let Ok(port) = t.parse::<u16>() {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)
    } else if let Some(port) = t.strip_prefix("localhost:") {
        SocketAddr::new(
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            port.parse().map_err(|_| syntax())?,
        )
    } else {
        t.parse::<SocketAddr>().map_err(|_| syntax())?
    };
    if !public && !addr.ip().to_canonical().is_loopback() {
        return Err(AddressError::NotLoopback(addr));
    }
    Ok(addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_by_default() {
        assert_eq!(
            parse_address("9464", false),
            Ok("127.0.0.1:9464".parse().unwrap())
        );
        assert_eq!(
            parse_address("localhost:0", false),
            Ok("127.0.0.1:0".parse().unwrap())
        );
        assert!(parse_address("127.0.0.2:1", false).is_ok());
        assert!(parse_address("[::1]:1", false).is_ok());
        assert!(parse_address("[::ffff:127.0.0.1]:1", false).is_ok());
    }

    #[test]
    fn public_only_when_asked() {
        for a in [
            "0.0.0.0:9464",
            "[::]:9464",
            "192.168.1.2:80",
            "[::ffff:10.0.0.1]:1",
        ] {
            let e = parse_address(a, false).unwrap_err();
            assert!(matches!(e, AddressError::NotLoopback(_)), "{a}");
            assert!(e.to_string().contains("--metrics-public"));
            assert!(parse_address(a, true).is_ok(), "{a}");
        }
    }

    #[test]
    fn bad_syntax() {
        for a in ["", "x", "99999", "host:80", "1.2.3.4", "localhost:x"] {
            assert!(
                matches!(parse_address(a, true), Err(AddressError::Syntax(_))),
                "{a}"
            );
        }
    }
}
