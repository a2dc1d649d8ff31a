//! Changing the tree under test and putting it back.
//!
//! Apply a mutation and restore it, the files a run creates, and the journals that let a
//! later command undo a killed run (the tree's file set and fingerprint are
//! [`crate::battery::tree`]'s).
//!
//! Journal: before a file is mutated, its original bytes and a JSON record (owner process,
//! file, SHA-256 of the original and the mutated bytes) are written under the host state
//! directory (`<state>/journal/`). Restoring verifies that the file still holds the mutated
//! bytes: if someone edited it meanwhile, their version is left in place, the original is
//! kept beside the journal, and the error says where. A run killed with SIGKILL leaves the
//! journal behind; the next `harness` command restores from it first.
//!
//! Created files: the run's test processes run under [`crate::cargo::RUN_UMASK`], so every
//! file and folder they create carries its mark ([`made_by_run`]: readable by others but
//! not by the group, a mode no usual umask gives). Before the tests run in the user's tree,
//! the paths of its file set are journaled (`<state>/journal/created-<pid>.tree`);
//! afterwards, and after a SIGKILL in the next command, a new file with the mark is removed
//! and a new file without it (made by someone else meanwhile: the user, an editor) is kept
//! and named.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::battery::tree::{TreeError, TreeScan, io, scan, sha256_hex};
use crate::system::process::ProcessId;

/// Removes the files (and then empty directories) present in `after` but not in `before`,
/// whoever made them: for a tree only the run writes in (switch mode's scratch copy).
/// Returns the removed files' relative paths.
pub fn remove_created(
    root: &Path,
    before: &TreeScan,
    after: &TreeScan,
) -> Result<Vec<PathBuf>, TreeError> {
    let mut removed = Vec::new();
    for p in after.files.keys() {
        if !before.files.contains_key(p) {
            let abs = root.join(p);
            fs::remove_file(&abs).map_err(io(&abs, "remove created file"))?;
            removed.push(p.clone());
        }
    }
    remove_new_dirs(root, before, after, |_| true);
    Ok(removed)
}

/// Whether a file or folder carries the mark of [`crate::cargo::RUN_UMASK`]: readable by
/// others, not by the group. A symbolic link never does (its mode is always `0o777`).
pub fn made_by_run(meta: &fs::Metadata) -> bool {
    !meta.file_type().is_symlink() && meta.permissions().mode() & 0o044 == 0o004
}

/// The files a test phase left in the user's tree that were not there before it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settled {
    /// Made by the run (they carry its mark) and removed.
    pub removed: Vec<PathBuf>,
    /// Made by someone else (no mark): kept where they are.
    pub kept: Vec<PathBuf>,
}

/// Removes the files present in `after` but not in `before` that carry the run's mark
/// ([`made_by_run`]), then the new folders that carry it once empty; keeps every other new
/// file and names it in [`Settled::kept`].
///
/// Errors: [`TreeError::Io`] naming the file that could not be inspected or removed.
pub fn settle_created(
    root: &Path,
    before: &TreeScan,
    after: &TreeScan,
) -> Result<Settled, TreeError> {
    let mut out = Settled::default();
    for p in after.files.keys() {
        if before.files.contains_key(p) {
            continue;
        }
        let abs = root.join(p);
        let meta = match fs::symlink_metadata(&abs) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io(&abs, "stat created file")(e)),
        };
        if made_by_run(&meta) {
            fs::remove_file(&abs).map_err(io(&abs, "remove created file"))?;
            out.removed.push(p.clone());
        } else {
            out.kept.push(p.clone());
        }
    }
    remove_new_dirs(root, before, after, |abs| {
        fs::symlink_metadata(abs).is_ok_and(|m| made_by_run(&m))
    });
    Ok(out)
}

