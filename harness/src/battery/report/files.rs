//! A battery's report directory (`<reports>/<catalog>/`), its files written together.
//!
//! `battery.json`, `battery.md`, `mutation-report.json` and `index.html`.

use std::path::{Path, PathBuf};

use crate::battery::report::schema::{BatteryReport, Status};

/// The report directory of battery `name` under `root`.
pub fn report_dir(root: &Path, name: &str) -> PathBuf {
    root.join(name)
}

/// Writes `battery.json`, `battery.md`, `index.html` and (when the battery completed)
/// `mutation-report.json` into `dir`. Returns the written paths.
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
    Ok(out)
}
