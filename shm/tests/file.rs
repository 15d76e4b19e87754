//! The buffer file itself: made so that no mapping of it can fault, readable by its
//! owner only, never through a symlink, and locked by its collector for its life.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use sonda_shm::config::AgentConfig;
use sonda_shm::{Clock, CreateError, Geometry, OpenError, Region};

fn geo() -> Geometry {
    Geometry {
        slots: 8,
        ring_len: 64 << 10,
        meta_len: 1 << 20,
    }
}

fn create(path: &Path) -> Result<Region, CreateError> {
    Region::create(path, geo(), Clock::Monotonic, &AgentConfig::default())
}

/// Every byte of the file, slots and log included, is allocated before anyone maps it:
/// a sparse file on a full tmpfs faults (SIGBUS) the process that first touches a page.
#[test]
fn every_byte_is_reserved_and_only_the_owner_may_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("buf");
    let _collector = create(&path).unwrap();
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.len(), geo().file_len() as u64);
    assert!(
        meta.blocks() * 512 >= meta.len(),
        "{} of {} bytes allocated",
        meta.blocks() * 512,
        meta.len()
    );
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
}

/// A file that is not fully allocated (no collector of this version makes one: an
/// older collector's, or a file someone else put there) is refused before it is
/// mapped, and so is anything that is not a regular file.
#[test]
fn an_agent_refuses_a_sparse_file_a_symlink_and_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good");
    let _collector = create(&good).unwrap();
    // The same bytes where they are not zero, the rest a hole.
    let bytes = std::fs::read(&good).unwrap();
    let sparse = dir.path().join("sparse");
    let file = std::fs::File::create(&sparse).unwrap();
    file.set_len(bytes.len() as u64).unwrap();
    use std::os::unix::fs::FileExt;
    file.write_all_at(&bytes[..4096], 0).unwrap();
    drop(file);
    let Err(OpenError::Layout(why)) = Region::open(&sparse) else {
        panic!("a sparse file was mapped");
    };
    assert!(why.contains("not reserved"), "{why}");

    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&good, &link).unwrap();
    assert!(matches!(Region::open(&link), Err(OpenError::Io(_))));
    assert!(Region::open(dir.path()).is_err());
    assert!(Region::open(&good).is_ok());
}

/// A name that exists (a planted symlink, dangling or not, or a file) is never
/// written through: creation fails and the symlink's target is untouched.
#[test]
fn creation_never_follows_or_reuses_a_name() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"keep me").unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    assert!(matches!(create(&link), Err(CreateError::Io(_))));
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
    let dangling = dir.path().join("dangling");
    std::os::unix::fs::symlink(dir.path().join("nothing"), &dangling).unwrap();
    assert!(create(&dangling).is_err());
    assert!(!dir.path().join("nothing").exists());
    assert!(create(&victim).is_err());
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep me");
}

/// The collector's lock says at once whether it lives; here the collector is a
/// region dropped in this process (the end-to-end tests kill real ones).
#[test]
fn an_agent_sees_whether_its_collector_lives() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("buf");
    let collector = create(&path).unwrap();
    let agent = Region::open(&path).unwrap();
    assert!(agent.collector_alive());
    assert!(agent.collector_alive(), "testing does not take the lock");
    let other = Region::open(&path).unwrap();
    assert!(other.collector_alive() && agent.collector_alive());
    drop(collector);
    assert!(!agent.collector_alive());
    assert!(!other.collector_alive());
}

/// A file system that cannot hold the file: the reservation fails with its own error,
/// before anything is mapped. A file larger than any file system may hold (8 EiB)
/// stands in for a full one without filling the test machine's disk (a small tmpfs of
/// our own needs root and a mount namespace: the end-to-end tests do that).
#[test]
fn a_reservation_that_fails_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(dir.path().join("huge"))
        .unwrap();
    let huge = Geometry {
        slots: u32::MAX,
        ring_len: 1 << 31,
        meta_len: 1 << 20,
    };
    match Region::create_on(file, huge, Clock::Monotonic, &AgentConfig::default()) {
        Err(CreateError::Reserve { bytes, .. }) => assert_eq!(bytes, huge.file_len() as u64),
        Err(e) => panic!("not a reservation error: {e}"),
        Ok(_) => panic!("8 EiB reserved"),
    }
}
