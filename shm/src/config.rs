//! What the collector tells agents, encoded and decoded in this one module so that both
//! sides agree by construction (docs/architecture.md, "Agent ↔ collector contract"):
//!
//! - [`AgentConfig`]: the configuration the collector leaves in the buffer file's header
//!   ([`crate::Region::create`] writes it, [`crate::Region::config`] reads it back), one
//!   `key=value` per line: `mode=launch|attach`, `methods=<pattern>` (repeatable, in
//!   order, `!` excludes), `monitors=0|1`, `gc=0|1`, `budget=<percent>` (the overhead
//!   budget, up to two decimals: `5`, `0.5`; absent: none).
//! - [`AgentOptions`]: the JVM agent option string (`-agentpath:libsonda.so=<options>`, or
//!   the attach request's), `key=value` pairs separated by `,`: `shm=<buffer file>`.
//!
//! The two are decoded with different strictness on purpose. The configuration is
//! written by a collector, possibly of another version, so an unknown key is ignored
//! (a newer collector may add some) and so are blank and `#` lines. The option string
//! may be typed by people, so an unknown or repeated key is an error there (a typo
//! would otherwise go unnoticed).
//!
//! Decoding runs in the agent, inside the traced JVM: it returns errors, never panics.

use std::fmt;
use std::path::{Path, PathBuf};

/// How the collector started the recording.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    /// The collector launched the JVM with `-agentpath` (`mode=launch`).
    Launch,
    /// The collector attached to a running JVM (`mode=attach`).
    Attach,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Mode::Launch => "launch",
            Mode::Attach => "attach",
        }
    }
}

/// The collector's configuration for agents.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct AgentConfig {
    /// The `methods=` patterns, in order (the `sonda-filter` grammar, `!` excludes). The
    /// agent parses them with `sonda_filter::MethodFilter::parse`; this crate only
    /// carries them.
    pub methods: Vec<String>,
    /// Record contended monitor enters (`monitors=1`, the default).
    pub monitors: bool,
    /// Record garbage collections (`gc=1`, the default).
    pub gc: bool,
    /// `mode=`, if given.
    pub mode: Option<Mode>,
    /// The overhead budget (`budget=`), in hundredths of a percent of the process's
    /// CPU time: the agent removes the probes of the methods that cost most until its
    /// estimated overhead is below it. `None`: no budget, every selected method stays
    /// traced. Hundredths, not a float, so that the configuration stays `Eq` and its
    /// text round-trips exactly.
    pub budget: Option<u32>,
}

/// The largest budget, in hundredths of a percent: 100%.
pub const MAX_BUDGET: u32 = 10_000;

/// `text` (a percentage with up to two decimals, above 0 and at most 100) in
/// hundredths of a percent; `None` for anything else. Shared by the CLI's `--budget`
/// and the configuration's `budget=`.
pub fn parse_budget(text: &str) -> Option<u32> {
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(frac) || frac.len() > 2 || whole.len() > 3 {
        return None;
    }
    let whole: u32 = whole.parse().ok()?;
    let frac: u32 = format!("{frac:0<2}").parse().ok()?;
    let value = whole * 100 + frac;
    (1..=MAX_BUDGET).contains(&value).then_some(value)
}

/// Hundredths of a percent as the text [`parse_budget`] reads (`5`, `0.5`, `12.25`).
pub fn budget_text(hundredths: u32) -> String {
    let (whole, frac) = (hundredths / 100, hundredths % 100);
    match frac {
        0 => whole.to_string(),
        f if f % 10 == 0 => format!("{whole}.{}", f / 10),
        f => format!("{whole}.{f:02}"),
    }
}

impl Default for AgentConfig {
    /// No methods, monitors and garbage collections recorded, no mode: what an empty
    /// configuration text means.
    fn default() -> Self {
        AgentConfig {
            methods: Vec::new(),
            monitors: true,
            gc: true,
            mode: None,
            budget: None,
        }
    }
}

