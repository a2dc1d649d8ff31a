//! Shards: a deterministic partition of a catalog's mutations over N runs (`--shard K/N`),
//! balanced by the timings of an earlier report when given, and the manifest each shard's
//! report carries so that `harness merge` can check the shards belong together.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::battery::tree::sha256_hex;

/// Which shard of how many: `K/N`, 1-based (`1 <= K <= N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardSpec {
    /// This shard, 1-based.
    pub k: usize,
    /// The number of shards.
    pub n: usize,
}

impl FromStr for ShardSpec {
    type Err = String;

    /// Parses `K/N`; the error says what was expected and what was given.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("--shard {s:?}: expected K/N with 1 <= K <= N, e.g. 2/4");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let k: usize = k.trim().parse().map_err(|_| bad())?;
        let n: usize = n.trim().parse().map_err(|_| bad())?;
        if n == 0 || k == 0 || k > n {
            return Err(bad());
        }
        Ok(ShardSpec { k, n })
    }
}

impl std::fmt::Display for ShardSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.k, self.n)
    }
}

/// Where the balancing timings came from (recorded in every shard's manifest; shards
/// merged together must agree on it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TimingsSource {
    /// No timings: mutations dealt round-robin in catalog order.
    MutationOrder,
    /// An earlier `battery.json`: its path as given and the SHA-256 of its bytes.
    Report {
        /// The path given with `--timings`.
        path: String,
        /// SHA-256 of the file's bytes, hex.
        sha256: String,
    },
}

/// A shard to run: its place, and the per-mutation seconds that balance the partition.
#[derive(Debug, Clone)]
pub struct Shard {
    /// `K/N`.
    pub spec: ShardSpec,
    /// Where `seconds` came from.
    pub source: TimingsSource,
    /// Mutation id -> seconds (build plus test) from the timings report.
    pub seconds: BTreeMap<String, f64>,
}

/// Errors reading `--timings`.
#[derive(Debug, thiserror::Error)]
pub enum TimingsError {
    /// The file could not be read.
    #[error("{path}: cannot read the timings report: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// The file is not a battery report with per-mutation seconds.
    #[error("{path}: not a battery report with timings: {detail}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What was wrong, with the JSON path at fault.
        detail: String,
    },
}

impl Shard {
    /// A shard balanced by mutation order (no timings).
    pub fn by_order(spec: ShardSpec) -> Shard {
        Shard {
            spec,
            source: TimingsSource::MutationOrder,
            seconds: BTreeMap::new(),
        }
    }

    /// A shard balanced by the `build_seconds + test_seconds` of each mutation in an
    /// earlier `battery.json` (schema `harness-battery/1`).
    pub fn with_timings(spec: ShardSpec, path: &Path) -> Result<Shard, TimingsError> {
        let bytes = std::fs::read(path).map_err(|source| TimingsError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let format = |detail: String| TimingsError::Format {
            path: path.to_path_buf(),
            detail,
        };
        let doc: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| format(format!("not JSON: {e}")))?;
        let mutations = doc
            .get("mutations")
            .and_then(|m| m.as_array())
            .ok_or_else(|| format("no `mutations` array".into()))?;
        let mut seconds = BTreeMap::new();
        for (i, m) in mutations.iter().enumerate() {
            let id = m
                .get("id")
                .and_then(|v| v.as_str())
                .ok_or_else(|| format(format!("mutations[{i}].id: missing or not a string")))?;
            let mut total = 0.0;
            for field in ["build_seconds", "test_seconds"] {
                let v = m
                    .get(field)
                    .and_then(|v| v.as_f64())
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .ok_or_else(|| {
                        format(format!(
                            "mutations[{i}].{field}: missing or not a non-negative number"
                        ))
                    })?;
                total += v;
            }
            seconds.insert(id.to_string(), total);
        }
        Ok(Shard {
            spec,
            source: TimingsSource::Report {
                path: path.display().to_string(),
                sha256: sha256_hex(&bytes),
            },
            seconds,
        })
    }

    /// The ids of this shard, in catalog order (see [`partition`]).
    pub fn select(&self, catalog_ids: &[String]) -> Vec<String> {
        partition(catalog_ids, self.spec.n, &self.seconds).swap_remove(self.spec.k - 1)
    }
}

