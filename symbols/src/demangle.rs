//! Symbol names as the source has them: C++ (Itanium ABI, `_Z...`) and Rust (legacy
//! `_ZN...17h<hash>E` and v0 `_R...`) names are demangled, anything else (C) is kept.

/// The source-level name of symbol `raw`.
pub fn demangle(raw: &str) -> String {
    // Rust first: its legacy scheme is a valid C++ mangling too, but the C++ demangler
    // would keep the hash as a name component.
    if let Ok(d) = rustc_demangle::try_demangle(raw) {
        return format!("{d:#}");
    }
    if raw.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(raw) {
            if let Ok(d) = sym.demangle() {
                return d;
            }
        }
    }
    raw.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_cpp_and_rust_names() {
        assert_eq!(demangle("fib"), "fib");
        assert_eq!(demangle("_Z3fibi"), "fib(int)");
        assert_eq!(demangle("_ZNK5Shape4areaEv"), "Shape::area() const");
        assert_eq!(
            demangle("_ZN4core3fmt5write17h0123456789abcdefE"),
            "core::fmt::write"
        );
        assert_eq!(demangle("_RNvCs1234_7mycrate4main"), "mycrate::main");
        // Not a valid mangling: kept as it is.
        assert_eq!(demangle("_Zgarbage"), "_Zgarbage");
    }
}