/// Removes the directories of `after` absent from `before` that `ours` accepts, deepest
/// first, each only when empty (anything left in one stays, and the fingerprint reports it).
fn remove_new_dirs(root: &Path, before: &TreeScan, after: &TreeScan, ours: impl Fn(&Path) -> bool) {
    let mut new_dirs: Vec<&PathBuf> = after.dirs.difference(&before.dirs).collect();
    new_dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    for d in new_dirs {
        let abs = root.join(d);
        if ours(&abs) {
            let _ = fs::remove_dir(&abs);
        }
    }
}

/// The file set of a user's tree before its tests ran, journaled so that the next command
/// can remove exactly the files the run created if the run is killed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TreeJournal {
    /// Record format version.
    pub version: u32,
    /// The harness process whose tests run in the tree.
    pub owner: ProcessId,
    /// The tree's root (absolute).
    pub root: PathBuf,
    /// Directories never walked (absolute), as in [`scan`].
    pub exclude: Vec<PathBuf>,
    /// The files of the set before the tests ran (relative).
    pub files: Vec<PathBuf>,
    /// Its directories (relative).
    pub dirs: Vec<PathBuf>,
}

const TREE_JOURNAL_VERSION: u32 = 1;

/// Journals `before`, the file set of `root`, for this process; returns the record's path
/// (remove it with [`forget_tree`] once the created files are settled).
///
/// Errors: [`TreeError::Io`] naming the record.
pub fn journal_tree(
    state: &Path,
    root: &Path,
    exclude: &[PathBuf],
    before: &TreeScan,
) -> Result<PathBuf, TreeError> {
    let dir = journal_dir(state);
    fs::create_dir_all(&dir).map_err(io(&dir, "create journal directory"))?;
    let owner = ProcessId::current();
    let record = TreeJournal {
        version: TREE_JOURNAL_VERSION,
        owner,
        root: root.to_path_buf(),
        exclude: exclude.to_vec(),
        files: before.files.keys().cloned().collect(),
        dirs: before.dirs.iter().cloned().collect(),
    };
    let path = dir.join(format!("created-{}.tree", owner.pid));
    let json = serde_json::to_vec(&record).expect("tree journal serializes");
    write_synced(&path, &json)?;
    Ok(path)
}

/// Removes a record written by [`journal_tree`].
pub fn forget_tree(record: &Path) {
    let _ = fs::remove_file(record);
}

/// One tree journal of a dead run, settled by [`recover_created`].
#[derive(Debug)]
pub struct RecoveredTree {
    /// The record.
    pub journal: TreeJournal,
    /// What was removed and what was kept, or why the tree could not be settled.
    pub result: Result<Settled, TreeError>,
}

/// Settles the created files of every tree journal whose owner is no longer alive (a run
/// killed while its tests ran): removes the new files that carry the run's mark and keeps
/// the others. Journals of live processes are left alone.
///
/// Errors: [`TreeError::BadJournal`] for a record that cannot be parsed; I/O errors naming
/// the path.
pub fn recover_created(state: &Path) -> Result<Vec<RecoveredTree>, TreeError> {
    let mut out = Vec::new();
    for (path, journal) in dead_journals::<TreeJournal>(state, "tree", |j| &j.owner)? {
        let before = TreeScan {
            files: journal.files.iter().map(|f| (f.clone(), None)).collect(),
            dirs: journal.dirs.iter().cloned().collect(),
        };
        let result = scan(&journal.root, &journal.exclude)
            .and_then(|after| settle_created(&journal.root, &before, &after));
        if result.is_ok() {
            forget_tree(&path);
        }
        out.push(RecoveredTree { journal, result });
    }
    Ok(out)
}

/// A journal record: everything needed to put one mutated file back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Journal {
    /// Record format version.
    pub version: u32,
    /// The harness process that applied the mutation.
    pub owner: ProcessId,
    /// Catalog path.
    pub catalog: PathBuf,
    /// Mutation id.
    pub mutation: String,
    /// Absolute path of the mutated file.
    pub file: PathBuf,
    /// SHA-256 of the original bytes.
    pub original_sha256: String,
    /// SHA-256 of the mutated bytes.
    pub mutated_sha256: String,
    /// Where the original bytes are kept while the mutation is applied.
    pub original_copy: PathBuf,
}

