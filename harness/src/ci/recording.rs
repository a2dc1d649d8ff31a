//! nextest's recorded runs (cargo-nextest 0.9.123 and later, the experimental `record` feature): each test's outcome and attempts from the run's event log.
//!
//! A recorded run is kept as `run.log.zst` (zstd-compressed JSON lines, one event each)
//! beside `store.zip`; `cargo nextest store export` (0.9.125 and later) writes a *portable
//! recording*, a zip whose entries (stored) are `manifest.json`, `run.log.zst` and
//! `store.zip`. This reader takes a portable recording, a `run.log.zst`, or the event lines
//! already decompressed. Events read (`kind.kind`; see `fixtures/ci/corpus-nextest-*-recording*`
//! for real captures):
//! - `test-finished`: `test-instance` (`binary-id`, `name`) and `run-statuses`: `statuses`,
//!   one per attempt with `result.status` (`pass`, `fail`, `leak` and `timeout` with their
//!   verdict in `result.result`, ...), and `flaky-result` (`pass`,
//!   or `fail` under `--flaky-result fail`). The last attempt passed: passed (first attempt),
//!   flaky (a later one), or failed when `flaky-result` is `fail`; any other last status
//!   is a failure.
//! - `test-skipped` with `reason` `ignored`: ignored; other reasons (a filter): not run.
//! - `run-begin-cancel` (`reason`) and `run-finished` (`run-stats`: `initial-run-count`,
//!   `finished-count`): a run cancelled before every test finished was cut short.
//!
//! Other events are skipped. A line that is not JSON, or a `test-finished` event without
//! its fields, is an error naming the line.

use std::io::Read;

/// What a recording says about one test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordedOutcome {
    /// Passed on its first attempt.
    Passed,
    /// Passed on a later attempt (and the run counts it passed).
    Flaky,
    /// Failed; or passed on a later attempt under `flaky-result = "fail"`.
    Failed,
    /// Skipped as ignored.
    Ignored,
}

/// One test's result in a recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedTest {
    /// nextest's binary id (`package`, `package::target`, `package::bin/name`).
    pub binary_id: String,
    /// The test's name.
    pub name: String,
    /// Its outcome.
    pub outcome: RecordedOutcome,
    /// Attempts (0 when skipped).
    pub attempts: u32,
    /// 1-based line of its event in the event log.
    pub line: usize,
}

/// A recorded run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recording {
    /// The tests, in event order.
    pub tests: Vec<RecordedTest>,
    /// `run-finished`'s `initial-run-count`: the tests the run meant to run.
    pub initial_run_count: Option<u64>,
    /// `run-finished`'s `finished-count`.
    pub finished_count: Option<u64>,
    /// `run-begin-cancel`'s reason and its line, when the run was cancelled.
    pub cancelled: Option<(String, usize)>,
    /// Event lines read.
    pub lines: usize,
}

const ZIP_MAGIC: &[u8] = b"PK\x03\x04";
const ZSTD_MAGIC: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];

/// Whether `head` (a file's first bytes) is a nextest recording: a zip, a zstd frame, or an
/// event line (`{"timestamp":...,"kind":{"type":"core"...`).
pub fn looks_like(head: &[u8]) -> bool {
    head.starts_with(ZIP_MAGIC)
        || head.starts_with(ZSTD_MAGIC)
        || (head.starts_with(b"{\"timestamp\":")
            && String::from_utf8_lossy(&head[..head.len().min(400)])
                .contains("\"kind\":{\"type\":\"core\""))
}

/// The event lines of a portable recording (its `run.log.zst`), of a `run.log.zst`, or
/// `bytes` themselves.
fn event_lines(bytes: &[u8]) -> Result<Vec<u8>, String> {
    if bytes.starts_with(ZIP_MAGIC) {
        let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes))
            .map_err(|e| format!("not a readable zip: {e}"))?;
        let mut entry = zip
            .by_name("run.log.zst")
            .map_err(|e| format!("not a nextest portable recording: no run.log.zst entry ({e})"))?;
        let mut zst = Vec::new();
        entry
            .read_to_end(&mut zst)
            .map_err(|e| format!("run.log.zst: {e}"))?;
        return event_lines(&zst);
    }
    if bytes.starts_with(ZSTD_MAGIC) {
        let mut source = bytes;
        let mut out = Vec::new();
        ruzstd::decoding::StreamingDecoder::new(&mut source)
            .map_err(|e| format!("not a readable zstd stream: {e}"))?
            .read_to_end(&mut out)
            .map_err(|e| format!("zstd stream: {e}"))?;
        return Ok(out);
    }
    Ok(bytes.to_vec())
}

fn field<'a>(v: &'a serde_json::Value, path: &[&str]) -> Option<&'a serde_json::Value> {
    path.iter().try_fold(v, |v, k| v.get(k))
}

