//! Ready-made Paraver configurations (`.cfg`), written next to the trace: timelines of
//! thread states, Java methods (stacked, as Extrae's "User function" views), the
//! threads on each CPU, garbage collections and monitor contention, and profiles
//! (time per state per thread; exclusive time and calls per method per thread).
//!
//! The format is Paraver's configuration file 3.4 as its loader (`api/cfg.cpp` of
//! paraver-kernel) reads it: a header, then per window a block of `window_*` lines, then
//! per histogram a block of `Analyzer2D.*` lines naming its windows by `window_id`.
//! Every file is loaded and computed by `paramedir` in the tests when it is installed.
//!
//! Semantics used:
//! - states: thread function `State As Is`;
//! - methods: `Last Evt Val` of type 60000019 composed with `Stacked Val` (an enter
//!   pushes its value, 0 pops), so a thread shows the method on top of its stack: time
//!   in a value is the method's exclusive time;
//! - calls: `Last Evt Val` of type 60000019 without stacking: every enter begins one
//!   burst of its value, so `# Bursts` per value counts calls;
//! - CPUs: CPU level, `Active Thd` of `Last Evt Val` of type 49000003: a CPU shows the
//!   row number of the thread running on it, 0 when none of the trace's threads runs
//!   there (see `translate` for why these events and not the states).

use std::io::{self, Write};

use crate::conventions::{event, state};

/// How a window computes its values.
struct Window<'a> {
    name: &'a str,
    /// `thread` or `cpu`.
    level: &'a str,
    thread_function: &'a str,
    cpu_function: &'a str,
    compose_thread: &'a str,
    /// Event types the window reads (none: all).
    event_types: &'a [u32],
    /// Colour by value (code) or gradient.
    code_colors: bool,
    max_y: u32,
}

/// A 2-D profile: rows are the window's objects, columns the control window's values.
struct Histogram<'a> {
    name: &'a str,
    control: usize,
    data: usize,
    statistic: &'a str,
    min: u32,
    max: u32,
}

/// What the `.cfg` files need to know about the trace.
pub(crate) struct CfgFacts {
    /// Largest user-function value written (methods and native functions).
    pub max_function: u32,
    /// Largest monitor class id written.
    pub max_monitor: u32,
    /// Number of Paraver threads (the CPU view's value range).
    pub threads: u32,
    /// Whether the CPU view's events were written.
    pub cpu_view: bool,
    /// Whether GC events were written.
    pub gc: bool,
    /// Whether monitor events were written.
    pub monitors: bool,
    /// Whether user-function events were written.
    pub functions: bool,
}

/// One configuration file: its name suffix and text.
pub(crate) struct CfgFile {
    pub suffix: &'static str,
    pub text: String,
}

const STATES: Window = Window {
    name: "Thread states",
    level: "thread",
    thread_function: "State As Is",
    cpu_function: "Active Thd",
    compose_thread: "As Is",
    event_types: &[],
    code_colors: true,
    max_y: state::WAITING_CPU,
};

fn methods(max: u32) -> Window<'static> {
    Window {
        name: "Java methods (stacked)",
        level: "thread",
        thread_function: "Last Evt Val",
        cpu_function: "Active Thd",
        compose_thread: "Stacked Val",
        event_types: &[event::USER_FUNCTION],
        code_colors: true,
        max_y: max,
    }
}

fn calls(max: u32) -> Window<'static> {
    Window {
        name: "Java method calls",
        level: "thread",
        thread_function: "Last Evt Val",
        cpu_function: "Active Thd",
        compose_thread: "As Is",
        event_types: &[event::USER_FUNCTION],
        code_colors: true,
        max_y: max,
    }
}

