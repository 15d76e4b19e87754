//! Creating the files a command writes, safely. Every output of every subcommand goes
//! through here: the traces of `record`, `attach` and `merge`, the Paraver files, the
//! model and its samples. The rules, and why:
//!
//! - **No output replaces an input.** [`Inputs`] holds the files a command reads, by
//!   identity (device and inode). An output that is one of them — the same path, a
//!   symlink to it, a hard link of it, or `x.prv` when `sonda paraver x.prv -o x` — is
//!   refused before anything is written.
//! - **Complete or nothing.** An output is written under a temporary name in its own
//!   directory, `NAME.XXXXXX.partial` (`XXXXXX` random; created exclusively and without
//!   following a symlink, so a name planted by someone else is neither written through
//!   nor in the way), and renamed to `NAME` only once complete, after an fsync, so that
//!   late write errors (a full disk, a quota) surface before the old file is replaced.
//!   A failure therefore leaves the old file or nothing. So does Ctrl-C during an export:
//!   [`remove_partial_on_signals`] removes the partial files before SIGINT, SIGTERM or
//!   SIGHUP take their default action.
//! - **The owner's only.** Files are created 0600 and directories 0700, whatever the
//!   umask: they hold recorded method, thread and command names (perf writes perf.data
//!   0600 for the same reason).
//! - **A recording is kept.** A recorded run cannot be made again, so the partial trace
//!   of a recording ([`NewFile::recording`]) is not removed when sonda dies before
//!   renaming it (SIGKILL): it stays at `TRACE.XXXXXX.partial`, readable up to its last
//!   flushed block. Every end of a recording that sonda controls renames it to `TRACE`.
//!
//! A rename replaces the name, not the file behind it: an output path that is a symlink
//! is replaced by the new file, and whatever the link pointed to is left alone.

use std::ffi::{CString, OsStr, OsString};
use std::fs::{self, File, OpenOptions, Permissions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicPtr, Ordering};

use anyhow::{anyhow, bail, Context};
use tempfile::{NamedTempFile, TempDir};

/// The mode of every file sonda writes.
pub const FILE_MODE: u32 = 0o600;
/// The mode of every directory sonda creates.
pub const DIR_MODE: u32 = 0o700;
/// How the temporary name of an output ends.
pub const PARTIAL_SUFFIX: &str = ".partial";
/// Random characters in a temporary name (62^6: not guessable in advance).
const RANDOM_LEN: usize = 6;
/// Room left in a file name for `.XXXXXX.partial` (and `.old`), within NAME_MAX (255).
const NAME_ROOM: usize = 255 - 1 - RANDOM_LEN - PARTIAL_SUFFIX.len() - 4;

/// The files a command reads, by device and inode.
#[derive(Debug, Default)]
pub struct Inputs(Vec<Input>);

#[derive(Debug)]
struct Input {
    path: PathBuf,
    id: Option<(u64, u64)>,
    canonical: Option<PathBuf>,
}

impl Inputs {
    /// The inputs at `paths`. One that cannot be looked at (missing) is kept by path
    /// only: reading it fails anyway, with its own message.
    pub fn new<P: AsRef<Path>>(paths: &[P]) -> Inputs {
        Inputs(
            paths
                .iter()
                .map(|p| {
                    let path = p.as_ref();
                    Input {
                        path: path.to_path_buf(),
                        id: identity(path),
                        canonical: fs::canonicalize(path).ok(),
                    }
                })
                .collect(),
        )
    }

    /// No inputs (a recording).
    pub fn none() -> Inputs {
        Inputs::default()
    }

    /// Refuses `output` when it is one of the inputs: the same file, whatever the path
    /// (a symlink to it, a hard link of it).
    pub fn check(&self, output: &Path) -> anyhow::Result<()> {
        let Some(id) = identity(output) else {
            return Ok(());
        };
        match self.0.iter().find(|i| i.id == Some(id)) {
            Some(input) => Err(is_input(output, &input.path)),
            None => Ok(()),
        }
    }

    /// Refuses a directory `dir` to be replaced by an output when it is an input or
    /// holds one.
    pub fn check_dir(&self, dir: &Path) -> anyhow::Result<()> {
        self.check(dir)?;
        let Ok(canonical) = fs::canonicalize(dir) else {
            return Ok(());
        };
        let inside = self.0.iter().find(|i| {
            i.canonical
                .as_ref()
                .is_some_and(|c| c.starts_with(&canonical))
        });
        match inside {
            Some(input) => bail!(
                "the output {} holds the input {}: choose another output",
                dir.display(),
                input.path.display()
            ),
            None => Ok(()),
        }
    }