const JOURNAL_VERSION: u32 = 1;

fn journal_dir(state: &Path) -> PathBuf {
    state.join("journal")
}

/// Writes `bytes` to `path` through a sibling temporary file and a rename, keeping the
/// permissions of the file it replaces, and syncs it.
fn replace_file(path: &Path, bytes: &[u8]) -> Result<(), TreeError> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let tmp = path.with_file_name(format!(".{}.harness-tmp", name.unwrap_or_default()));
    let perms = fs::metadata(path).map(|m| m.permissions()).ok();
    {
        let mut f = fs::File::create(&tmp).map_err(io(&tmp, "create"))?;
        f.write_all(bytes).map_err(io(&tmp, "write"))?;
        f.sync_all().map_err(io(&tmp, "sync"))?;
    }
    if let Some(perms) = perms {
        fs::set_permissions(&tmp, perms).map_err(io(&tmp, "set permissions"))?;
    }
    fs::rename(&tmp, path).map_err(io(path, "rename into place"))
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), TreeError> {
    let tmp = path.with_extension("tmp");
    {
        let mut f = fs::File::create(&tmp).map_err(io(&tmp, "create"))?;
        f.write_all(bytes).map_err(io(&tmp, "write"))?;
        f.sync_all().map_err(io(&tmp, "sync"))?;
    }
    fs::rename(&tmp, path).map_err(io(path, "rename into place"))
}

/// A mutation applied to one file; restore it with [`Applied::restore`]. Dropping it
/// without restoring (a panic unwinding) restores too.
#[derive(Debug)]
pub struct Applied {
    journal: Journal,
    journal_path: PathBuf,
    original: Vec<u8>,
    mutated: Vec<u8>,
    done: bool,
}

/// What a restore found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestoreOutcome {
    /// The file held the mutated bytes and now holds the original ones (verified).
    Restored,
    /// The file already held the original bytes.
    AlreadyOriginal,
}

/// Journals and applies a mutation: writes the original bytes and the journal record under
/// `state`, verifies the file still holds `original`, then writes `mutated`.
///
/// Errors: [`TreeError::ChangedBeforeApply`] if the file changed since the drift check;
/// I/O errors naming the path.
pub fn apply(
    state: &Path,
    catalog: &Path,
    mutation: &str,
    file: &Path,
    original: &[u8],
    mutated: &[u8],
) -> Result<Applied, TreeError> {
    let dir = journal_dir(state);
    fs::create_dir_all(&dir).map_err(io(&dir, "create journal directory"))?;
    let key = sha256_hex(file.to_string_lossy().as_bytes());
    let key = &key[..16];
    let original_copy = dir.join(format!("{key}.original"));
    let journal_path = dir.join(format!("{key}.json"));
    let current = fs::read(file).map_err(io(file, "read"))?;
    if current != original {
        return Err(TreeError::ChangedBeforeApply {
            file: file.to_path_buf(),
            mutation: mutation.to_string(),
        });
    }
    write_synced(&original_copy, original)?;
    let journal = Journal {
        version: JOURNAL_VERSION,
        owner: ProcessId::current(),
        catalog: catalog.to_path_buf(),
        mutation: mutation.to_string(),
        file: file.to_path_buf(),
        original_sha256: sha256_hex(original),
        mutated_sha256: sha256_hex(mutated),
        original_copy,
    };
    let json = serde_json::to_vec_pretty(&journal).expect("journal serializes");
    write_synced(&journal_path, &json)?;
    replace_file(file, mutated)?;
    Ok(Applied {
        journal,
        journal_path,
        original: original.to_vec(),
        mutated: mutated.to_vec(),
        done: false,
    })
}

impl Applied {
    /// Whether the file still holds exactly the mutated bytes.
    pub fn still_mutated(&self) -> Result<bool, TreeError> {
        let f = &self.journal.file;
        Ok(fs::read(f).map_err(io(f, "read"))? == self.mutated)
    }

