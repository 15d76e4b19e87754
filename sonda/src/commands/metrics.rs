//! `--metrics ADDR` of `sonda record` and `sonda attach`: the live metrics endpoint
//! (`sonda-metrics`, docs/metrics.md) fed by the recorder's tap.

use std::net::SocketAddr;

use anyhow::Context;
use sonda_metrics::{Endpoint, Running};
use sonda_recorder::Tap;

use crate::cli::RecordingArgs;

/// The address to serve on, checked (loopback unless `--metrics-public`): called
/// first, so that a refused address costs nothing.
pub fn address(rec: &RecordingArgs) -> anyhow::Result<Option<SocketAddr>> {
    rec.metrics
        .as_deref()
        .map(|text| sonda_metrics::parse_address(text, rec.metrics_public))
        .transpose()
        .map_err(anyhow::Error::from)
}

/// Binds the endpoint and starts its threads: the tap for the recorder, and the
/// threads' handle (dropping it stops them, after the recording).
pub fn start(addr: Option<SocketAddr>) -> anyhow::Result<Option<(Box<dyn Tap>, Running)>> {
    let Some(addr) = addr else { return Ok(None) };
    let endpoint =
        Endpoint::bind(addr).with_context(|| format!("--metrics {addr}: cannot listen there"))?;
    let bound = endpoint.local_addr().unwrap_or(addr);
    let (feed, running) = endpoint
        .start()
        .context("cannot start the metrics threads")?;
    say!("sonda: live metrics at http://{bound}/metrics");
    Ok(Some((Box::new(feed), running)))
}

/// Stops the endpoint once the recording ended, saying whether the metrics missed
/// part of what the trace has (they are then below `sonda services`' figures).
pub fn stop(running: Option<Running>) {
    if let Some(r) = running {
        let missed = r.missed();
        drop(r);
        if missed > 0 {
            say!("sonda: the live metrics missed {missed} of the recorded events (the metrics thread fell behind); the trace has them all");
        }
    }
}