/// A configuration text that does not decode, or a configuration that cannot be
/// encoded.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum ConfigError {
    /// A line without `=`.
    NotKeyValue(String),
    /// A known key with a value that is not one of the allowed ones.
    BadValue {
        /// The key (`gc`, `monitors`, `mode`).
        key: String,
        /// The value found.
        value: String,
        /// The values allowed, for the message (`0 or 1`).
        expected: &'static str,
    },
    /// A `methods` pattern the text cannot carry: it holds a line break, or starts or
    /// ends with whitespace (which decoding trims).
    Unencodable(String),
    /// A budget outside 1..=[`MAX_BUDGET`] hundredths of a percent.
    BadBudget(u32),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::NotKeyValue(line) => {
                write!(f, "configuration line '{}' is not key=value", one_line(line))
            }
            ConfigError::BadValue {
                key,
                value,
                expected,
            } => write!(
                f,
                "configuration '{}={}' is invalid (expected {expected})",
                one_line(key),
                one_line(value)
            ),
            ConfigError::Unencodable(pattern) => write!(
                f,
                "method pattern '{}' cannot be passed to agents (it holds a line break or surrounding whitespace)",
                one_line(pattern)
            ),
            ConfigError::BadBudget(b) => write!(
                f,
                "overhead budget {} is not above 0% and at most 100%",
                budget_text(*b)
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

impl AgentConfig {
    /// The configuration text: `mode=` (if set), then one `methods=` line per pattern in
    /// order, then `monitors=0` / `gc=0` when off. Defaults are left out, so the text is
    /// the one earlier collectors wrote and agents of every version read it alike.
    pub fn encode(&self) -> Result<String, ConfigError> {
        let mut text = String::new();
        if let Some(mode) = self.mode {
            text.push_str("mode=");
            text.push_str(mode.as_str());
            text.push('\n');
        }
        for pattern in &self.methods {
            if pattern.contains(['\n', '\r']) || pattern.trim() != pattern {
                return Err(ConfigError::Unencodable(pattern.clone()));
            }
            text.push_str("methods=");
            text.push_str(pattern);
            text.push('\n');
        }
        if !self.monitors {
            text.push_str("monitors=0\n");
        }
        if !self.gc {
            text.push_str("gc=0\n");
        }
        if let Some(b) = self.budget {
            if !(1..=MAX_BUDGET).contains(&b) {
                return Err(ConfigError::BadBudget(b));
            }
            text.push_str("budget=");
            text.push_str(&budget_text(b));
            text.push('\n');
        }
        Ok(text)
    }

    /// Decodes a configuration text. Blank lines and `#` comments are skipped; unknown
    /// keys are ignored so that a newer collector can add some. A line without `=`, or a
    /// bad value of a known key, is an error: the agent then refuses to record rather
    /// than guess.
    pub fn decode(text: &str) -> Result<AgentConfig, ConfigError> {
        let mut config = AgentConfig::default();
        for line in text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let (key, value) = line
                .split_once('=')
                .ok_or_else(|| ConfigError::NotKeyValue(line.to_string()))?;
            let (key, value) = (key.trim(), value.trim());
            let bad = |expected| ConfigError::BadValue {
                key: key.to_string(),
                value: value.to_string(),
                expected,
            };
            let flag = || match value {
                "1" => Ok(true),
                "0" => Ok(false),
                _ => Err(bad("0 or 1")),
            };
            match key {
                "methods" => config.methods.push(value.to_string()),
                "monitors" => config.monitors = flag()?,
                "gc" => config.gc = flag()?,
                "budget" => {
                    config.budget = Some(
                        parse_budget(value)
                            .ok_or_else(|| bad("a percentage above 0, at most 100"))?,
                    )
                }
                "mode" => {
                    config.mode = Some(match value {
                        "launch" => Mode::Launch,
                        "attach" => Mode::Attach,
                        _ => return Err(bad("launch or attach")),
                    })
                }
                _ => {}
            }
        }
        Ok(config)
    }
}

/// The agent option string: what `-agentpath:libsonda.so=<options>` (or the attach
/// request) tells the agent.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct AgentOptions {
    /// The collector's buffer file (required), as the traced process sees it.
    pub shm: PathBuf,
}

/// An agent option string that does not decode, or options that cannot be encoded.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum OptionsError {
    /// No `shm=` option.
    MissingShm,
    /// An item without `=`.
    NotKeyValue(String),
    /// A key the agent does not know (a typo, or a newer collector).
    UnknownKey(String),
    /// The same key twice.
    Repeated(String),
    /// A key with an empty value.
    Empty(String),
    /// A buffer file path the option string cannot carry: not UTF-8 (the JVM hands the
    /// agent text), empty, holding a comma (the separator), or with surrounding
    /// whitespace (which decoding trims).
    Unencodable(PathBuf),
}

impl fmt::Display for OptionsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptionsError::MissingShm => write!(f, "agent options lack shm=<buffer file> (give -agentpath:libsonda.so=shm=/dev/shm/sonda-...)"),
            OptionsError::NotKeyValue(item) => write!(f, "agent option '{}' is not key=value", one_line(item)),
            OptionsError::UnknownKey(key) => write!(f, "unknown agent option '{}' (known: shm)", one_line(key)),
            OptionsError::Repeated(key) => write!(f, "agent option '{}' given twice", one_line(key)),
            OptionsError::Empty(key) => write!(f, "agent option '{}' has an empty value", one_line(key)),
            OptionsError::Unencodable(path) => write!(
                f,
                "buffer file path {} cannot be passed to the agent (not UTF-8, empty, or holds a comma or surrounding whitespace)",
                one_line(&path.to_string_lossy())
            ),
        }
    }
}