    /// Verifies the file still holds the mutated bytes, writes the original bytes back,
    /// verifies them, and removes the journal.
    ///
    /// Errors: [`TreeError::ConcurrentEdit`] (the edited version is left in place, the
    /// original kept at the journal's `original_copy`).
    pub fn restore(mut self) -> Result<RestoreOutcome, TreeError> {
        self.done = true;
        let mutated = &self.mutated;
        restore_file(&self.journal, &self.journal_path, &self.original, &|c| {
            c == mutated.as_slice()
        })
    }
}

impl Drop for Applied {
    fn drop(&mut self) {
        if !self.done {
            self.done = true;
            let mutated = &self.mutated;
            if let Err(e) = restore_file(&self.journal, &self.journal_path, &self.original, &|c| {
                c == mutated.as_slice()
            }) {
                eprintln!("harness: restore while unwinding failed: {e}");
            }
        }
    }
}

fn restore_file(
    j: &Journal,
    journal_path: &Path,
    original: &[u8],
    is_mutated: &dyn Fn(&[u8]) -> bool,
) -> Result<RestoreOutcome, TreeError> {
    let current = fs::read(&j.file).map_err(io(&j.file, "read"))?;
    let outcome = if is_mutated(&current) {
        replace_file(&j.file, original)?;
        let back = fs::read(&j.file).map_err(io(&j.file, "read back"))?;
        if back != original {
            return Err(TreeError::Io {
                path: j.file.clone(),
                op: "verify restored bytes",
                source: std::io::Error::other("content differs from the original after writing"),
            });
        }
        RestoreOutcome::Restored
    } else if current == original {
        RestoreOutcome::AlreadyOriginal
    } else {
        // Keep both: the edit stays in the file, the original stays at its copy; the journal
        // record is retired so later commands do not trip over it again.
        let kept = j.original_copy.with_extension(format!(
            "{}.original",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0)
        ));
        fs::rename(&j.original_copy, &kept).map_err(io(&kept, "keep original"))?;
        let _ = fs::remove_file(journal_path);
        return Err(TreeError::ConcurrentEdit {
            file: j.file.clone(),
            mutation: j.mutation.clone(),
            original_copy: kept,
        });
    };
    let _ = fs::remove_file(&j.original_copy);
    fs::remove_file(journal_path).map_err(io(journal_path, "remove journal"))?;
    Ok(outcome)
}

/// One journal found and handled by [`recover`].
#[derive(Debug)]
pub struct Recovered {
    /// The record.
    pub journal: Journal,
    /// What restoring found, or why it failed.
    pub result: Result<RestoreOutcome, TreeError>,
}

/// Restores every file whose journal's owner is no longer alive (a run killed before it
/// could restore). Journals of live processes (a battery running now) are left alone.
pub fn recover(state: &Path) -> Result<Vec<Recovered>, TreeError> {
    let mut out = Vec::new();
    for (path, journal) in dead_journals::<Journal>(state, "json", |j| &j.owner)? {
        let original = fs::read(&journal.original_copy)
            .map_err(io(&journal.original_copy, "read original copy"))?;
        if sha256_hex(&original) != journal.original_sha256 {
            return Err(TreeError::BadJournal {
                path: path.clone(),
                message: format!(
                    "original copy {} does not match its recorded SHA-256",
                    journal.original_copy.display()
                ),
            });
        }
        // The mutated bytes are not stored; their hash identifies them.
        let want = journal.mutated_sha256.clone();
        let result = restore_file(&journal, &path, &original, &|c| sha256_hex(c) == want);
        out.push(Recovered { journal, result });
    }
    Ok(out)
}

