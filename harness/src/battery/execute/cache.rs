//! Verdicts reused on evidence (`--incremental`): what a mutation's verdict depends on, hashed,
//! and the cache of earlier verdicts keyed by that hash, in the host state directory.
//!
//! A mutation's evidence is the catalog entry and the catalog's run settings (package,
//! targets, listed tests, pattern, features, environment, timeouts), the mode, the
//! toolchain (`rustc -vV`), the `RUST*`/`CARGO*` variables of the harness's environment
//! (RUSTFLAGS among them), and the bytes of every file of the tree except those inside a
//! workspace member that is neither the mutated package nor one of its path dependencies
//! (transitively). Files outside every member (such as `fixtures/`, `Cargo.lock`, the root
//! `Cargo.toml`) are evidence: the tests may read them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::battery::Mode;
use crate::battery::report::schema::MutationReport;
use crate::battery::select::catalog::{Catalog, Mutation};
use crate::battery::tree::TreeScan;
use crate::cargo::{Outcome, PackageMeta};

/// The schema of a cache file.
pub const CACHE_SCHEMA: &str = "harness-verdict-cache/1";

/// One cached verdict.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    /// The evidence hash the verdict was found under (hex SHA-256).
    pub evidence: String,
    /// The mutation's report as the run that found it wrote it.
    pub report: MutationReport,
    /// Its kill-matrix column (`None` when UNVIABLE).
    pub column: Option<BTreeMap<String, Outcome>>,
    /// The per-mutation test timeout of that run, seconds (a TIMEOUT is re-checked with it).
    pub timeout_seconds: f64,
}

/// The cache file of one catalog: `<state>/cache/<hash of the catalog's path>.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CacheFile {
    /// [`CACHE_SCHEMA`].
    pub schema: String,
    /// The catalog file the verdicts belong to.
    pub catalog: PathBuf,
    /// Mutation id -> its last verdict.
    pub entries: BTreeMap<String, Entry>,
}

/// The folder of every cache file under the host state directory.
pub fn cache_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("cache")
}

/// The cache file of `catalog`.
pub fn cache_path(state_dir: &Path, catalog: &Catalog) -> PathBuf {
    let key = crate::battery::tree::sha256_hex(catalog.path.to_string_lossy().as_bytes());
    cache_dir(state_dir).join(format!("{}-{}.json", catalog.name, &key[..16]))
}

/// Reads the cache file at `path`. A missing file is an empty cache; a file that cannot be
/// read or parsed is an error naming it (the caller reports it and reuses nothing).
pub fn load(path: &Path, catalog: &Catalog) -> Result<CacheFile, String> {
    let empty = CacheFile {
        schema: CACHE_SCHEMA.into(),
        catalog: catalog.path.clone(),
        entries: BTreeMap::new(),
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(empty),
        Err(e) => {
            return Err(format!(
                "{}: cannot read the verdict cache: {e}",
                path.display()
            ));
        }
    };
    let file: CacheFile = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a verdict cache: {e}", path.display()))?;
    if file.schema != CACHE_SCHEMA || file.catalog != catalog.path {
        return Err(format!(
            "{}: a verdict cache of schema {:?} for {}, not {CACHE_SCHEMA} for {}",
            path.display(),
            file.schema,
            file.catalog.display(),
            catalog.path.display()
        ));
    }
    Ok(file)
}

/// Writes `file` to `path` (through a temporary file renamed over it).
pub fn save(path: &Path, file: &CacheFile) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("json.tmp");
    std::fs::write(
        &tmp,
        serde_json::to_string_pretty(file).expect("serializes") + "\n",
    )?;
    std::fs::rename(&tmp, path)
}

/// Removes every cache file (`harness cache clear`); returns how many were removed.
pub fn clear(state_dir: &Path) -> std::io::Result<usize> {
    let dir = cache_dir(state_dir);
    let mut n = 0;
    match std::fs::read_dir(&dir) {
        Ok(entries) => {
            for e in entries {
                let e = e?;
                if e.file_type()?.is_file() {
                    std::fs::remove_file(e.path())?;
                    n += 1;
                }
            }
            Ok(n)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e),
    }
}

