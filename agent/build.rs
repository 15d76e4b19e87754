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
//!   linker rustc uses on x86-64 Linux since Rust 1.90 (rust-lld) accepts a second, named
//!   one next to it. GNU ld refuses the pair: with an older rustc (or with
//!   `SONDA_UNVERSIONED_HOOKS=1` in the build's environment) the hooks are exported
//!   unversioned from Rust instead (cfg `sonda_unversioned_hooks`), which works for
//!   native programs but lets glibc's no-ops win inside a JVM; the build says so.

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
    let versioned = std::env::var_os("SONDA_UNVERSIONED_HOOKS").is_none()
        && rustc_minor().is_none_or(|minor| minor >= 90);
    if !versioned {
        build.define("SONDA_UNVERSIONED_HOOKS", None);
    }
    build.compile("sonda_hooks");

    println!("cargo::rustc-check-cfg=cfg(sonda_unversioned_hooks)");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libsonda.so");
    if versioned {
        let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
        let script = out.join("sonda.map");
        std::fs::write(&script, "SONDA_1 { };\n").expect("write the version script");
        println!(
            "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
            script.display()
        );
    } else {
        println!("cargo:rustc-cfg=sonda_unversioned_hooks");
        println!("cargo:warning=libsonda.so's -finstrument-functions hooks are unversioned (rustc before 1.90, or SONDA_UNVERSIONED_HOOKS): JNI libraries in a JVM will bind to glibc's no-op hooks");
    }
    println!("cargo:rerun-if-changed=src/hooks.c");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=SONDA_UNVERSIONED_HOOKS");
}

/// The minor version of the rustc that builds the crate (`rustc 1.95.0 (...)`).
fn rustc_minor() -> Option<u32> {
    let rustc = std::env::var_os("RUSTC")?;
    let out = std::process::Command::new(rustc)
        .arg("--version")
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    text.split_whitespace()
        .nth(1)?
        .split('.')
        .nth(1)?
        .parse()
        .ok()
}