    /// Refuses to print into an input: standard output redirected into the trace being
    /// read (`sonda report T >> T`).
    pub fn check_stdout(&self) -> anyhow::Result<()> {
        let Some(id) = identity(Path::new("/dev/stdout")) else {
            return Ok(());
        };
        match self.0.iter().find(|i| i.id == Some(id)) {
            Some(input) => bail!(
                "standard output is the input {}: redirect it to another file",
                input.path.display()
            ),
            None => Ok(()),
        }
    }
}

/// The error for an output that is an input.
fn is_input(output: &Path, input: &Path) -> anyhow::Error {
    if output == input {
        anyhow!(
            "the output {} is an input of this command: choose another output",
            output.display()
        )
    } else {
        anyhow!(
            "the output {} is the input {} (the same file): choose another output",
            output.display(),
            input.display()
        )
    }
}

/// Device and inode of the file at `path` (following symlinks).
fn identity(path: &Path) -> Option<(u64, u64)> {
    fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// The directory and file name of an output path.
fn split(path: &Path) -> io::Result<(PathBuf, &OsStr)> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file name"))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((dir, name))
}

/// `NAME.`, cut so that the temporary name stays within NAME_MAX.
fn prefix_of(name: &OsStr) -> OsString {
    let bytes = name.as_bytes();
    let mut prefix = OsStr::from_bytes(&bytes[..bytes.len().min(NAME_ROOM)]).to_os_string();
    prefix.push(".");
    prefix
}

/// An output path must not be a directory (nor a symlink to one): the rename at the
/// end would fail after all the work.
fn refuse_directory(path: &Path) -> io::Result<()> {
    match fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(io::Error::from_raw_os_error(libc::EISDIR)),
        _ => Ok(()),
    }
}

/// Creates a new file at `path`: exclusively (never an existing file, never through a
/// symlink), mode 0600 whatever the umask.
fn create_exclusive(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    file.set_permissions(Permissions::from_mode(FILE_MODE))?;
    Ok(file)
}

/// An output file being written under its temporary name; [`NewFile::commit`] renames
/// it into place.
#[derive(Debug)]
pub struct NewFile {
    temp: Option<NamedTempFile>,
    path: PathBuf,
    slot: Option<usize>,
}

impl NewFile {
    /// Starts the output `path` of an export, refused when it is one of `inputs`.
    /// Dropped before [`NewFile::commit`] (a failure), its partial file is removed.
    pub fn create(path: &Path, inputs: &Inputs) -> anyhow::Result<NewFile> {
        NewFile::open(path, inputs, false)
    }

    /// Starts the trace of a recording at `path`. Its partial file is kept if sonda dies
    /// before [`NewFile::commit`] (SIGKILL, a panic); [`NewFile::discard`] removes it.
    pub fn recording(path: &Path) -> anyhow::Result<NewFile> {
        NewFile::open(path, &Inputs::none(), true)
    }

    fn open(path: &Path, inputs: &Inputs, keep: bool) -> anyhow::Result<NewFile> {
        inputs.check(path)?;
        let cannot = || format!("cannot write {}", path.display());
        refuse_directory(path).with_context(cannot)?;
        let (dir, name) = split(path).with_context(cannot)?;
        let temp = tempfile::Builder::new()
            .prefix(&prefix_of(name))
            .suffix(PARTIAL_SUFFIX)
            .rand_bytes(RANDOM_LEN)
            .disable_cleanup(keep)
            .make_in(&dir, create_exclusive)
            .with_context(cannot)?;
        let slot = if keep { None } else { register(temp.path()) };
        Ok(NewFile {
            temp: Some(temp),
            path: path.to_path_buf(),
            slot,
        })
    }

    /// Where the output goes once complete.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where it is written until then.
    #[cfg(test)]
    pub fn partial_path(&self) -> &Path {
        self.temp().path()
    }

    fn temp(&self) -> &NamedTempFile {
        self.temp.as_ref().expect("present until commit or discard")
    }

    /// A handle on the file, for a writer that owns its file (the same open file).
    pub fn handle(&self) -> anyhow::Result<File> {
        self.temp()
            .as_file()
            .try_clone()
            .with_context(|| format!("cannot write {}", self.path.display()))
    }