/// The journals named `*.EXT` in the state directory's journal folder, in path order,
/// whose owner (`owner` reads it) is no longer alive, each with its path. A missing
/// folder holds none.
///
/// Errors: [`TreeError::BadJournal`] naming a record that cannot be parsed; I/O errors
/// naming the path.
fn dead_journals<T: serde::de::DeserializeOwned>(
    state: &Path,
    ext: &str,
    owner: impl Fn(&T) -> &ProcessId,
) -> Result<Vec<(PathBuf, T)>, TreeError> {
    let dir = journal_dir(state);
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(&dir, "read journal directory")(e)),
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    paths.sort();
    let mut dead = Vec::new();
    for path in paths {
        let text = fs::read(&path).map_err(io(&path, "read journal"))?;
        let journal: T = serde_json::from_slice(&text).map_err(|e| TreeError::BadJournal {
            path: path.clone(),
            message: e.to_string(),
        })?;
        if !owner(&journal).is_alive() {
            dead.push((path, journal));
        }
    }
    Ok(dead)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Whatever the bytes (CRLF, NUL, invalid UTF-8), apply writes exactly the mutated
        /// bytes and restore brings back exactly the original ones.
        #[test]
        fn apply_then_restore_is_byte_exact(
            original in proptest::collection::vec(any::<u8>(), 0..300),
            mutated in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            prop_assume!(original != mutated);
            let ws = tempfile::tempdir().unwrap();
            let state = tempfile::tempdir().unwrap();
            let f = ws.path().join("f.bin");
            fs::write(&f, &original).unwrap();
            let applied = apply(state.path(), Path::new("c"), "m", &f, &original, &mutated).unwrap();
            prop_assert_eq!(fs::read(&f).unwrap(), mutated);
            prop_assert_eq!(applied.restore().unwrap(), RestoreOutcome::Restored);
            prop_assert_eq!(fs::read(&f).unwrap(), original);
            // Nothing but the file itself is left in the tree.
            prop_assert_eq!(fs::read_dir(ws.path()).unwrap().count(), 1);
        }
    }

    #[test]
    fn apply_restore_round_trip_keeps_crlf_bytes() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let f = ws.path().join("a.rs");
        let orig = b"fn a() {\r\n    1 + 1\r\n}\r\n".to_vec();
        fs::write(&f, &orig).unwrap();
        let mutated = b"fn a() {\r\n    1 - 1\r\n}\r\n".to_vec();
        let applied = apply(state.path(), Path::new("c.toml"), "m", &f, &orig, &mutated).unwrap();
        assert_eq!(fs::read(&f).unwrap(), mutated);
        assert!(applied.still_mutated().unwrap());
        assert_eq!(applied.restore().unwrap(), RestoreOutcome::Restored);
        assert_eq!(fs::read(&f).unwrap(), orig);
        assert_eq!(
            fs::read_dir(state.path().join("journal")).unwrap().count(),
            0
        );
    }

    #[test]
    fn concurrent_edit_keeps_both_versions() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let f = ws.path().join("a.rs");
        fs::write(&f, b"one").unwrap();
        let applied = apply(state.path(), Path::new("c"), "m", &f, b"one", b"two").unwrap();
        fs::write(&f, b"edited").unwrap();
        let err = applied.restore().unwrap_err();
        let TreeError::ConcurrentEdit { original_copy, .. } = &err else {
            panic!("{err}")
        };
        assert_eq!(fs::read(&f).unwrap(), b"edited");
        assert_eq!(fs::read(original_copy).unwrap(), b"one");
    }

    #[test]
    fn recover_restores_a_dead_owners_journal_and_skips_a_live_one() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let f = ws.path().join("a.rs");
        fs::write(&f, b"orig").unwrap();
        let applied = apply(state.path(), Path::new("c"), "m", &f, b"orig", b"mut").unwrap();
        std::mem::forget(applied);
        // Live owner (this process): left alone.
        assert!(recover(state.path()).unwrap().is_empty());
        assert_eq!(fs::read(&f).unwrap(), b"mut");
        // Pretend the owner died: point the record at a reaped child.
        let jpath = fs::read_dir(state.path().join("journal"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|x| x == "json"))
            .unwrap();
        let mut j: Journal = serde_json::from_slice(&fs::read(&jpath).unwrap()).unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        j.owner = ProcessId {
            pid: child.id(),
            start_ticks: Some(0),
        };
        child.wait().unwrap();
        fs::write(&jpath, serde_json::to_vec(&j).unwrap()).unwrap();
        let rec = recover(state.path()).unwrap();
        assert_eq!(rec.len(), 1);
        assert_eq!(*rec[0].result.as_ref().unwrap(), RestoreOutcome::Restored);
        assert_eq!(fs::read(&f).unwrap(), b"orig");
    }

    fn mode_of(p: &Path) -> u32 {
        fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn settling_removes_what_the_run_made_and_keeps_what_someone_else_made() {
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path();
        fs::write(root.join("lib.rs"), "fn f() {}").unwrap();
        let before = scan(root, &[]).unwrap();
        // Made under the run's umask, by a child as the tests are.
        let script = "mkdir -p regressions && echo seed > regressions/t.txt";
        crate::system::runner::Runner::new("sh")
            .args(["-c", script])
            .dir(root)
            .umask(Some(crate::cargo::RUN_UMASK))
            .run()
            .unwrap();
        assert_eq!(mode_of(&root.join("regressions/t.txt")), 0o604);
        assert_eq!(mode_of(&root.join("regressions")), 0o715);
        // Made by the user meanwhile (mode 0644, or 0600 under a strict umask).
        fs::write(root.join("NOTES.txt"), "mine").unwrap();
        fs::set_permissions(root.join("NOTES.txt"), fs::Permissions::from_mode(0o644)).unwrap();
        fs::write(root.join("secret.txt"), "mine").unwrap();
        fs::set_permissions(root.join("secret.txt"), fs::Permissions::from_mode(0o600)).unwrap();
        let after = scan(root, &[]).unwrap();
        let settled = settle_created(root, &before, &after).unwrap();
        assert_eq!(settled.removed, vec![PathBuf::from("regressions/t.txt")]);
        assert_eq!(
            settled.kept,
            vec![PathBuf::from("NOTES.txt"), PathBuf::from("secret.txt")]
        );
        assert!(!root.join("regressions").exists());
        assert_eq!(fs::read(root.join("NOTES.txt")).unwrap(), b"mine");
        assert_eq!(fs::read(root.join("secret.txt")).unwrap(), b"mine");
    }

    #[test]
    fn recover_created_settles_a_dead_runs_tree_and_skips_a_live_one() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let root = ws.path();
        fs::write(root.join("lib.rs"), "fn f() {}").unwrap();
        let before = scan(root, &[]).unwrap();
        let record = journal_tree(state.path(), root, &[], &before).unwrap();
        fs::write(root.join("made.txt"), "run").unwrap();
        fs::set_permissions(root.join("made.txt"), fs::Permissions::from_mode(0o604)).unwrap();
        fs::write(root.join("NOTES.txt"), "mine").unwrap();
        fs::set_permissions(root.join("NOTES.txt"), fs::Permissions::from_mode(0o644)).unwrap();
        // Live owner (this process): left alone.
        assert!(recover_created(state.path()).unwrap().is_empty());
        assert!(root.join("made.txt").exists());
        // The owner died.
        let mut j: TreeJournal = serde_json::from_slice(&fs::read(&record).unwrap()).unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        j.owner = ProcessId {
            pid: child.id(),
            start_ticks: Some(0),
        };
        child.wait().unwrap();
        fs::write(&record, serde_json::to_vec(&j).unwrap()).unwrap();
        let rec = recover_created(state.path()).unwrap();
        assert_eq!(rec.len(), 1);
        let settled = rec[0].result.as_ref().unwrap();
        assert_eq!(settled.removed, vec![PathBuf::from("made.txt")]);
        assert_eq!(settled.kept, vec![PathBuf::from("NOTES.txt")]);
        assert!(!root.join("made.txt").exists());
        assert!(!record.exists());
        assert!(recover_created(state.path()).unwrap().is_empty());
    }
}