/// The configuration files for a trace with `facts`.
pub(crate) fn cfg_files(facts: &CfgFacts) -> Vec<CfgFile> {
    let mut files = vec![
        CfgFile {
            suffix: "states",
            text: render(&[STATES], &[]),
        },
        CfgFile {
            suffix: "state_profile",
            text: render(
                &[STATES],
                &[Histogram {
                    name: "Time per state per thread",
                    control: 1,
                    data: 1,
                    statistic: "Time",
                    min: 0,
                    max: state::WAITING_CPU,
                }],
            ),
        },
    ];
    if facts.cpu_view {
        files.push(CfgFile {
            suffix: "cpus",
            text: render(
                &[Window {
                    name: "Thread running on each CPU",
                    level: "cpu",
                    thread_function: "Last Evt Val",
                    cpu_function: "Active Thd",
                    compose_thread: "As Is",
                    event_types: &[event::CPU_THREAD],
                    code_colors: true,
                    max_y: facts.threads.max(1),
                }],
                &[],
            ),
        });
    }
    if facts.functions {
        let max = facts.max_function.max(1);
        files.push(CfgFile {
            suffix: "methods",
            text: render(&[methods(max)], &[]),
        });
        // One profile per file: paramedir writes one histogram per configuration.
        files.push(CfgFile {
            suffix: "method_time",
            text: render(
                &[methods(max)],
                &[Histogram {
                    name: "Exclusive time per method per thread",
                    control: 1,
                    data: 1,
                    statistic: "Time",
                    min: 1,
                    max,
                }],
            ),
        });
        files.push(CfgFile {
            suffix: "method_calls",
            text: render(
                &[calls(max)],
                &[Histogram {
                    name: "Calls per method per thread",
                    control: 1,
                    data: 1,
                    statistic: "# Bursts",
                    min: 1,
                    max,
                }],
            ),
        });
    }
    if facts.gc {
        files.push(CfgFile {
            suffix: "gc",
            text: render(
                &[Window {
                    name: "Garbage collection",
                    level: "thread",
                    thread_function: "Last Evt Val",
                    cpu_function: "Active Thd",
                    compose_thread: "As Is",
                    event_types: &[event::GC],
                    code_colors: true,
                    max_y: 1,
                }],
                &[],
            ),
        });
    }
    if facts.monitors {
        files.push(CfgFile {
            suffix: "monitors",
            text: render(
                &[Window {
                    name: "Monitor contention (class waited for)",
                    level: "thread",
                    thread_function: "Last Evt Val",
                    cpu_function: "Active Thd",
                    compose_thread: "As Is",
                    event_types: &[event::MONITOR],
                    code_colors: true,
                    max_y: facts.max_monitor.max(1),
                }],
                &[],
            ),
        });
    }
    files
}

/// The text of one configuration file.
fn render(windows: &[Window], histograms: &[Histogram]) -> String {
    let mut out = Vec::new();
    write_cfg(&mut out, windows, histograms).expect("writing to a Vec cannot fail");
    String::from_utf8(out).expect("the configuration is ASCII")
}

fn write_cfg(out: &mut impl Write, windows: &[Window], histograms: &[Histogram]) -> io::Result<()> {
    writeln!(
        out,
        "#ParaverCFG\nConfigFile.Version: 3.4\nConfigFile.NumWindows: {}",
        windows.len()
    )?;
    writeln!(
        out,
        "ConfigFile.BeginDescription\nWritten by sonda.\nConfigFile.EndDescription\n"
    )?;
    for (i, w) in windows.iter().enumerate() {
        write_window(
            out,
            i + 1,
            w,
            histograms.is_empty() && i + 1 == windows.len(),
        )?;
    }
    for h in histograms {
        write_histogram(out, h)?;
    }
    Ok(())
}

fn write_window(out: &mut impl Write, id: usize, w: &Window, open: bool) -> io::Result<()> {
    writeln!(
        out,
        "################################################################################"
    )?;
    writeln!(out, "< NEW DISPLAYING WINDOW {} >", w.name)?;
    writeln!(
        out,
        "################################################################################"
    )?;
    writeln!(out, "window_name {}", w.name)?;
    writeln!(out, "window_type single\nwindow_id {id}")?;
    writeln!(
        out,
        "window_position_x {}\nwindow_position_y {}",
        100 + 30 * id,
        100 + 30 * id
    )?;
    writeln!(out, "window_width 800\nwindow_height 300")?;
    writeln!(
        out,
        "window_comm_lines_enabled true\nwindow_flags_enabled false\nwindow_noncolor_mode true"
    )?;
    let mode = if w.code_colors {
        "window_in_code_mode"
    } else {
        "window_in_gradient_mode"
    };
    writeln!(out, "window_color_mode {mode}")?;
    writeln!(
        out,
        "window_logical_filtered true\nwindow_physical_filtered false"
    )?;
    writeln!(
        out,
        "window_comm_fromto true\nwindow_comm_tagsize true\nwindow_comm_typeval true"
    )?;
    writeln!(out, "window_units Nanoseconds")?;
    writeln!(
        out,
        "window_maximum_y {}.000000000000\nwindow_minimum_y 0.000000000000",
        w.max_y
    )?;
    writeln!(out, "window_compute_y_max false\nwindow_level {}", w.level)?;
    writeln!(
        out,
        "window_scale_relative 1.000000000000\nwindow_end_time_relative 1.000000000000"
    )?;
    writeln!(out, "window_object appl {{ 1, {{ All }} }}")?;
    writeln!(
        out,
        "window_begin_time_relative 0.000000000000\nwindow_open {open}"
    )?;
    writeln!(
        out,
        "window_drawmode draw_maximum\nwindow_drawmode_rows draw_maximum"
    )?;
    writeln!(out, "window_pixel_size 1\nwindow_labels_to_draw 1")?;
    let evt = if w.event_types.is_empty() { "All" } else { "=" };
    writeln!(
        out,
        "window_selected_functions {{ 14, {{ {{cpu, {}}}, {{appl, Adding}}, {{task, Adding}}, {{thread, {}}}, \
         {{node, Adding}}, {{system, Adding}}, {{workload, Adding}}, {{from_obj, All}}, {{to_obj, All}}, \
         {{tag_msg, All}}, {{size_msg, All}}, {{bw_msg, All}}, {{evt_type, {evt}}}, {{evt_value, All}} }} }}",
        w.cpu_function, w.thread_function
    )?;
    writeln!(
        out,
        "window_compose_functions {{ 9, {{ {{compose_cpu, As Is}}, {{compose_appl, As Is}}, {{compose_task, As Is}}, \
         {{compose_thread, {}}}, {{compose_node, As Is}}, {{compose_system, As Is}}, {{compose_workload, As Is}}, \
         {{topcompose1, As Is}}, {{topcompose2, As Is}} }} }}",
        w.compose_thread
    )?;
    if !w.event_types.is_empty() {
        let types: Vec<String> = w.event_types.iter().map(u32::to_string).collect();
        writeln!(
            out,
            "window_filter_module evt_type {} {}",
            types.len(),
            types.join(" ")
        )?;
    }
    writeln!(out)
}

