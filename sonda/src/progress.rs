//! The progress bar of the exports (`sonda paraver`, `sonda export`): on stderr, only
//! when it is a terminal (quiet in scripts and logs), fed by the timeline driver's
//! [`Progress`] callback. One place, so that both exports show the same bar.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use sonda_timeline::Progress;

/// A bar shown while an export runs; cleared by [`ExportBar::finish`].
pub(crate) struct ExportBar(Option<ProgressBar>);

impl ExportBar {
    /// Starts the bar, and gives the callback to hand to the export's options (`None`
    /// when stderr is not a terminal: no bar, nothing to call).
    pub(crate) fn start() -> (ExportBar, Option<Progress>) {
        let Some(bar) = terminal_bar() else {
            return (ExportBar(None), None);
        };
        let fed = bar.clone();
        let progress = Progress::new(move |done, total| {
            fed.set_length(total.max(done));
            fed.set_position(done);
        });
        (ExportBar(Some(bar)), Some(progress))
    }

    /// Clears the bar, before the command prints its summary.
    pub(crate) fn finish(self) {
        if let Some(bar) = self.0 {
            bar.finish_and_clear();
        }
    }
}

fn terminal_bar() -> Option<ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new(0);
    let style = ProgressStyle::with_template(
        "{spinner} exporting [{bar:40}] {percent:>3}% {human_pos}/{human_len} trace records, eta {eta}",
    )
    .ok()?
    .progress_chars("=> ");
    bar.set_style(style);
    bar.enable_steady_tick(Duration::from_millis(200));
    Some(bar)
}