    /// Puts the complete file in place: fsync (a late write error fails here, with the
    /// old file still in place), then rename over `path`.
    pub fn commit(mut self) -> anyhow::Result<()> {
        let temp = self.temp.take().expect("committed once");
        let cannot = || format!("cannot write {}", self.path.display());
        if let Err(e) = temp.as_file().sync_all() {
            self.temp = Some(temp);
            return Err(e).with_context(cannot);
        }
        if let Err(e) = temp.persist(&self.path) {
            let partial = e.file.path().display().to_string();
            self.temp = Some(e.file);
            return Err(anyhow!(e.error).context(format!(
                "cannot rename {partial} to {}",
                self.path.display()
            )));
        }
        unregister(self.slot.take());
        Ok(())
    }

    /// Gives the output up: its partial file is removed, the old file stays.
    pub fn discard(mut self) {
        if let Some(temp) = self.temp.take() {
            let _ = fs::remove_file(temp.path());
        }
        unregister(self.slot.take());
    }
}

impl Drop for NewFile {
    fn drop(&mut self) {
        // Removes the partial file first (unless it is a recording's), then forgets it.
        drop(self.temp.take());
        unregister(self.slot.take());
    }
}

/// An output directory being filled under its temporary name (the samples of a model);
/// [`NewDir::commit`] puts it in place of the old one.
#[derive(Debug)]
pub struct NewDir {
    temp: Option<TempDir>,
    path: PathBuf,
    slots: Vec<usize>,
}

impl NewDir {
    /// Starts the output directory `path`, refused when it is or holds one of `inputs`,
    /// or when it exists and holds a file `ours` does not recognise as one sonda wrote
    /// (the old directory is removed once the new one is in place).
    pub fn create(
        path: &Path,
        inputs: &Inputs,
        ours: impl Fn(&OsStr) -> bool,
    ) -> anyhow::Result<NewDir> {
        inputs.check_dir(path)?;
        let cannot = || format!("cannot write {}", path.display());
        match fs::symlink_metadata(path) {
            Ok(m) if m.is_dir() => {
                for entry in fs::read_dir(path).with_context(cannot)? {
                    let entry = entry.with_context(cannot)?;
                    let is_file = entry.file_type().is_ok_and(|t| t.is_file());
                    if !is_file || !ours(&entry.file_name()) {
                        bail!(
                            "{} holds {}, which sonda did not write: remove it or choose another output",
                            path.display(),
                            entry.path().display()
                        );
                    }
                }
            }
            Ok(_) => bail!(
                "cannot write {}: it exists and is not a directory",
                path.display()
            ),
            Err(_) => {}
        }
        let (dir, name) = split(path).with_context(cannot)?;
        let temp = tempfile::Builder::new()
            .prefix(&prefix_of(name))
            .suffix(PARTIAL_SUFFIX)
            .rand_bytes(RANDOM_LEN)
            .permissions(Permissions::from_mode(DIR_MODE))
            .tempdir_in(&dir)
            .with_context(cannot)?;
        fs::set_permissions(temp.path(), Permissions::from_mode(DIR_MODE)).with_context(cannot)?;
        let slots = register(temp.path()).into_iter().collect();
        Ok(NewDir {
            temp: Some(temp),
            path: path.to_path_buf(),
            slots,
        })
    }

    /// Where the directory goes once complete, as an absolute path (what a model names:
    /// JMT reads the samples from there).
    pub fn absolute_path(&self) -> anyhow::Result<PathBuf> {
        let (dir, name) = split(&self.path)?;
        let dir = fs::canonicalize(&dir)
            .with_context(|| format!("cannot write {}", self.path.display()))?;
        Ok(dir.join(name))
    }

    /// Creates the file `name` in the directory (0600, exclusively).
    pub fn create_file(&mut self, name: &str) -> anyhow::Result<File> {
        let temp = self.temp.as_ref().expect("present until commit");
        let path = temp.path().join(name);
        let file = create_exclusive(&path)
            .with_context(|| format!("cannot write {}", self.path.join(name).display()))?;
        self.slots.extend(register(&path));
        Ok(file)
    }