fn write_histogram(out: &mut impl Write, h: &Histogram) -> io::Result<()> {
    writeln!(out, "< NEW ANALYZER2D >")?;
    writeln!(out, "Analyzer2D.Name: {}", h.name)?;
    writeln!(
        out,
        "Analyzer2D.X: 200\nAnalyzer2D.Y: 200\nAnalyzer2D.Width: 800\nAnalyzer2D.Height: 400"
    )?;
    writeln!(
        out,
        "Analyzer2D.ControlWindow: {}\nAnalyzer2D.DataWindow: {}",
        h.control, h.data
    )?;
    writeln!(
        out,
        "Analyzer2D.Accumulator: Semantic\nAnalyzer2D.Statistic: {}",
        h.statistic
    )?;
    writeln!(out, "Analyzer2D.CalculateAll: True\nAnalyzer2D.HideCols: True\nAnalyzer2D.HorizVert: Horizontal")?;
    writeln!(
        out,
        "Analyzer2D.Color: True\nAnalyzer2D.SemanticColor: False\nAnalyzer2D.Zoom: Disabled"
    )?;
    writeln!(
        out,
        "Analyzer2D.SortCols: False\nAnalyzer2D.SortCriteria: Average"
    )?;
    writeln!(
        out,
        "Analyzer2D.AnalysisLimits: Alltrace\nAnalyzer2D.ComputeYScale: False"
    )?;
    writeln!(out, "Analyzer2D.Minimum: {}.000000000000", h.min)?;
    writeln!(out, "Analyzer2D.Maximum: {}.000000000000", h.max)?;
    writeln!(
        out,
        "Analyzer2D.Delta: 1.000000000000\nAnalyzer2D.ComputeGradient: True"
    )?;
    writeln!(
        out,
        "Analyzer2D.PixelSize: 1\nAnalyzer2D.CodeColor: True\nAnalyzer2D.ShowOnlyTotals: False"
    )?;
    writeln!(out, "Analyzer2D.ShortHeaderLabels: True\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_for_what_the_trace_holds() {
        let facts = CfgFacts {
            max_function: 7,
            max_monitor: 3,
            threads: 4,
            cpu_view: true,
            gc: false,
            monitors: true,
            functions: true,
        };
        let files = cfg_files(&facts);
        let names: Vec<_> = files.iter().map(|f| f.suffix).collect();
        assert_eq!(
            names,
            [
                "states",
                "state_profile",
                "cpus",
                "methods",
                "method_time",
                "method_calls",
                "monitors"
            ]
        );
        let time = &files[4].text;
        assert!(
            time.starts_with("#ParaverCFG\nConfigFile.Version: 3.4\nConfigFile.NumWindows: 1\n")
        );
        assert!(time.contains("{compose_thread, Stacked Val}"));
        assert!(time.contains("window_filter_module evt_type 1 60000019\n"));
        assert!(time.contains("Analyzer2D.Statistic: Time\n"));
        assert!(time.contains("Analyzer2D.Maximum: 7.000000000000\n"));
        let calls = &files[5].text;
        assert!(calls.contains("{compose_thread, As Is}"));
        assert!(calls.contains("Analyzer2D.Statistic: # Bursts\n"));
        let cpus = &files[2].text;
        assert!(cpus.contains("window_level cpu\n"));
        assert!(cpus.contains("{cpu, Active Thd}") && cpus.contains("{thread, Last Evt Val}"));
        assert!(cpus.contains("window_filter_module evt_type 1 49000003\n"));
    }
}
