//! Lint levels under which a mutation can compile behind the switch and still not compile on
//! its own: a denied (or forbidden) `dead_code`, `unused_*` or `warnings` lint.
//!
//! Behind the switch the original body stays compiled next to each mutated one, so a
//! parameter, private item or import that only the original body uses still counts as used.
//! On its own, the mutated file may leave it unused; where that lint is an error the mutation
//! is UNVIABLE in rebuild mode. Switch mode cannot see that in its one build, so when such a
//! level may be in force it checks every switched mutation on its own first. This module
//! finds where such a level may be set, conservatively (a false alarm only costs the checks):
//! `-D`/`-F`/`--deny`/`--forbid` in `RUSTFLAGS`, `CARGO_ENCODED_RUSTFLAGS` or
//! `CARGO_BUILD_RUSTFLAGS`; a Cargo configuration file with `rustflags` and such a flag; a
//! `[lints.rust]` or `[workspace.lints.rust]` entry at `deny` or `forbid`; a `deny(...)` or
//! `forbid(...)` attribute in the package's sources.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Whether `lint` (a rustc lint or group name) can turn an unused parameter, item or import
/// into an error.
pub fn usage_lint(lint: &str) -> bool {
    let l = lint.trim().trim_matches('"');
    let l = l.strip_prefix("rust::").unwrap_or(l);
    l == "warnings" || l == "unused" || l == "dead_code" || l.starts_with("unused_")
}

/// Whether the rustc flags in `args` deny or forbid a [`usage_lint`] (`-D warnings`,
/// `-Dunused`, `--deny=dead_code`, `-F warnings`, ...).
pub fn flags_deny_usage_lints<S: AsRef<str>>(args: &[S]) -> bool {
    let mut it = args.iter().map(AsRef::as_ref).peekable();
    while let Some(a) = it.next() {
        let value = match a {
            "-D" | "-F" | "--deny" | "--forbid" => it.peek().copied(),
            _ => ["-D", "-F", "--deny=", "--forbid="]
                .iter()
                .find_map(|p| a.strip_prefix(p))
                .filter(|v| !v.is_empty()),
        };
        if value.is_some_and(|v| v.split(',').any(usage_lint)) {
            return true;
        }
    }
    false
}

/// Where `text` (Rust source) holds a `deny(...)` or `forbid(...)` naming a [`usage_lint`]:
/// the 1-based line, if anywhere.
pub fn source_denies_usage_lints(text: &str) -> Option<usize> {
    for key in ["deny(", "forbid("] {
        for (at, _) in text.match_indices(key) {
            let rest = &text[at + key.len()..];
            let inner = &rest[..rest.find(')').unwrap_or(rest.len())];
            if inner.split(',').any(usage_lint) {
                return Some(text[..at].matches('\n').count() + 1);
            }
        }
    }
    None
}

/// Whether a Cargo manifest's `[lints.rust]` or `[workspace.lints.rust]` table sets a
/// [`usage_lint`] to `deny` or `forbid` (as `"deny"` or `{ level = "deny", ... }`).
pub fn manifest_denies_usage_lints(manifest: &toml::Value) -> bool {
    let tables = [
        manifest.get("lints").and_then(|l| l.get("rust")),
        manifest
            .get("workspace")
            .and_then(|w| w.get("lints"))
            .and_then(|l| l.get("rust")),
    ];
    tables.into_iter().flatten().any(|t| {
        t.as_table().is_some_and(|t| {
            t.iter().any(|(name, v)| {
                let level = v
                    .as_str()
                    .or_else(|| v.get("level").and_then(toml::Value::as_str));
                usage_lint(name) && matches!(level, Some("deny" | "forbid"))
            })
        })
    })
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() && p.file_name().is_some_and(|n| n != "target" && n != ".git") => {
                rust_files(&p, out)
            }
            Ok(t) if t.is_file() && p.extension().is_some_and(|x| x == "rs") => out.push(p),
            _ => {}
        }
    }
}

