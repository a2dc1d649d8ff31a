//! `harness merge`: joins the reports of a battery's shards (`--shard K/N` runs) into the
//! report the unsharded run would have written, after checking that the shards belong
//! together: same catalog bytes, same tree, same N and timings, every K once, every
//! mutation of the catalog in exactly one shard, every shard complete.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::battery::report::schema::{self, BatteryReport, Status, Summary};
use crate::battery::report::verdict::KillMatrix;
use crate::battery::select::shard::ShardManifest;

/// Why shards cannot be merged. Each names the file or the shards at fault.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// A report is not valid JSON of the battery schema.
    #[error("{path}: not a battery report: {detail}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        detail: String,
    },
    /// A folder holds no `<catalog>/battery.json`.
    #[error("{dir}: no <catalog>/battery.json in this folder (give each shard's --reports folder)")]
    NoReport {
        /// The folder.
        dir: PathBuf,
    },
    /// A report carries no shard manifest: it is not from a `--shard` run.
    #[error("{path}: not a shard's report (no `shard` manifest; run the battery with --shard K/N)")]
    NotAShard {
        /// The report.
        path: PathBuf,
    },
    /// A shard did not complete: the unsharded run would not have either.
    #[error("{path}: shard {k}/{n} did not complete ({status}): merge only complete shards")]
    Incomplete {
        /// The report.
        path: PathBuf,
        /// The shard.
        k: usize,
        /// Of how many.
        n: usize,
        /// Its status and refusal.
        status: String,
    },
    /// Two shards disagree on what must be shared.
    #[error("catalog `{catalog}`: {a} and {b} differ in {field}: they are not shards of one run")]
    Foreign {
        /// Catalog name.
        catalog: String,
        /// The field that differs.
        field: &'static str,
        /// One report.
        a: PathBuf,
        /// The other.
        b: PathBuf,
    },
    /// The same shard given twice.
    #[error("catalog `{catalog}`: shard {k}/{n} given twice: {a} and {b}")]
    Duplicate {
        /// Catalog name.
        catalog: String,
        /// The shard.
        k: usize,
        /// Of how many.
        n: usize,
        /// One report.
        a: PathBuf,
        /// The other.
        b: PathBuf,
    },
    /// Shards missing.
    #[error("catalog `{catalog}`: shard(s) {missing} of {n} missing")]
    Missing {
        /// Catalog name.
        catalog: String,
        /// The missing K values, comma-separated.
        missing: String,
        /// N.
        n: usize,
    },
    /// The shards' mutations do not cover the catalog exactly once.
    #[error("catalog `{catalog}`: {detail}")]
    Coverage {
        /// Catalog name.
        catalog: String,
        /// Which ids are missing or repeated, and where.
        detail: String,
    },
}

/// One shard's report as read from its folder.
struct ShardReport {
    path: PathBuf,
    report: BatteryReport,
    manifest: ShardManifest,
    stryker: Option<serde_json::Value>,
}