/// The files of `scan` (relative to `root`, the tree the packages were read from) that are
/// evidence for mutations of `package`: every file except those whose nearest enclosing
/// workspace member is neither `package` nor one of its path dependencies (transitively).
pub fn evidence_files<'s>(
    scan: &'s TreeScan,
    root: &Path,
    packages: &[PackageMeta],
    package: &str,
) -> Vec<(&'s Path, &'s str)> {
    let rel = |p: &PackageMeta| p.dir.strip_prefix(root).ok().map(Path::to_path_buf);
    // The closure of `package` over path dependencies that are members.
    let mut keep: BTreeSet<PathBuf> = BTreeSet::new();
    let mut todo: Vec<&PackageMeta> = packages.iter().filter(|p| p.name == package).collect();
    while let Some(p) = todo.pop() {
        if !keep.insert(p.dir.clone()) {
            continue;
        }
        for d in &p.path_deps {
            todo.extend(packages.iter().filter(|q| &q.dir == d));
        }
    }
    let members: Vec<(PathBuf, bool)> = packages
        .iter()
        .filter_map(|p| rel(p).map(|r| (r, keep.contains(&p.dir))))
        .collect();
    scan.files
        .iter()
        .filter_map(|(path, sha)| Some((path.as_path(), sha.as_deref()?)))
        .filter(|(path, _)| {
            members
                .iter()
                .filter(|(dir, _)| path.starts_with(dir))
                .max_by_key(|(dir, _)| dir.components().count())
                .is_none_or(|(_, kept)| *kept)
        })
        .collect()
}

/// What every mutation of one run shares in its evidence.
#[derive(Debug, Clone)]
pub struct RunEvidence {
    /// `rustc -vV` as run in the tree (or why it could not run).
    pub toolchain: String,
    /// `RUST*` and `CARGO*` variables of the environment, sorted.
    pub env: Vec<(String, String)>,
    /// The mode (JSON `rebuild`, `switch`).
    pub mode: Mode,
    /// Hash over the evidence files (path and content hash of each).
    pub files: String,
}

