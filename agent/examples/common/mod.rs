//! What the benchmark examples share.

use std::path::{Path, PathBuf};

/// The agent library built with the examples (`target/<profile>/` or its `deps/`).
pub fn libsonda() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/examples/<exe>");
    [
        profile.join("libsonda.so"),
        profile.join("deps/libsonda.so"),
    ]
    .into_iter()
    .find(|p| p.exists())
    .expect("libsonda.so: run `cargo build --release -p sonda-agent --lib --examples` first")
}