impl std::error::Error for OptionsError {}

impl AgentOptions {
    /// Options naming the buffer file `shm`.
    pub fn new(shm: &Path) -> AgentOptions {
        AgentOptions {
            shm: shm.to_path_buf(),
        }
    }

    /// The option string (`shm=/dev/shm/sonda-1-0.buf`). Refuses a path that
    /// [`AgentOptions::decode`] would not give back unchanged.
    pub fn encode(&self) -> Result<String, OptionsError> {
        let unencodable = || OptionsError::Unencodable(self.shm.clone());
        let shm = self.shm.to_str().ok_or_else(unencodable)?;
        if shm.is_empty() || shm.contains(',') || shm.trim() != shm {
            return Err(unencodable());
        }
        Ok(format!("shm={shm}"))
    }

    /// Decodes an option string: `key=value` items separated by `,`, surrounding
    /// whitespace and empty items ignored. Unknown and repeated keys are errors.
    pub fn decode(text: &str) -> Result<AgentOptions, OptionsError> {
        let mut shm = None;
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| OptionsError::NotKeyValue(item.to_string()))?;
            let key = key.trim();
            if value.is_empty() {
                return Err(OptionsError::Empty(key.to_string()));
            }
            match key {
                "shm" => {
                    if shm.replace(PathBuf::from(value)).is_some() {
                        return Err(OptionsError::Repeated(key.to_string()));
                    }
                }
                _ => return Err(OptionsError::UnknownKey(key.to_string())),
            }
        }
        Ok(AgentOptions {
            shm: shm.ok_or(OptionsError::MissingShm)?,
        })
    }
}

