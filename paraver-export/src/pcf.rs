//! The `.pcf` file: Extrae's default options, sonda's states with their colours, and a
//! labelled `EVENT_TYPE` section per event type (each type with values of its own gets
//! its own section: a `VALUES` list applies to every type of its section).

use std::io::{self, Write};

use crate::conventions::{event, FUNCTION_END, STATES};

/// Labels for the values the `.prv` uses.
#[derive(Default, Debug)]
pub(crate) struct Labels {
    /// User-function values: Java methods and native functions, in value order.
    pub functions: Vec<(u32, String)>,
    /// Java methods only (the values of exits by exception), in value order.
    pub methods: Vec<(u32, String)>,
    /// Monitor classes, in id order.
    pub monitors: Vec<(u32, String)>,
    /// C API types.
    pub user_types: Vec<UserType>,
    /// Thread labels in row order (the values of the CPU view).
    pub threads: Vec<String>,
}

/// A C API event type and its labelled values (none: no `VALUES` list).
#[derive(Debug)]
pub(crate) struct UserType {
    pub ty: u32,
    pub name: String,
    pub values: Vec<(u64, String)>,
}

const OPTIONS: &str = "DEFAULT_OPTIONS

LEVEL               THREAD
UNITS               NANOSEC
LOOK_BACK           100
SPEED               1
FLAG_ICONS          ENABLED
NUM_OF_STATE_COLORS 1000
YMAX_SCALE          37


DEFAULT_SEMANTIC

THREAD_FUNC          State As Is
";

pub(crate) fn write_pcf(out: &mut dyn Write, labels: &Labels) -> io::Result<()> {
    write!(out, "{OPTIONS}\n\nSTATES\n")?;
    for (value, label, _) in STATES {
        writeln!(out, "{value:<4} {label}")?;
    }
    writeln!(out, "\n\nSTATES_COLOR")?;
    for (value, _, (r, g, b)) in STATES {
        writeln!(out, "{value:<4} {{{r},{g},{b}}}")?;
    }
    let functions =
        std::iter::once((0, FUNCTION_END.to_string())).chain(labels.functions.iter().cloned());
    section(out, event::USER_FUNCTION, "User function", functions)?;
    section(
        out,
        event::EXCEPTION_EXIT,
        "Method exit by exception",
        labels.methods.iter().cloned(),
    )?;
    let gc = [
        (0, "End".to_string()),
        (1, "Garbage collection".to_string()),
    ];
    section(out, event::GC, "Java garbage collector", gc.into_iter())?;
    let monitors =
        std::iter::once((0, "Entered".to_string())).chain(labels.monitors.iter().cloned());
    section(
        out,
        event::MONITOR,
        "Monitor contention (waiting for a monitor of class)",
        monitors,
    )?;
    let threads = std::iter::once((0, "None".to_string())).chain(
        labels
            .threads
            .iter()
            .enumerate()
            .map(|(i, l)| (i + 1, l.clone())),
    );
    section(out, event::CPU_THREAD, "Running thread (CPU view)", threads)?;
    for u in &labels.user_types {
        section(out, u.ty, &u.name, u.values.iter().cloned())?;
    }
    Ok(())
}

fn section(
    out: &mut dyn Write,
    ty: u32,
    name: &str,
    values: impl Iterator<Item = (impl std::fmt::Display, String)>,
) -> io::Result<()> {
    writeln!(out, "\n\nEVENT_TYPE\n0    {ty}    {name}")?;
    // An empty VALUES list is not valid (pertalde's parser rejects it): omit it.
    let mut values = values.peekable();
    if values.peek().is_some() {
        writeln!(out, "VALUES")?;
    }
    for (v, label) in values {
        writeln!(out, "{v:<6} {label}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_per_type() {
        let labels = Labels {
            functions: vec![(1, "a.B::run".into()), (9, "0x1000".into())],
            methods: vec![(1, "a.B::run".into())],
            monitors: vec![(3, "java.lang.Object".into())],
            user_types: vec![UserType {
                ty: 70000004,
                name: "phase".into(),
                values: vec![(1, "warm-up".into())],
            }],
            threads: vec!["main (7)".into()],
        };
        let mut out = Vec::new();
        write_pcf(&mut out, &labels).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("STATES\n0    Idle\n1    Running\n"), "{text}");
        assert!(text.contains("40   {255,140,0}"), "{text}");
        assert!(text.contains("EVENT_TYPE\n0    60000019    User function\nVALUES\n0      End\n1      a.B::run\n9      0x1000\n"));
        assert!(text.contains("EVENT_TYPE\n0    49000002    Monitor contention"));
        assert!(text.contains("3      java.lang.Object"));
        assert!(text.contains("0    70000004    phase\nVALUES\n1      warm-up\n"));
        assert!(text.contains(
            "0    49000003    Running thread (CPU view)\nVALUES\n0      None\n1      main (7)\n"
        ));
    }

    #[test]
    fn no_empty_values_lists() {
        let mut out = Vec::new();
        write_pcf(&mut out, &Labels::default()).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("0    49000001    Method exit by exception\n\n\nEVENT_TYPE"),
            "{text}"
        );
        assert!(!text.contains("VALUES\n\n"), "{text}");
    }
}
