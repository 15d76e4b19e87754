//! Builds the C hot path (`src/hooks.c`) with the buffer layout of sonda-shm, and links
//! `libsonda.so` with its SONAME and the version node of its function hooks.
//!
//! - SONAME `libsonda.so`: a JNI library linked with `-lsonda` names `libsonda.so` in its
//!   `DT_NEEDED`; the loader matches that against the SONAME of objects already loaded,
//!   so it binds to the copy the JVM loaded as its agent (`-agentpath:/abs/...`) instead
//!   of loading a second copy with buffers of its own.
//! - Version node `SONDA_1`: `hooks.c` exports `__cyg_profile_func_enter/exit` as
//!   `@@SONDA_1` (glibc has unversioned-looking no-ops of the same names; see the C
//!   file). The node must exist in a version script for the linker to accept them.
//!   rustc passes its own (anonymous) version script for the exported Rust symbols; the
//!   linker rustc uses on Linux (rust-lld) accepts a second, named one next to it.

use std::path::PathBuf;

use sonda_shm::layout::{slot, UNIT};
use sonda_shm::records;

fn main() {
    let define = |b: &mut cc::Build, name: &str, value: usize| {
        b.define(name, Some(value.to_string().as_str()));
    };
    let mut build = cc::Build::new();
    build.file("src/hooks.c").opt_level(2).warnings(true);
    define(&mut build, "SONDA_SLOT_WRITE", slot::WRITE);
    define(&mut build, "SONDA_SLOT_READ", slot::READ);
    define(&mut build, "SONDA_SLOT_DROPPED", slot::DROPPED);
    define(
        &mut build,
        "SONDA_SLOT_DROPPED_ENTERS",
        slot::DROPPED_ENTERS,
    );
    define(&mut build, "SONDA_UNIT", UNIT);
    define(&mut build, "SONDA_ENTER", usize::from(records::ENTER));
    define(
        &mut build,
        "SONDA_FUNC_ENTER",
        usize::from(records::FUNC_ENTER),
    );
    define(
        &mut build,
        "SONDA_FUNC_LEAVE",
        usize::from(records::FUNC_LEAVE),
    );
    build.compile("sonda_hooks");

    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let script = out.join("sonda.map");
    std::fs::write(&script, "SONDA_1 { };\n").expect("write the version script");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libsonda.so");
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        script.display()
    );
    println!("cargo:rerun-if-changed=src/hooks.c");
    println!("cargo:rerun-if-changed=build.rs");
}