/// `text` with control characters (line breaks) shown escaped, so that every message
/// stays on one line.
fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(mode: Option<Mode>, methods: &[&str], monitors: bool, gc: bool) -> AgentConfig {
        AgentConfig {
            methods: methods.iter().map(|m| m.to_string()).collect(),
            monitors,
            gc,
            mode,
            budget: None,
        }
    }

    #[test]
    fn budget_text_round_trips_and_refuses_what_is_not_a_percentage() {
        for (text, v) in [
            ("5", 500),
            ("0.5", 50),
            ("0.05", 5),
            ("12.25", 1225),
            ("100", 10_000),
            ("1.50", 150),
        ] {
            assert_eq!(parse_budget(text), Some(v), "{text}");
        }
        for v in [1, 5, 50, 150, 500, 1225, 10_000] {
            assert_eq!(parse_budget(&budget_text(v)), Some(v));
        }
        for bad in [
            "", "0", "0.0", "100.01", "101", "-1", "1e2", "5%", ".5", "5.", "0.001", " 5", "abc",
        ] {
            let parsed = parse_budget(bad);
            // "5." reads as 5 with no decimals: allowed.
            if bad == "5." {
                assert_eq!(parsed, Some(500));
            } else {
                assert_eq!(parsed, None, "{bad:?}");
            }
        }
        let mut c = AgentConfig {
            budget: Some(50),
            ..AgentConfig::default()
        };
        assert_eq!(c.encode().unwrap(), "budget=0.5\n");
        assert_eq!(AgentConfig::decode("budget=0.5").unwrap(), c);
        assert!(matches!(
            AgentConfig::decode("budget=0"),
            Err(ConfigError::BadValue { .. })
        ));
        c.budget = Some(0);
        assert_eq!(c.encode(), Err(ConfigError::BadBudget(0)));
    }

    #[test]
    fn options_need_shm() {
        assert_eq!(
            AgentOptions::decode("shm=/dev/shm/x.buf").unwrap().shm,
            PathBuf::from("/dev/shm/x.buf")
        );
        assert_eq!(
            AgentOptions::decode(" shm=/a , ").unwrap().shm,
            PathBuf::from("/a")
        );
        assert_eq!(AgentOptions::decode(""), Err(OptionsError::MissingShm));
        assert_eq!(
            AgentOptions::decode("shm="),
            Err(OptionsError::Empty("shm".into()))
        );
        assert_eq!(
            AgentOptions::decode("shm=/a,shm=/b"),
            Err(OptionsError::Repeated("shm".into()))
        );
        assert_eq!(
            AgentOptions::decode("shm=/a,verbose"),
            Err(OptionsError::NotKeyValue("verbose".into()))
        );
        assert_eq!(
            AgentOptions::decode("shm=/a,sonda=1"),
            Err(OptionsError::UnknownKey("sonda".into()))
        );
    }

    #[test]
    fn options_round_trip_and_refuse_what_they_cannot_carry() {
        let opts = AgentOptions::new(Path::new("/dev/shm/sonda-1-0.buf"));
        let text = opts.encode().unwrap();
        assert_eq!(text, "shm=/dev/shm/sonda-1-0.buf");
        assert_eq!(AgentOptions::decode(&text), Ok(opts));
        let spaced = AgentOptions::new(Path::new("/my dir/b"));
        assert_eq!(AgentOptions::decode(&spaced.encode().unwrap()), Ok(spaced));
        for bad in ["/a,b", "", " /a", "/a "] {
            assert_eq!(
                AgentOptions::new(Path::new(bad)).encode(),
                Err(OptionsError::Unencodable(bad.into())),
                "{bad:?}"
            );
        }
        use std::os::unix::ffi::OsStrExt;
        let not_utf8 = Path::new(std::ffi::OsStr::from_bytes(b"/a\xff"));
        assert!(matches!(
            AgentOptions::new(not_utf8).encode(),
            Err(OptionsError::Unencodable(_))
        ));
    }

    #[test]
    fn error_text_is_one_line() {
        let errors: Vec<Box<dyn std::error::Error>> = vec![
            Box::new(OptionsError::MissingShm),
            Box::new(OptionsError::UnknownKey("x".into())),
            Box::new(OptionsError::NotKeyValue("a\nb".into())),
            Box::new(OptionsError::Unencodable("/a\nb".into())),
            Box::new(ConfigError::NotKeyValue("a\rb".into())),
            Box::new(ConfigError::Unencodable("a\nb".into())),
            Box::new(AgentConfig::decode("gc=yes").unwrap_err()),
        ];
        for e in errors {
            let text = e.to_string();
            assert!(!text.contains(['\n', '\r']), "{text:?}");
        }
    }

    #[test]
    fn config_keeps_method_order_and_defaults() {
        let c =
            AgentConfig::decode("mode=launch\nmethods=a.B\n\nmethods=!a.B::c\ngc=0\nfuture=7\n")
                .unwrap();
        assert_eq!(c.methods, vec!["a.B".to_string(), "!a.B::c".to_string()]);
        assert!(!c.gc);
        assert!(c.monitors);
        assert_eq!(c.mode, Some(Mode::Launch));
        assert_eq!(AgentConfig::decode("").unwrap(), AgentConfig::default());
        assert_eq!(
            AgentConfig::decode("# a comment\n  \n monitors = 0 \nmode=attach").unwrap(),
            config(Some(Mode::Attach), &[], false, true)
        );
    }

    #[test]
    fn config_rejects_bad_values() {
        assert!(matches!(
            AgentConfig::decode("gc=yes"),
            Err(ConfigError::BadValue { .. })
        ));
        assert!(matches!(
            AgentConfig::decode("mode=x"),
            Err(ConfigError::BadValue { .. })
        ));
        assert!(matches!(
            AgentConfig::decode("junk"),
            Err(ConfigError::NotKeyValue(_))
        ));
        // The message names the line, for the agent's warning.
        assert!(AgentConfig::decode("gc=maybe")
            .unwrap_err()
            .to_string()
            .contains("gc=maybe"));
    }

    /// The text the collector has always written: a `mode=` line, then the patterns.
    #[test]
    fn config_text_is_what_collectors_wrote_before() {
        let c = config(Some(Mode::Launch), &["a.B::c", "!a.B::d"], true, true);
        assert_eq!(
            c.encode().unwrap(),
            "mode=launch\nmethods=a.B::c\nmethods=!a.B::d\n"
        );
        assert!(config(Some(Mode::Attach), &[], true, true)
            .encode()
            .unwrap()
            .starts_with("mode=attach\n"));
        assert_eq!(AgentConfig::default().encode().unwrap(), "");
    }

    #[test]
    fn config_round_trips() {
        for c in [
            AgentConfig::default(),
            config(None, &["app.**", "!app.internal.**"], false, true),
            config(Some(Mode::Attach), &["@jakarta.ws.rs.GET"], true, false),
            config(
                Some(Mode::Launch),
                &["::<init>(I)", "#x", "a=b", ""],
                false,
                false,
            ),
        ] {
            assert_eq!(AgentConfig::decode(&c.encode().unwrap()), Ok(c.clone()));
        }
    }

    #[test]
    fn config_refuses_patterns_the_text_cannot_carry() {
        for bad in ["a\nb", "a\r", " a", "a\t"] {
            assert_eq!(
                config(None, &["ok", bad], true, true).encode(),
                Err(ConfigError::Unencodable(bad.into()))
            );
        }
    }
}