/// What a merge wrote for one catalog.
#[derive(Debug)]
pub struct Merged {
    /// The merged report.
    pub report: BatteryReport,
    /// Files written.
    pub written: Vec<PathBuf>,
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, MergeError> {
    let text = std::fs::read_to_string(path).map_err(|source| MergeError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| MergeError::Format {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })
}

/// Reads every `<catalog>/battery.json` under each folder.
fn read_shards(dirs: &[PathBuf]) -> Result<Vec<ShardReport>, MergeError> {
    let mut out = Vec::new();
    for dir in dirs {
        let entries = std::fs::read_dir(dir).map_err(|source| MergeError::Io {
            path: dir.clone(),
            source,
        })?;
        let mut found: Vec<PathBuf> = Vec::new();
        for e in entries {
            let e = e.map_err(|source| MergeError::Io {
                path: dir.clone(),
                source,
            })?;
            let path = e.path().join("battery.json");
            if path.is_file() {
                found.push(path);
            }
        }
        if found.is_empty() {
            return Err(MergeError::NoReport { dir: dir.clone() });
        }
        found.sort();
        for path in found {
            let report: BatteryReport = read_json(&path)?;
            let manifest = report
                .shard
                .clone()
                .ok_or_else(|| MergeError::NotAShard { path: path.clone() })?;
            let stryker_path = path.with_file_name("mutation-report.json");
            let stryker = if stryker_path.is_file() {
                Some(read_json(&stryker_path)?)
            } else {
                None
            };
            out.push(ShardReport {
                path,
                report,
                manifest,
                stryker,
            });
        }
    }
    Ok(out)
}

/// Checks that `shards` (one catalog) are the N shards of one run; returns them by K.
fn check_shards(
    catalog: &str,
    mut shards: Vec<ShardReport>,
) -> Result<Vec<ShardReport>, MergeError> {
    shards.sort_by_key(|s| s.manifest.k);
    let first = &shards[0];
    for s in &shards {
        if s.report.status != Status::Complete {
            let refusal = s
                .report
                .refusal
                .as_ref()
                .map(|f| format!(": {} {}", f.kind, f.detail))
                .unwrap_or_default();
            return Err(MergeError::Incomplete {
                path: s.path.clone(),
                k: s.manifest.k,
                n: s.manifest.n,
                status: format!("{:?}{refusal}", s.report.status).to_lowercase(),
            });
        }
        let (a, b) = (&first.manifest, &s.manifest);
        let field = if a.n != b.n {
            Some("the number of shards")
        } else if a.catalog_sha256 != b.catalog_sha256 || a.catalog_mutations != b.catalog_mutations
        {
            Some("the catalog's bytes")
        } else if a.tree_fingerprint != b.tree_fingerprint {
            Some("the tree's fingerprint")
        } else if a.timings != b.timings {
            Some("the timings that balanced them")
        } else if first.report.catalog.tests != s.report.catalog.tests {
            Some("the listed tests")
        } else {
            None
        };
        if let Some(field) = field {
            return Err(MergeError::Foreign {
                catalog: catalog.to_string(),
                field,
                a: first.path.clone(),
                b: s.path.clone(),
            });
        }
    }
    for w in shards.windows(2) {
        if w[0].manifest.k == w[1].manifest.k {
            return Err(MergeError::Duplicate {
                catalog: catalog.to_string(),
                k: w[0].manifest.k,
                n: w[0].manifest.n,
                a: w[0].path.clone(),
                b: w[1].path.clone(),
            });
        }
    }
    let n = first.manifest.n;
    let have: BTreeSet<usize> = shards.iter().map(|s| s.manifest.k).collect();
    let missing: Vec<String> = (1..=n)
        .filter(|k| !have.contains(k))
        .map(|k| k.to_string())
        .collect();
    if !missing.is_empty() {
        return Err(MergeError::Missing {
            catalog: catalog.to_string(),
            missing: missing.join(", "),
            n,
        });
    }
    let mut owner: BTreeMap<&str, &Path> = BTreeMap::new();
    for s in &shards {
        let ran: Vec<&str> = s.report.mutations.iter().map(|m| m.id.as_str()).collect();
        let listed: Vec<&str> = s.manifest.mutations.iter().map(String::as_str).collect();
        if ran != listed {
            return Err(MergeError::Coverage {
                catalog: catalog.to_string(),
                detail: format!(
                    "{}: the mutations that ran differ from the shard's manifest",
                    s.path.display()
                ),
            });
        }
        for id in ran {
            if let Some(other) = owner.insert(id, &s.path) {
                return Err(MergeError::Coverage {
                    catalog: catalog.to_string(),
                    detail: format!(
                        "mutation `{id}` ran in two shards: {} and {}",
                        other.display(),
                        s.path.display()
                    ),
                });
            }
        }
    }
    let absent: Vec<&str> = first
        .manifest
        .catalog_mutations
        .iter()
        .map(String::as_str)
        .filter(|id| !owner.contains_key(id))
        .collect();
    if !absent.is_empty() {
        return Err(MergeError::Coverage {
            catalog: catalog.to_string(),
            detail: format!("no shard ran: {}", absent.join(", ")),
        });
    }
    Ok(shards)
}

/// The report the unsharded run would have written, from checked shards (by K).
fn join(shards: &[ShardReport]) -> (BatteryReport, serde_json::Value) {
    let order = &shards[0].manifest.catalog_mutations;
    let mut by_id: BTreeMap<&str, &schema::MutationReport> = BTreeMap::new();
    for s in shards {
        for m in &s.report.mutations {
            by_id.insert(m.id.as_str(), m);
        }
    }
    let mutations: Vec<schema::MutationReport> =
        order.iter().map(|id| by_id[id.as_str()].clone()).collect();
    let mut r = shards[0].report.clone();
    let cols: Vec<(String, Option<&BTreeMap<String, crate::cargo::Outcome>>)> = mutations
        .iter()
        .map(|m| (m.id.clone(), Some(&m.outcomes)))
        .collect();
    r.kill_matrix = KillMatrix::build(&r.catalog.tests, &cols);
    let unfalsified = r.kill_matrix.unfalsified();
    r.summary = Summary::of(&mutations, Some(&unfalsified));
    r.unfalsified = Some(unfalsified);
    r.mutations = mutations;
    r.shard = None;
    r.incremental = None;
    r.only = None;
    r.since = None;
    r.started_unix = shards
        .iter()
        .map(|s| s.report.started_unix)
        .min()
        .unwrap_or(0);
    r.wall_seconds = shards
        .iter()
        .map(|s| s.report.wall_seconds)
        .fold(0.0, f64::max);
    r.exit_code = crate::battery::complete_exit_code(&r.summary);

    // The Stryker document: files in path order, each file's mutants in catalog order.
    let mut mutants: BTreeMap<String, (String, serde_json::Value)> = BTreeMap::new();
    let mut files = serde_json::Map::new();
    let mut base = serde_json::Value::Null;
    for s in shards {
        let Some(doc) = &s.stryker else { continue };
        if base.is_null() {
            base = doc.clone();
        }
        if let Some(fs) = doc.get("files").and_then(|f| f.as_object()) {
            for (path, f) in fs {
                let mut empty = f.clone();
                empty["mutants"] = serde_json::json!([]);
                files.entry(path.clone()).or_insert(empty);
                for m in f
                    .get("mutants")
                    .and_then(|m| m.as_array())
                    .into_iter()
                    .flatten()
                {
                    if let Some(id) = m.get("id").and_then(|i| i.as_str()) {
                        mutants.insert(id.to_string(), (path.clone(), m.clone()));
                    }
                }
            }
        }
    }
    for id in order {
        if let Some((path, m)) = mutants.remove(id)
            && let Some(list) = files
                .get_mut(&path)
                .and_then(|f| f.get_mut("mutants"))
                .and_then(|l| l.as_array_mut())
        {
            list.push(m);
        }
    }
    let sorted: BTreeMap<String, serde_json::Value> = files.into_iter().collect();
    if base.is_null() {
        base = serde_json::json!({});
    }
    base["files"] = serde_json::to_value(sorted).expect("a map of JSON values serialises");
    (r, base)
}

/// Merges the shard reports found in `dirs` (each a shard's `--reports` folder holding
/// `<catalog>/battery.json`) and writes `out/<catalog>/` for every catalog found, exactly
/// as the unsharded run writes it (timings aside).
pub fn merge(dirs: &[PathBuf], out: &Path) -> Result<Vec<Merged>, MergeError> {
    let mut groups: BTreeMap<String, Vec<ShardReport>> = BTreeMap::new();
    for s in read_shards(dirs)? {
        groups
            .entry(s.report.catalog.name.clone())
            .or_default()
            .push(s);
    }
    let mut checked = Vec::new();
    for (name, shards) in groups {
        checked.push(check_shards(&name, shards)?);
    }
    let mut merged = Vec::new();
    for shards in checked {
        let (r, doc) = join(&shards);
        let dir = crate::battery::report::files::report_dir(out, &r.catalog.name);
        let written =
            crate::battery::report::files::write_with(&dir, &r, Some(&doc)).map_err(|source| {
                MergeError::Io {
                    path: dir.clone(),
                    source,
                }
            })?;
        merged.push(Merged { report: r, written });
    }
    Ok(merged)
}
