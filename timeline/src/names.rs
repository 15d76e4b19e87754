//! The names every view shows: one rule for methods and threads, so that the Paraver
//! labels and the report agree.

use std::collections::HashMap;

use sonda_trace::{MethodInfo, ThreadInfo, TraceMeta};

/// Labels for every method of the trace: `Class::method`, with the descriptor added
/// (`Class::method(I)V`) when the class has several methods of that name, so that
/// overloads stay apart. A C API region is its name. A compiler-instrumented native
/// function (`Meta::NativeFunction`) is its source-level name, read from the symbols of
/// the binary its process mapped there (`sonda_symbols`; the binaries are read here),
/// or its address when it cannot be named.
pub fn method_labels(meta: &TraceMeta) -> HashMap<u32, String> {
    let mut natives = sonda_symbols::native_function_labels(meta);
    let mut same_name: HashMap<(&str, &str), usize> = HashMap::new();
    for m in meta.methods.values() {
        *same_name
            .entry((m.class.as_str(), m.name.as_str()))
            .or_default() += 1;
    }
    meta.methods
        .iter()
        .map(|(&id, m)| match natives.remove(&id) {
            Some(native) => (id, native),
            None => {
                let overloaded = same_name[&(m.class.as_str(), m.name.as_str())] > 1;
                (id, method_label(m, overloaded))
            }
        })
        .collect()
}

/// Gives every native function of `meta` (`Meta::NativeFunction`) its resolved name in
/// `meta.methods` (class empty), as [`method_labels`] labels it: for code that matches
/// method names, such as a `--methods` filter (`::c_inner`). Reads the mapped binaries.
pub fn name_native_functions(meta: &mut TraceMeta) {
    for (id, label) in sonda_symbols::native_function_labels(meta) {
        if let Some(m) = meta.methods.get_mut(&id) {
            m.class.clear();
            m.name = label;
        }
    }
}

/// One method's label (see [`method_labels`]).
pub fn method_label(m: &MethodInfo, with_descriptor: bool) -> String {
    let mut label = m.qualified();
    if with_descriptor && !m.descriptor.is_empty() {
        label.push_str(&m.descriptor);
    }
    label
}

/// A thread's name: its Java name if it has one, else its kernel name (`renamed`, the
/// last `task_rename`, wins over the metadata's).
pub fn thread_name<'a>(info: &'a ThreadInfo, renamed: Option<&'a str>) -> &'a str {
    match (&info.java_name, renamed) {
        (Some(java), _) => java,
        (None, Some(comm)) => comm,
        (None, None) => &info.comm,
    }
}

/// `name` made safe for one line of a table or a Paraver file: control characters
/// (newlines, tabs) become spaces.
pub fn one_line(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sonda_trace::{Meta, Pid, Tid};

    #[test]
    fn overloads_get_their_descriptor() {
        let mut meta = TraceMeta::default();
        for (id, name, desc) in [(1, "run", "()V"), (2, "put", "(I)V"), (3, "put", "(J)V")] {
            meta.add(Meta::Method {
                id,
                class: "a.B".into(),
                name: name.into(),
                descriptor: desc.into(),
            });
        }
        meta.add(Meta::Method {
            id: 4,
            class: String::new(),
            name: "region".into(),
            descriptor: String::new(),
        });
        let labels = method_labels(&meta);
        assert_eq!(labels[&1], "a.B::run");
        assert_eq!(labels[&2], "a.B::put(I)V");
        assert_eq!(labels[&3], "a.B::put(J)V");
        assert_eq!(labels[&4], "region");
    }

    #[test]
    fn native_functions_without_a_mapping_keep_their_address() {
        let mut meta = TraceMeta::default();
        meta.add(Meta::NativeFunction {
            id: 7,
            pid: Pid(3),
            addr: 0x1136,
        });
        meta.add(Meta::Mapping {
            pid: Pid(3),
            start: 0x1000,
            end: 0x2000,
            offset: 0x1000,
            path: "/nonexistent/prog".into(),
        });
        assert_eq!(method_labels(&meta)[&7], "0x1136 (prog+0x1136)");
        name_native_functions(&mut meta);
        assert_eq!(meta.methods[&7].name, "0x1136 (prog+0x1136)");
        assert_eq!(meta.methods[&7].qualified(), "0x1136 (prog+0x1136)");
    }

    #[test]
    fn java_names_win() {
        let mut t = ThreadInfo {
            pid: Pid(1),
            tid: Tid(2),
            comm: "java".into(),
            ..Default::default()
        };
        assert_eq!(thread_name(&t, None), "java");
        assert_eq!(thread_name(&t, Some("C2 Compiler")), "C2 Compiler");
        t.java_name = Some("main".into());
        assert_eq!(thread_name(&t, Some("C2 Compiler")), "main");
        assert_eq!(one_line("a\nb\tc"), "a b c");
    }
}
