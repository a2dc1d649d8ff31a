//! A battery's report directory (`<reports>/<catalog>/`), its files written together.
//!
//! `battery.json`, `battery.md`, `mutation-report.json`, `index.html`, and the findings on
//! the diff: `battery.sarif` (SARIF 2.1.0, for code scanning) and `codequality.json`
//! (GitLab's code-quality report).

use std::path::{Path, PathBuf};

use crate::battery::report::schema::{BatteryReport, Status};

/// The report directory of battery `name` under `root`.
pub fn report_dir(root: &Path, name: &str) -> PathBuf {
    root.join(name)
}

/// Writes `battery.json`, `battery.md`, `index.html`, `battery.sarif`, `codequality.json`
/// and (when the battery completed) `mutation-report.json` into `dir`. Returns the written
/// paths.
pub fn write_all(dir: &Path, r: &BatteryReport) -> std::io::Result<Vec<PathBuf>> {
    let doc = if r.status == Status::Complete {
        Some(crate::battery::report::stryker::stryker(r)?)
    } else {
        None
    };
    write_with(dir, r, doc.as_ref())
}

/// [`write_all`] with the Stryker document given (`harness merge` joins the shards' own
/// documents instead of reading the sources again); `None` removes a stale one.
pub fn write_with(
    dir: &Path,
    r: &BatteryReport,
    stryker_doc: Option<&serde_json::Value>,
) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut out = Vec::new();
    let json = dir.join("battery.json");
    std::fs::write(
        &json,
        serde_json::to_string_pretty(r).expect("report serializes") + "\n",
    )?;
    out.push(json);
    let md = dir.join("battery.md");
    std::fs::write(&md, crate::battery::report::text::markdown(r))?;
    out.push(md);
    let stryker_path = dir.join("mutation-report.json");
    match stryker_doc {
        Some(doc) => {
            std::fs::write(
                &stryker_path,
                serde_json::to_string_pretty(doc).expect("serializes") + "\n",
            )?;
            out.push(stryker_path);
        }
        None => {
            let _ = std::fs::remove_file(&stryker_path);
        }
    }
    let page = dir.join("index.html");
    std::fs::write(&page, crate::battery::report::html::page(r, stryker_doc))?;
    out.push(page);
    out.extend(write_findings(dir, "battery", &[r])?);
    Ok(out)
}

/// Writes `<stem>.sarif` (one run per report) and `codequality.json` with the findings of
/// `reports` into `dir`; returns their paths.
pub fn write_findings(
    dir: &Path,
    stem: &str,
    reports: &[&BatteryReport],
) -> std::io::Result<Vec<PathBuf>> {
    use crate::battery::report::{codequality, findings, sarif};
    let mut all = Vec::new();
    for r in reports {
        let root = findings::repository_root(&r.catalog.workspace);
        all.extend(findings::of_battery(r, root.as_deref()));
    }
    let names: Vec<String> = reports.iter().map(|r| r.catalog.name.clone()).collect();
    let sarif_path = dir.join(format!("{stem}.sarif"));
    std::fs::write(
        &sarif_path,
        serde_json::to_string_pretty(&sarif::log(&names, &all)).expect("serializes") + "\n",
    )?;
    let quality = dir.join("codequality.json");
    std::fs::write(
        &quality,
        serde_json::to_string_pretty(&codequality::report(&all)).expect("serializes") + "\n",
    )?;
    Ok(vec![sarif_path, quality])
}