/// Where a level that denies a [`usage_lint`] may be in force for a build of the package in
/// `package_dir` of the workspace at `root` (the same tree the build compiles), with the
/// process environment overlaid by `env`: a description naming the variable, file and line,
/// or `None`.
pub fn strict_usage_lints(
    root: &Path,
    package_dir: &Path,
    env: &BTreeMap<String, String>,
) -> Option<String> {
    let var = |k: &str| env.get(k).cloned().or_else(|| std::env::var(k).ok());
    for k in ["RUSTFLAGS", "CARGO_BUILD_RUSTFLAGS"] {
        if let Some(v) = var(k) {
            let args: Vec<&str> = v.split_whitespace().collect();
            if flags_deny_usage_lints(&args) {
                return Some(format!("{k}={v}"));
            }
        }
    }
    if let Some(v) = var("CARGO_ENCODED_RUSTFLAGS") {
        let args: Vec<&str> = v.split('\u{1f}').collect();
        if flags_deny_usage_lints(&args) {
            return Some(format!("CARGO_ENCODED_RUSTFLAGS={}", args.join(" ")));
        }
    }
    // Cargo configuration: the package's directory and its ancestors, then CARGO_HOME.
    let mut configs = Vec::new();
    for dir in package_dir.ancestors() {
        configs.push(dir.join(".cargo").join("config.toml"));
        configs.push(dir.join(".cargo").join("config"));
    }
    if let Some(home) = var("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| Path::new(&h).join(".cargo")))
    {
        configs.push(home.join("config.toml"));
        configs.push(home.join("config"));
    }
    for c in configs {
        let Ok(text) = std::fs::read_to_string(&c) else {
            continue;
        };
        if text.contains("rustflags") {
            let words: Vec<&str> = text
                .split(|ch: char| ch.is_whitespace() || "[],\"'".contains(ch))
                .filter(|w| !w.is_empty())
                .collect();
            if flags_deny_usage_lints(&words) {
                return Some(format!("{}: rustflags", c.display()));
            }
        }
    }
    for manifest in [root.join("Cargo.toml"), package_dir.join("Cargo.toml")] {
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            continue;
        };
        if let Ok(v) = toml::from_str::<toml::Value>(&text)
            && manifest_denies_usage_lints(&v)
        {
            return Some(format!("{}: [lints]", manifest.display()));
        }
    }
    let mut files = Vec::new();
    rust_files(package_dir, &mut files);
    files.sort();
    for f in files {
        if let Ok(text) = std::fs::read_to_string(&f)
            && let Some(line) = source_denies_usage_lints(&text)
        {
            return Some(format!("{}:{line}", f.display()));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags() {
        assert!(flags_deny_usage_lints(&["-D", "warnings"]));
        assert!(flags_deny_usage_lints(&["-Dwarnings"]));
        assert!(flags_deny_usage_lints(&["--deny=dead_code"]));
        assert!(flags_deny_usage_lints(&["-F", "unused_imports"]));
        assert!(flags_deny_usage_lints(&[
            "-C",
            "opt-level=1",
            "-D",
            "missing_docs,unused"
        ]));
        assert!(!flags_deny_usage_lints(&["-D", "missing_docs"]));
        assert!(!flags_deny_usage_lints(&[
            "-W",
            "warnings",
            "-C",
            "debuginfo=0"
        ]));
        assert!(!flags_deny_usage_lints::<&str>(&[]));
    }

    #[test]
    fn sources() {
        assert_eq!(
            source_denies_usage_lints("//! x\n#![deny(missing_docs, unused_variables)]\n"),
            Some(2)
        );
        assert_eq!(
            source_denies_usage_lints("#[forbid(dead_code)]\nfn f() {}"),
            Some(1)
        );
        assert_eq!(source_denies_usage_lints("#![deny(missing_docs)]\n"), None);
        assert_eq!(source_denies_usage_lints("#![warn(unused)]\n"), None);
    }

    #[test]
    fn manifests() {
        let v: toml::Value =
            toml::from_str("[lints.rust]\nunused = { level = \"deny\", priority = -1 }\n").unwrap();
        assert!(manifest_denies_usage_lints(&v));
        let v: toml::Value =
            toml::from_str("[workspace.lints.rust]\ndead_code = \"forbid\"\n").unwrap();
        assert!(manifest_denies_usage_lints(&v));
        let v: toml::Value =
            toml::from_str("[lints.rust]\nunused = \"warn\"\nmissing_docs = \"deny\"\n").unwrap();
        assert!(!manifest_denies_usage_lints(&v));
    }

    #[test]
    fn strict_levels_are_found_in_the_package_and_the_environment() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::create_dir_all(root.join("p/src")).unwrap();
        std::fs::write(root.join("Cargo.toml"), "[workspace]\nmembers = [\"p\"]\n").unwrap();
        std::fs::write(root.join("p/Cargo.toml"), "[package]\nname = \"p\"\n").unwrap();
        std::fs::write(root.join("p/src/lib.rs"), "pub fn f() {}\n").unwrap();
        let home = root.join("cargo-home").display().to_string();
        let clean: BTreeMap<String, String> = [
            ("RUSTFLAGS".to_string(), String::new()),
            ("CARGO_BUILD_RUSTFLAGS".to_string(), String::new()),
            ("CARGO_ENCODED_RUSTFLAGS".to_string(), String::new()),
            ("CARGO_HOME".to_string(), home),
        ]
        .into();
        assert_eq!(strict_usage_lints(root, &root.join("p"), &clean), None);
        let mut env = clean.clone();
        env.insert("RUSTFLAGS".into(), "-D warnings".into());
        assert_eq!(
            strict_usage_lints(root, &root.join("p"), &env).as_deref(),
            Some("RUSTFLAGS=-D warnings")
        );
        std::fs::write(
            root.join("p/src/lib.rs"),
            "//! p\n#![deny(unused)]\npub fn f() {}\n",
        )
        .unwrap();
        let found = strict_usage_lints(root, &root.join("p"), &clean).unwrap();
        assert!(found.ends_with("lib.rs:2"), "{found}");
    }
}
