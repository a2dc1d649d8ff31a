//! What a scratch target directory's last build compiled, by content: the record that lets
//! an unchanged switched (or fallback) build stay fresh from one battery run to the next.
//!
//! Switch mode writes the files it instruments into its scratch copy at every run and puts
//! the originals back at the end. Each write gives the file a new modification time, and
//! cargo judges a workspace member's artifacts by modification times (an input newer than
//! the fingerprint's start of the build is stale), so every run would recompile the member
//! even when the bytes are those its artifacts were built from.
//!
//! The record, `<target>/harness-built-sources.json`, is written after a build in that
//! target directory has succeeded and passed the harness's own checks: for each file the
//! harness writes into the scratch copy, the SHA-256 of the bytes it held and its
//! modification time. It is removed before any build or check starts in that directory
//! ([`forget`]), so a record that exists describes the last build there. Before the next
//! build, [`restore_times`] gives each recorded file whose bytes hash the same its recorded
//! modification time again: cargo then finds it as it was when its artifacts were built. A
//! file whose bytes differ keeps its new time, and cargo rebuilds from it. Files the harness
//! does not write are left to cargo's own comparison of times.
//!
//! The same bytes under the same time are the same input, so the record never makes cargo
//! reuse an artifact built from other bytes; it only stops cargo from rebuilding one built
//! from these. [`Restored::proves`] tells the STALE-BUILD check that an artifact cargo
//! reports fresh holds a given file's bytes: that check passed when the record was written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::battery::execute::stop::{Stop, refuse};
use crate::battery::report::refusal::RefusalKind;
use crate::battery::tree::sha256_hex;

/// The record's file name in the target directory it describes.
pub const RECORD: &str = "harness-built-sources.json";

const SCHEMA: &str = "harness-built-sources/1";

/// One file as the recorded build compiled it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    /// SHA-256 (hex) of its bytes.
    sha256: String,
    /// Its modification time: seconds since the Unix epoch and the nanoseconds after them.
    mtime_secs: u64,
    mtime_nanos: u32,
}

#[derive(Debug, Serialize, Deserialize)]
struct Record {
    schema: String,
    /// Relative path (to the scratch root) -> entry.
    files: BTreeMap<PathBuf, Entry>,
}

/// What [`restore_times`] found: the recorded files whose bytes are still those the last
/// build compiled.
#[derive(Debug, Default, Clone)]
pub struct Restored {
    same: std::collections::BTreeSet<PathBuf>,
}

impl Restored {
    /// Whether `rel` (relative to the scratch root) holds the bytes the last build in the
    /// target directory compiled, with their time given back: an artifact cargo reports
    /// fresh was built from them.
    pub fn proves(&self, rel: &Path) -> bool {
        self.same.contains(rel)
    }

    /// How many recorded files held their recorded bytes.
    pub fn len(&self) -> usize {
        self.same.len()
    }

    /// Whether no recorded file held its recorded bytes (or there was no record).
    pub fn is_empty(&self) -> bool {
        self.same.is_empty()
    }
}

fn fault(path: &Path, what: &str, e: impl std::fmt::Display) -> Stop {
    refuse(
        RefusalKind::HarnessFault,
        format!("{}: cannot {what}: {e}", path.display()),
    )
}

/// Removes the record of `target` (a build or check is about to change what it holds).
/// Errors: HARNESS-FAULT naming the record when it exists and cannot be removed.
pub(crate) fn forget(target: &Path) -> Result<(), Stop> {
    let path = target.join(RECORD);
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(fault(&path, "remove", e)),
        _ => Ok(()),
    }
}

/// Records `files` (relative to `root`) as the last build in `target` compiled them: their
/// hashes and modification times now. Call it after that build succeeded and its checks
/// passed, before anything writes them again. Errors: HARNESS-FAULT naming the file that
/// cannot be read or the record that cannot be written.
pub(crate) fn record<'a>(
    target: &Path,
    root: &Path,
    files: impl IntoIterator<Item = &'a Path>,
) -> Result<(), Stop> {
    let mut rec = Record {
        schema: SCHEMA.into(),
        files: BTreeMap::new(),
    };
    for rel in files {
        let abs = root.join(rel);
        let bytes = std::fs::read(&abs).map_err(|e| fault(&abs, "read", e))?;
        let mtime = std::fs::metadata(&abs)
            .and_then(|m| m.modified())
            .map_err(|e| fault(&abs, "read the modification time of", e))?;
        let since = mtime.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
        rec.files.insert(
            rel.to_path_buf(),
            Entry {
                sha256: sha256_hex(&bytes),
                mtime_secs: since.as_secs(),
                mtime_nanos: since.subsec_nanos(),
            },
        );
    }
    let path = target.join(RECORD);
    let text = serde_json::to_string_pretty(&rec).map_err(|e| fault(&path, "encode", e))?;
    std::fs::write(&path, text).map_err(|e| fault(&path, "write", e))
}

