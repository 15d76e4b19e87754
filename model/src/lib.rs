//! sonda's service-demand model (work in progress).
#![forbid(unsafe_code)]