impl RunEvidence {
    /// Gathers the shared evidence: the toolchain run in `root`, the environment, the files.
    pub fn gather(root: &Path, mode: Mode, files: &[(&Path, &str)]) -> RunEvidence {
        let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
        let toolchain = match std::process::Command::new(&rustc)
            .arg("-vV")
            .current_dir(root)
            .output()
        {
            Ok(o) => format!(
                "{}{}{}",
                o.status,
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => format!("{}: {e}", rustc.to_string_lossy()),
        };
        let mut env: Vec<(String, String)> = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.to_string_lossy().into_owned())))
            .filter(|(k, _)| k.starts_with("RUST") || k.starts_with("CARGO"))
            .collect();
        env.sort();
        let mut h = Sha256::new();
        for (p, sha) in files {
            h.update(p.to_string_lossy().as_bytes());
            h.update([0]);
            h.update(sha.as_bytes());
            h.update([0]);
        }
        RunEvidence {
            toolchain,
            env,
            mode,
            files: hex(&h.finalize()),
        }
    }

    /// The evidence hash of mutation `m` of `catalog`: the shared evidence, the catalog's
    /// run settings and the entry itself.
    pub fn of(&self, catalog: &Catalog, m: &Mutation) -> String {
        let mut spec = catalog.spec.clone();
        spec.mutations = vec![m.clone()];
        let doc = serde_json::json!({
            "schema": CACHE_SCHEMA,
            "catalog": spec,
            "mode": self.mode,
            "toolchain": self.toolchain,
            "env": self.env,
            "files": self.files,
        });
        hex(&Sha256::digest(doc.to_string().as_bytes()))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A seeded sample of `n` of `ids` (all when `n >= ids.len()`), by a splitmix64 shuffle:
/// the same seed picks the same ids.
pub fn sample(ids: &[String], n: usize, seed: u64) -> BTreeSet<String> {
    let mut v: Vec<&String> = ids.iter().collect();
    let mut state = seed;
    let mut next = || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    for i in (1..v.len()).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v.into_iter().take(n).cloned().collect()
}

/// Whether a fresh result disproves a reused one: a different verdict, or for a kill a
/// different set of failing tests.
pub fn disproves(cached: &MutationReport, fresh: &MutationReport) -> Option<String> {
    let kills = |r: &MutationReport| -> Vec<String> {
        r.failed_tests.iter().map(|f| f.name.clone()).collect()
    };
    if cached.verdict != fresh.verdict {
        return Some(format!(
            "mutation `{}`: the reused verdict was {} but re-checked it is {}",
            fresh.id, cached.verdict, fresh.verdict
        ));
    }
    if kills(cached) != kills(fresh) {
        return Some(format!(
            "mutation `{}`: the reused verdict's failing tests were [{}] but re-checked they are [{}]",
            fresh.id,
            kills(cached).join(", "),
            kills(fresh).join(", ")
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(files: &[&str]) -> TreeScan {
        TreeScan {
            files: files
                .iter()
                .map(|f| (PathBuf::from(f), Some("00".to_string())))
                .collect(),
            dirs: BTreeSet::new(),
        }
    }

    fn pkg(name: &str, dir: &str, deps: &[&str]) -> PackageMeta {
        PackageMeta {
            id: name.into(),
            name: name.into(),
            dir: PathBuf::from("/ws").join(dir),
            test_targets: Vec::new(),
            bins: Vec::new(),
            has_lib: true,
            lib_doctest: true,
            crate_roots: Vec::new(),
            features: Vec::new(),
            feature_table: BTreeMap::new(),
            path_deps: deps.iter().map(|d| PathBuf::from("/ws").join(d)).collect(),
        }
    }

    #[test]
    fn files_of_unrelated_members_are_not_evidence() {
        let s = scan(&[
            "Cargo.lock",
            "fixtures/a.bin",
            "app/src/lib.rs",
            "util/src/lib.rs",
            "deep/src/lib.rs",
            "other/src/lib.rs",
            "other/inner/src/lib.rs",
        ]);
        let packages = [
            pkg("app", "app", &["util"]),
            pkg("util", "util", &["deep"]),
            pkg("deep", "deep", &[]),
            pkg("other", "other", &["app"]),
            pkg("inner", "other/inner", &[]),
        ];
        let got: Vec<&Path> = evidence_files(&s, Path::new("/ws"), &packages, "app")
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        let want: Vec<&Path> = [
            "Cargo.lock",
            "app/src/lib.rs",
            "deep/src/lib.rs",
            "fixtures/a.bin",
            "util/src/lib.rs",
        ]
        .iter()
        .map(Path::new)
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_nested_member_of_the_package_is_judged_by_itself() {
        let s = scan(&["src/lib.rs", "tools/x/src/main.rs"]);
        let packages = [pkg("root", "", &[]), pkg("x", "tools/x", &[])];
        let got: Vec<&Path> = evidence_files(&s, Path::new("/ws"), &packages, "root")
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        assert_eq!(got, vec![Path::new("src/lib.rs")]);
    }

    #[test]
    fn the_sample_is_seeded_and_bounded() {
        let ids: Vec<String> = (0..10).map(|i| format!("m{i}")).collect();
        assert_eq!(sample(&ids, 3, 7), sample(&ids, 3, 7));
        assert_eq!(sample(&ids, 3, 7).len(), 3);
        assert_eq!(sample(&ids, 0, 7).len(), 0);
        assert_eq!(sample(&ids, 50, 7).len(), 10);
        let seeds: BTreeSet<BTreeSet<String>> = (0..20).map(|s| sample(&ids, 3, s)).collect();
        assert!(seeds.len() > 1, "every seed picked the same ids");
    }
}
