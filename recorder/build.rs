//! Compiles the BPF scheduler programs (`src/kernel/bpf/sched.bpf.c`) with clang into an
//! object the recorder embeds, when clang is there. Without it the recorder is built
//! without its BPF source (`cfg(sonda_bpf)` unset) and reads the scheduler tracepoints
//! through ftrace, as before; `SONDA_REQUIRE_BPF=1` makes a missing clang an error
//! instead (the test command sets it, so that CI never runs without the BPF source).
//!
//! The headers come from libbpf-sys (`DEP_BPF_INCLUDE`), the libbpf the recorder links:
//! nothing of the build machine's kernel is needed (the object is relocated against the
//! running kernel's BTF when it is loaded).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(sonda_bpf)");
    let source = "src/kernel/bpf/sched.bpf.c";
    println!("cargo::rerun-if-changed={source}");
    println!("cargo::rerun-if-env-changed=SONDA_REQUIRE_BPF");
    println!("cargo::rerun-if-env-changed=CLANG");
    let required = std::env::var_os("SONDA_REQUIRE_BPF").is_some_and(|v| v == "1");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let object = out.join("sched.bpf.o");
    let clang = std::env::var_os("CLANG").unwrap_or_else(|| "clang".into());
    let include = std::env::var_os("DEP_BPF_INCLUDE").expect("libbpf-sys exports its headers");
    let status = Command::new(&clang)
        .args(["-O2", "-g", "-target", "bpf", "-Wall", "-Werror", "-I"])
        .arg(&include)
        .args(["-c", source, "-o"])
        .arg(&object)
        .status();
    match status {
        Ok(s) if s.success() => println!("cargo::rustc-cfg=sonda_bpf"),
        failed => {
            let why = match failed {
                Ok(s) => format!("clang failed ({s})"),
                Err(e) => format!("no clang ({e})"),
            };
            if required {
                panic!("{source}: {why}, and SONDA_REQUIRE_BPF=1");
            }
            println!("cargo::warning={source}: {why}; sonda is built without its BPF kernel source (apt-get install clang)");
        }
    }
}
