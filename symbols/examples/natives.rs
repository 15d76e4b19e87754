//! Lists a trace's native functions: id, process, address, the mapping that holds it
//! and the label it gets. For checking why a function has no name.
//!
//! `cargo run -p sonda-symbols --example natives -- TRACE`

use sonda_symbols::{mappings_by_process, Symbolizer};
use sonda_trace::TraceMeta;

fn main() {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: natives TRACE");
        std::process::exit(2);
    };
    let meta = match TraceMeta::scan(std::path::Path::new(&path)) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("natives: {e}");
            std::process::exit(1);
        }
    };
    let maps = mappings_by_process(&meta);
    for (pid, list) in &maps {
        for m in list {
            println!(
                "mapping pid {pid} {:#x}-{:#x} +{:#x} {}",
                m.start, m.end, m.offset, m.path
            );
        }
    }
    let mut sym = Symbolizer::new();
    let mut ids: Vec<_> = meta.native_functions.iter().collect();
    ids.sort_by_key(|(id, _)| **id);
    for (id, f) in ids {
        let list = maps.get(&f.pid).map(Vec::as_slice).unwrap_or_default();
        let r = sym.resolve(list, f.addr);
        println!(
            "function {id} pid {} {:#x}: {}",
            f.pid,
            f.addr,
            r.label(f.addr)
        );
    }
    for f in sym.failures() {
        println!("unreadable: {f}");
    }
}