    /// Puts the directory in place of the old one (if any), then removes the old one.
    pub fn commit(mut self) -> anyhow::Result<()> {
        let temp = self.temp.take().expect("committed once");
        let cannot = || format!("cannot write {}", self.path.display());
        let new = temp.keep();
        let put = || -> anyhow::Result<()> {
            if fs::symlink_metadata(&self.path).is_err() {
                return fs::rename(&new, &self.path).with_context(cannot);
            }
            // The old directory moves aside to a name of its own, the new one takes its
            // place, and the old one goes.
            let (dir, name) = split(&self.path).with_context(cannot)?;
            let mut old_prefix = prefix_of(name);
            old_prefix.push("old.");
            let aside = tempfile::Builder::new()
                .prefix(&old_prefix)
                .rand_bytes(RANDOM_LEN)
                .permissions(Permissions::from_mode(DIR_MODE))
                .tempdir_in(&dir)
                .with_context(cannot)?
                .keep();
            fs::rename(&self.path, &aside).with_context(cannot)?;
            if let Err(e) = fs::rename(&new, &self.path) {
                let _ = fs::rename(&aside, &self.path);
                let _ = fs::remove_dir(&aside);
                return Err(e).with_context(cannot);
            }
            let _ = fs::remove_dir_all(&aside);
            Ok(())
        };
        let result = put();
        if result.is_err() {
            let _ = fs::remove_dir_all(&new);
        }
        for slot in self.slots.drain(..) {
            unregister(Some(slot));
        }
        result
    }
}

impl Drop for NewDir {
    fn drop(&mut self) {
        drop(self.temp.take());
        for slot in self.slots.drain(..) {
            unregister(Some(slot));
        }
    }
}

/// Partial outputs the stop signals remove: C strings, published for the signal
/// handler. A path is leaked, not freed, when it leaves its slot (the handler may be
/// reading it on another thread); a command creates a bounded number of outputs.
static PARTIAL: [AtomicPtr<libc::c_char>; SLOTS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];
/// Partial outputs removed on a signal at most (a model has two sample files per
/// method); past it, an output is not removed on a signal.
const SLOTS: usize = 4096;

/// Publishes `path` for the signal handler; its slot, or `None` when all are taken.
fn register(path: &Path) -> Option<usize> {
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    let raw = c.into_raw();
    for (i, slot) in PARTIAL.iter().enumerate() {
        if slot
            .compare_exchange(
                std::ptr::null_mut(),
                raw,
                Ordering::SeqCst,
                Ordering::SeqCst,
            )
            .is_ok()
        {
            return Some(i);
        }
    }
    // SAFETY: `raw` comes from `CString::into_raw` just above and was published nowhere.
    drop(unsafe { CString::from_raw(raw) });
    None
}

/// Takes a path out of its slot (committed or removed: nothing left to remove).
fn unregister(slot: Option<usize>) {
    if let Some(i) = slot {
        PARTIAL[i].store(std::ptr::null_mut(), Ordering::SeqCst);
    }
}

/// Runs in signal context: atomic loads, `unlink`, `rmdir` and `raise` only, all
/// async-signal-safe.
extern "C" fn remove_partial(sig: libc::c_int) {
    // Files first, so that the directories holding them are empty after.
    for slot in &PARTIAL {
        let p = slot.load(Ordering::SeqCst);
        if !p.is_null() {
            // SAFETY: a published pointer is a NUL-terminated string never freed.
            unsafe { libc::unlink(p) };
        }
    }
    for slot in &PARTIAL {
        let p = slot.load(Ordering::SeqCst);
        if !p.is_null() {
            // SAFETY: as above.
            unsafe { libc::rmdir(p) };
        }
    }
    // SA_RESETHAND restored the default action; the signal, blocked while its handler
    // runs, takes it once the handler returns.
    // SAFETY: raise has no memory-safety preconditions.
    unsafe { libc::raise(sig) };
}