/// Gives every file of `target`'s record (relative to `root`) whose bytes hash as recorded
/// its recorded modification time, and returns which did. No record, or one that cannot be
/// read or has another schema, restores nothing (the build then runs as cargo judges it).
/// Errors: HARNESS-FAULT naming a file whose time cannot be set.
pub(crate) fn restore_times(target: &Path, root: &Path) -> Result<Restored, Stop> {
    let mut out = Restored::default();
    let Ok(text) = std::fs::read_to_string(target.join(RECORD)) else {
        return Ok(out);
    };
    let Ok(rec) = serde_json::from_str::<Record>(&text) else {
        return Ok(out);
    };
    if rec.schema != SCHEMA {
        return Ok(out);
    }
    for (rel, e) in rec.files {
        let abs = root.join(&rel);
        let Ok(bytes) = std::fs::read(&abs) else {
            continue;
        };
        if sha256_hex(&bytes) != e.sha256 {
            continue;
        }
        let when = UNIX_EPOCH + Duration::new(e.mtime_secs, e.mtime_nanos);
        let now = std::fs::metadata(&abs).and_then(|m| m.modified()).ok();
        if now != Some(when) {
            set_mtime(&abs, when)?;
        }
        out.same.insert(rel);
    }
    Ok(out)
}

fn set_mtime(path: &Path, when: SystemTime) -> Result<(), Stop> {
    std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(when))
        .map_err(|e| fault(path, "set the modification time of", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mtime(p: &Path) -> SystemTime {
        std::fs::metadata(p).unwrap().modified().unwrap()
    }

    #[test]
    fn the_recorded_time_comes_back_only_for_the_recorded_bytes() {
        let d = tempfile::tempdir().unwrap();
        let (root, target) = (d.path().join("tree"), d.path().join("target"));
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(&target).unwrap();
        let (a, b) = (Path::new("src/a.rs"), Path::new("src/b.rs"));
        std::fs::write(root.join(a), "fn a() {}").unwrap();
        std::fs::write(root.join(b), "fn b() {}").unwrap();
        let old = UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789);
        set_mtime(&root.join(a), old).unwrap();
        set_mtime(&root.join(b), old).unwrap();
        record(&target, &root, [a, b]).unwrap();

        // Both written again: a with the same bytes, b with others.
        std::fs::write(root.join(a), "fn a() {}").unwrap();
        std::fs::write(root.join(b), "fn b() { loop {} }").unwrap();
        assert_ne!(mtime(&root.join(a)), old);
        let r = restore_times(&target, &root).unwrap();
        assert!(r.proves(a) && !r.proves(b));
        assert_eq!(r.len(), 1);
        assert_eq!(mtime(&root.join(a)), old);
        assert_ne!(mtime(&root.join(b)), old);

        // Forgotten: nothing restored, nothing proven.
        std::fs::write(root.join(a), "fn a() {}").unwrap();
        forget(&target).unwrap();
        forget(&target).unwrap();
        let r = restore_times(&target, &root).unwrap();
        assert!(r.is_empty() && !r.proves(a));
        assert_ne!(mtime(&root.join(a)), old);
    }

    #[test]
    fn a_record_of_another_schema_or_unreadable_restores_nothing() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("f"), "x").unwrap();
        std::fs::write(d.path().join(RECORD), "{not json").unwrap();
        assert!(restore_times(d.path(), d.path()).unwrap().is_empty());
        record(d.path(), d.path(), [Path::new("f")]).unwrap();
        let text = std::fs::read_to_string(d.path().join(RECORD)).unwrap();
        std::fs::write(d.path().join(RECORD), text.replace(SCHEMA, "other/9")).unwrap();
        assert!(restore_times(d.path(), d.path()).unwrap().is_empty());
    }
}