/// Read a recording (see the module docs).
///
/// # Errors
/// A message naming what is wrong: not a zip or zstd stream, no `run.log.zst`, a line that
/// is not JSON, a `test-finished` event without its test or statuses (with its line).
pub fn read(bytes: &[u8]) -> Result<Recording, String> {
    let text = event_lines(bytes)?;
    let text = String::from_utf8_lossy(&text);
    let mut rec = Recording::default();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        rec.lines = n;
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("event line {n}: not JSON: {e}"))?;
        let Some(kind) = v.get("kind") else {
            return Err(format!("event line {n}: no `kind`"));
        };
        let test = |what: &str| -> Result<(String, String), String> {
            let id = field(kind, &["test-instance", "binary-id"]).and_then(|x| x.as_str());
            let name = field(kind, &["test-instance", "name"]).and_then(|x| x.as_str());
            match (id, name) {
                (Some(i), Some(t)) => Ok((i.to_string(), t.to_string())),
                _ => Err(format!(
                    "event line {n}: {what} without `test-instance.binary-id` and `.name`"
                )),
            }
        };
        match kind.get("kind").and_then(|k| k.as_str()) {
            Some("test-finished") => {
                let (binary_id, name) = test("test-finished")?;
                let statuses = field(kind, &["run-statuses", "statuses"])
                    .and_then(|s| s.as_array())
                    .filter(|s| !s.is_empty())
                    .ok_or_else(|| {
                        format!("event line {n}: test-finished without `run-statuses.statuses`")
                    })?;
                let last = statuses.last().expect("not empty").get("result");
                let status = last
                    .and_then(|r| r.get("status"))
                    .and_then(|s| s.as_str())
                    .ok_or_else(|| format!("event line {n}: an attempt without `result.status`"))?;
                // `leak` and `timeout` carry the verdict nextest gave them (its `leak-timeout`
                // and `on-timeout` settings) in `result.result`.
                let passed = status == "pass"
                    || last.and_then(|r| r.get("result")).and_then(|r| r.as_str()) == Some("pass");
                let flaky_fails = field(kind, &["run-statuses", "flaky-result"])
                    .and_then(|s| s.as_str())
                    == Some("fail");
                let outcome = match (passed, statuses.len()) {
                    (true, 1) => RecordedOutcome::Passed,
                    (true, _) if flaky_fails => RecordedOutcome::Failed,
                    (true, _) => RecordedOutcome::Flaky,
                    (false, _) => RecordedOutcome::Failed,
                };
                rec.tests.push(RecordedTest {
                    binary_id,
                    name,
                    outcome,
                    attempts: statuses.len() as u32,
                    line: n,
                });
            }
            Some("test-skipped")
                if kind.get("reason").and_then(|r| r.as_str()) == Some("ignored") =>
            {
                let (binary_id, name) = test("test-skipped")?;
                rec.tests.push(RecordedTest {
                    binary_id,
                    name,
                    outcome: RecordedOutcome::Ignored,
                    attempts: 0,
                    line: n,
                });
            }
            Some("run-begin-cancel") => {
                let reason = kind
                    .get("reason")
                    .and_then(|r| r.as_str())
                    .unwrap_or("unknown")
                    .to_string();
                rec.cancelled.get_or_insert((reason, n));
            }
            Some("run-finished") => {
                let stat = |k: &str| field(kind, &["run-stats", k]).and_then(|x| x.as_u64());
                rec.initial_run_count = stat("initial-run-count");
                rec.finished_count = stat("finished-count");
            }
            _ => {}
        }
    }
    Ok(rec)
}

impl Recording {
    /// Whether the run was cancelled before every test it meant to run finished.
    pub fn cut_short(&self) -> bool {
        self.cancelled.is_some()
            && match (self.initial_run_count, self.finished_count) {
                (Some(i), Some(f)) => f < i,
                _ => true,
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> Vec<u8> {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/ci/corpus-nextest-recording.run.log.zst");
        std::fs::read(p).unwrap()
    }

    fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
        use std::io::Write;
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        for (name, bytes) in entries {
            w.start_file(*name, opts).unwrap();
            w.write_all(bytes).unwrap();
        }
        w.finish().unwrap().into_inner()
    }

    #[test]
    fn a_portable_recording_a_run_log_and_its_lines_read_the_same() {
        let zst = fixture();
        let from_zst = read(&zst).unwrap();
        assert!(from_zst.tests.len() > 10);
        let zipped = zip_of(&[("manifest.json", b"{}"), ("run.log.zst", &zst)]);
        assert!(looks_like(&zipped) && looks_like(&zst));
        assert_eq!(read(&zipped).unwrap(), from_zst);
        let lines = event_lines(&zst).unwrap();
        assert!(looks_like(&lines));
        assert_eq!(read(&lines).unwrap(), from_zst);
    }

    #[test]
    fn bad_recordings_are_errors_naming_what_is_wrong() {
        let e = read(&zip_of(&[("manifest.json", b"{}")])).unwrap_err();
        assert!(e.contains("no run.log.zst"), "{e}");
        let mut lines = event_lines(&fixture()).unwrap();
        lines.extend_from_slice(b"{\"timestamp\": 1, \"kind\": {\"kind\": \"test-finished\"}}\n");
        let n = String::from_utf8_lossy(&lines).lines().count();
        let e = read(&lines).unwrap_err();
        assert_eq!(
            e,
            format!("event line {n}: test-finished without `test-instance.binary-id` and `.name`")
        );
        let e = read(b"{\"timestamp\": 1, \"kind\"").unwrap_err();
        assert!(e.starts_with("event line 1: not JSON"), "{e}");
    }
}