/// Makes Ctrl-C, SIGTERM and SIGHUP remove the partial outputs, then end sonda as they
/// would have: for the commands that write files and handle no signal themselves
/// (`paraver`, `merge`, `model`). A recording handles its signals itself and keeps its
/// partial trace.
pub fn remove_partial_on_signals() -> anyhow::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: an all-zero sigaction is valid; the fields set below make it a plain
        // handler with an empty mask, reset to the default action on delivery;
        // `remove_partial` makes only async-signal-safe calls.
        let rc = unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = remove_partial as *const () as usize;
            act.sa_flags = libc::SA_RESETHAND;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(sig, &act, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(io::Error::last_os_error()).context("cannot install signal handlers");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn an_output_appears_only_when_committed_and_is_the_owners_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.trace");
        std::fs::write(&path, "old").unwrap();
        let out = NewFile::create(&path, &Inputs::none()).unwrap();
        let partial = out.partial_path().to_path_buf();
        let name = partial.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("out.trace.") && name.ends_with(".partial"),
            "{name}"
        );
        out.handle().unwrap().write_all(b"new").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "old");
        out.commit().unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            FILE_MODE
        );
        assert_eq!(names_in(dir.path()), ["out.trace"]);
    }

    #[test]
    fn a_dropped_output_leaves_the_old_file_and_a_discarded_recording_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x");
        std::fs::write(&path, "old").unwrap();
        let out = NewFile::create(&path, &Inputs::none()).unwrap();
        out.handle().unwrap().write_all(b"half").unwrap();
        drop(out);
        assert_eq!(names_in(dir.path()), ["x"]);
        assert_eq!(fs::read_to_string(&path).unwrap(), "old");
        // A recording's partial trace outlives its NewFile unless discarded.
        let rec = NewFile::recording(&path).unwrap();
        let partial = rec.partial_path().to_path_buf();
        std::mem::forget(rec);
        assert!(partial.exists());
        fs::remove_file(&partial).unwrap();
        NewFile::recording(&path).unwrap().discard();
        assert_eq!(names_in(dir.path()), ["x"]);
    }

    #[test]
    fn an_input_is_refused_by_path_symlink_and_hard_link() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::write(&a, "input").unwrap();
        let hard = dir.path().join("h");
        fs::hard_link(&a, &hard).unwrap();
        let soft = dir.path().join("s");
        std::os::unix::fs::symlink(&a, &soft).unwrap();
        let inputs = Inputs::new(&[&a]);
        for out in [&a, &hard, &soft, &dir.path().join(".").join("a")] {
            let err = NewFile::create(out, &inputs).unwrap_err().to_string();
            assert!(err.contains("choose another output"), "{err}");
        }
        assert!(NewFile::create(&dir.path().join("b"), &inputs).is_ok());
        assert_eq!(fs::read_to_string(&a).unwrap(), "input");
        // A directory holding an input is refused too.
        let err = inputs.check_dir(dir.path()).unwrap_err().to_string();
        assert!(err.contains("holds the input"), "{err}");
    }

    #[test]
    fn a_planted_symlink_is_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let out = dir.path().join("out");
        std::os::unix::fs::symlink(&victim, &out).unwrap();
        let new = NewFile::create(&out, &Inputs::none()).unwrap();
        new.handle().unwrap().write_all(b"export").unwrap();
        new.commit().unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(fs::read_to_string(&out).unwrap(), "export");
        assert!(!fs::symlink_metadata(&out).unwrap().file_type().is_symlink());
    }

    #[test]
    fn a_directory_output_is_an_error_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let err = format!(
            "{:#}",
            NewFile::create(dir.path(), &Inputs::none()).unwrap_err()
        );
        assert!(err.contains("Is a directory"), "{err}");
        assert!(NewFile::create(&dir.path().join("no/such/x"), &Inputs::none()).is_err());
    }

    #[test]
    fn a_long_name_still_gets_a_temporary_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("n".repeat(255));
        let out = NewFile::create(&path, &Inputs::none()).unwrap();
        out.commit().unwrap();
        assert!(path.exists());
    }

    #[test]
    fn a_directory_replaces_the_old_one_only_when_complete() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.samples");
        fs::create_dir(&path).unwrap();
        fs::write(path.join("old.txt"), "1").unwrap();
        let ours = |n: &OsStr| n.to_string_lossy().ends_with(".txt");
        let mut new = NewDir::create(&path, &Inputs::none(), ours).unwrap();
        new.create_file("new.txt").unwrap().write_all(b"2").unwrap();
        assert_eq!(names_in(&path), ["old.txt"]);
        new.commit().unwrap();
        assert_eq!(names_in(&path), ["new.txt"]);
        assert_eq!(names_in(dir.path()), ["m.samples"]);
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            DIR_MODE
        );
        // A failed one leaves the old directory as it was.
        let mut failed = NewDir::create(&path, &Inputs::none(), ours).unwrap();
        failed.create_file("half.txt").unwrap();
        drop(failed);
        assert_eq!(names_in(&path), ["new.txt"]);
        assert_eq!(names_in(dir.path()), ["m.samples"]);
        // A directory holding someone else's files is not replaced.
        fs::write(path.join("notes.md"), "mine").unwrap();
        let err = NewDir::create(&path, &Inputs::none(), ours)
            .unwrap_err()
            .to_string();
        assert!(err.contains("notes.md"), "{err}");
    }
}
