//! The `.prv` header line: `#Paraver (dd/mm/yyyy at hh:mm):END_ns:1(NCPUS):NAPPL:
//! 1(NTHREADS:1)...,0`, as Extrae writes it (one node; one task per application; no
//! communicators, hence `,0`).

use std::time::{SystemTime, UNIX_EPOCH};

use crate::layout::Layout;

/// The header line (with its newline). `end_width` pads the end time with leading
/// zeros to that many digits, so that a header rewritten with a smaller end keeps its
/// length.
pub(crate) fn header(date: SystemTime, end_ns: u64, end_width: usize, layout: &Layout) -> String {
    let mut h = format!(
        "#Paraver ({}):{end_ns:0end_width$}_ns:1({}):{}",
        date_text(date),
        layout.cpus,
        layout.applications.len()
    );
    for a in &layout.applications {
        h.push_str(&format!(":1({}:1)", a.threads));
    }
    h.push_str(",0\n");
    h
}

/// `dd/mm/yyyy at hh:mm` in UTC.
pub(crate) fn date_text(date: SystemTime) -> String {
    let secs = date
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let minute = secs % 86_400 / 60;
    format!(
        "{d:02}/{m:02}/{y:04} at {:02}:{:02}",
        minute / 60,
        minute % 60
    )
}

/// Year, month, day of a count of days since 1970-01-01 (proleptic Gregorian; Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Application;
    use sonda_trace::Pid;
    use std::time::Duration;

    #[test]
    fn dates() {
        assert_eq!(date_text(UNIX_EPOCH), "01/01/1970 at 00:00");
        // 2026-11-29 13:05:59 UTC
        assert_eq!(
            date_text(UNIX_EPOCH + Duration::from_secs(1_795_957_559)),
            "29/11/2026 at 13:05"
        );
        // 2000-02-29 (a leap day of a century year)
        assert_eq!(
            date_text(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "29/02/2000 at 00:00"
        );
    }

    #[test]
    fn header_as_extrae_writes_it() {
        let layout = Layout {
            applications: vec![
                Application {
                    pid: Pid(1),
                    label: "a".into(),
                    threads: 3,
                },
                Application {
                    pid: Pid(2),
                    label: "b".into(),
                    threads: 1,
                },
            ],
            threads: Vec::new(),
            cpus: 2,
            host: "h".into(),
        };
        assert_eq!(
            header(UNIX_EPOCH, 1000, 0, &layout),
            "#Paraver (01/01/1970 at 00:00):1000_ns:1(2):2:1(3:1):1(1:1),0\n"
        );
        assert_eq!(
            header(UNIX_EPOCH, 7, 4, &layout).len(),
            header(UNIX_EPOCH, 1000, 0, &layout).len()
        );
    }
}