/// Splits `ids` (catalog order) into `n` shards, each in catalog order. Without timings
/// (`seconds` empty) the ids are dealt round-robin: id `i` goes to shard `i mod n`. With
/// timings, longest first (ties in catalog order), each to the shard with the least total
/// so far (ties to the lowest shard); an id the timings lack counts as their mean. The
/// same inputs give the same partition on every machine.
pub fn partition(ids: &[String], n: usize, seconds: &BTreeMap<String, f64>) -> Vec<Vec<String>> {
    let n = n.max(1);
    let mut shards: Vec<Vec<usize>> = vec![Vec::new(); n];
    if seconds.is_empty() {
        for i in 0..ids.len() {
            shards[i % n].push(i);
        }
    } else {
        let known: Vec<f64> = ids
            .iter()
            .filter_map(|id| seconds.get(id).copied())
            .collect();
        let mean = if known.is_empty() {
            1.0
        } else {
            known.iter().sum::<f64>() / known.len() as f64
        };
        let cost = |i: usize| seconds.get(&ids[i]).copied().unwrap_or(mean);
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by(|&a, &b| cost(b).total_cmp(&cost(a)).then(a.cmp(&b)));
        let mut load = vec![0.0f64; n];
        for i in order {
            let lightest = (0..n)
                .min_by(|&a, &b| load[a].total_cmp(&load[b]).then(a.cmp(&b)))
                .expect("n >= 1");
            load[lightest] += cost(i);
            shards[lightest].push(i);
        }
    }
    shards
        .into_iter()
        .map(|mut s| {
            s.sort_unstable();
            s.into_iter().map(|i| ids[i].clone()).collect()
        })
        .collect()
}

/// What a shard's report carries (`battery.json` field `shard`), checked by `harness merge`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardManifest {
    /// This shard, 1-based.
    pub k: usize,
    /// The number of shards.
    pub n: usize,
    /// SHA-256 of the catalog file's bytes, hex.
    pub catalog_sha256: String,
    /// The tree's fingerprint at the start of the run (the same as `TREE-DIRTY` checks).
    pub tree_fingerprint: String,
    /// Where the balancing timings came from.
    pub timings: TimingsSource,
    /// Every mutation id of the catalog, in catalog order.
    pub catalog_mutations: Vec<String>,
    /// The ids this shard ran, in catalog order.
    pub mutations: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("m{i}")).collect()
    }

    #[test]
    fn parses_k_of_n_and_refuses_the_rest() {
        assert_eq!("2/4".parse::<ShardSpec>(), Ok(ShardSpec { k: 2, n: 4 }));
        for bad in ["0/4", "5/4", "1/0", "2", "a/b", "", "1/2/3", "-1/2"] {
            assert!(bad.parse::<ShardSpec>().is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn without_timings_ids_are_dealt_round_robin() {
        let p = partition(&ids(5), 2, &BTreeMap::new());
        assert_eq!(p, vec![vec!["m0", "m2", "m4"], vec!["m1", "m3"]]);
    }

    #[test]
    fn timings_put_the_long_mutation_alone() {
        let secs: BTreeMap<String, f64> = [("m0", 1.0), ("m1", 1.0), ("m2", 10.0), ("m3", 1.0)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let p = partition(&ids(4), 2, &secs);
        assert_eq!(p, vec![vec!["m2"], vec!["m0", "m1", "m3"]]);
    }

    proptest! {
        /// Every id lands in exactly one shard, each shard keeps catalog order, and with
        /// timings the heaviest shard exceeds the lightest by at most the longest mutation.
        #[test]
        fn partition_covers_once_in_order_and_balances(
            times in proptest::collection::vec(0.0f64..100.0, 0..40),
            n in 1usize..6,
            timed in any::<bool>(),
        ) {
            let all = ids(times.len());
            let secs: BTreeMap<String, f64> = if timed {
                all.iter().cloned().zip(times.iter().copied()).collect()
            } else {
                BTreeMap::new()
            };
            let p = partition(&all, n, &secs);
            prop_assert_eq!(p.len(), n);
            let mut seen: Vec<String> = p.iter().flatten().cloned().collect();
            for s in &p {
                let pos: Vec<usize> = s.iter().map(|id| all.iter().position(|a| a == id).unwrap()).collect();
                prop_assert!(pos.windows(2).all(|w| w[0] < w[1]), "not in catalog order: {:?}", s);
            }
            seen.sort();
            let mut want = all.clone();
            want.sort();
            prop_assert_eq!(seen, want);
            if timed && !times.is_empty() {
                let load: Vec<f64> = p.iter().map(|s| s.iter().map(|id| secs[id]).sum()).collect();
                let max = load.iter().cloned().fold(f64::MIN, f64::max);
                let min = load.iter().cloned().fold(f64::MAX, f64::min);
                let longest = times.iter().cloned().fold(0.0, f64::max);
                prop_assert!(max - min <= longest + 1e-9, "loads {:?}", load);
            } else {
                let sizes: Vec<usize> = p.iter().map(Vec::len).collect();
                prop_assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
            }
        }
    }
}
