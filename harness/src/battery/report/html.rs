//! The battery's HTML report: one self-contained page (`reports/<catalog>/index.html`) that
//! renders the Stryker document with the `mutation-testing-elements` web component and
//! shows the kill matrix beside it.
//!
//! The component's released bundle (npm `mutation-testing-elements`, Apache-2.0) is stored
//! unchanged in `harness/assets/mutation-testing-elements/` and inlined into the page, so
//! the page needs no network. The report itself is embedded as a JSON data block
//! (`<script type="application/json">`) and handed to the component's `report` property.

use crate::battery::report::verdict::{Cell, Expectation, KillMatrix};

use crate::battery::report::schema::{BatteryReport, Status};

/// The component's released bundle (`dist/mutation-test-elements.js` of npm
/// `mutation-testing-elements`; version and checksum in the assets folder's README).
pub const ELEMENTS_BUNDLE: &str =
    include_str!("../../../assets/mutation-testing-elements/mutation-test-elements.js");

/// The bundle's npm version, as recorded in the assets folder's README.
pub const ELEMENTS_VERSION: &str = "3.9.0";

/// Escapes text for HTML element content and double-quoted attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Serialises `value` as JSON that is safe inside a `<script>` element: every `<`, `>`
/// and `&` is written as a `\u00XX` escape (still the same JSON value), so no `</script>`
/// or `<!--` in a title, a test name or a source file can end or re-mode the element.
pub fn script_json(value: &serde_json::Value) -> String {
    let raw = serde_json::to_string(value).expect("a serde_json::Value serialises");
    let mut out = String::with_capacity(raw.len());
    for ch in raw.chars() {
        match ch {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            // JSON allows these raw in strings; JavaScript before ES2019 did not.
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// The page's title line, e.g. `sample: 6 mutations: 4 MET, 2 UNMET; 3 killed, 1 survived
/// (exit 1)`: the expectations first, which decide the exit code (a gap's survival is MET,
/// a kill by other tests than the expected ones UNMET).
fn title(r: &BatteryReport) -> String {
    let s = &r.summary;
    match r.status {
        Status::Complete => format!(
            "{}: {} mutations: {} MET, {} UNMET; {} killed, {} survived (exit {})",
            r.catalog.name, s.mutations, s.met, s.unmet, s.killed, s.survived, r.exit_code
        ),
        Status::Refused => format!(
            "{}: refused {} (exit {})",
            r.catalog.name,
            r.refusal
                .as_ref()
                .map(|f| f.kind.to_string())
                .unwrap_or_default(),
            r.exit_code
        ),
        Status::Interrupted => format!("{}: interrupted (exit {})", r.catalog.name, r.exit_code),
    }
}

/// The headline's expectation of each mutation: one row per mutation (id, role, verdict,
/// MET or UNMET with the first reason), coloured by the expectation, not by the verdict: an
/// expected survivor (a gap) is green, a kill the catalog did not expect red.
pub fn expectations_table(r: &BatteryReport) -> String {
    let mut s = String::from(
        "<table id=\"expectations\">\n<thead><tr><th>mutation</th><th>role</th><th>verdict</th><th>expectation</th></tr></thead>\n<tbody>\n",
    );
    for m in &r.mutations {
        let (class, word) = match m.expectation {
            Expectation::Met => ("met", "MET"),
            Expectation::Unmet => ("unmet", "UNMET"),
        };
        let note = crate::battery::report::text::note(m);
        let why = if note.is_empty() {
            String::new()
        } else {
            format!(": {}", escape(&note))
        };
        s.push_str(&format!(
            "<tr class=\"{class}\"><td><code>{}</code></td><td>{}</td><td>{}</td><td class=\"{class}\"><strong>{word}</strong>{why}</td></tr>\n",
            escape(&m.id),
            escape(&m.role.to_string()),
            escape(&m.verdict.to_string()),
        ));
    }
    s.push_str("</tbody>\n</table>\n");
    s
}

fn cell_words(c: Cell) -> &'static str {
    match c {
        Cell::Killed => "failed under the mutation (killed it)",
        Cell::Passed => "passed under the mutation",
        Cell::Ignored => "ignored",
        Cell::Unfinished => "unfinished at the timeout",
        Cell::NotRun => "not run (the mutation did not compile)",
        Cell::NoResult => "no result (the test binary died before reporting it)",
        Cell::Missing => "missing (the test does not exist under the mutation)",
        Cell::NotReached => {
            "not run (the reach run showed it does not execute the mutated function)"
        }
    }
}

/// The kill matrix as an HTML table: one row per listed test, one column per mutation,
/// each cell the matrix symbol with its meaning as a tooltip.
pub fn kill_matrix_table(m: &KillMatrix) -> String {
    let mut s = String::from("<table class=\"kill-matrix\">\n<thead><tr><th>test</th>");
    for id in &m.mutations {
        s.push_str(&format!("<th><code>{}</code></th>", escape(id)));
    }
    s.push_str("</tr></thead>\n<tbody>\n");
    for (test, row) in m.tests.iter().zip(&m.cells) {
        s.push_str(&format!("<tr><th><code>{}</code></th>", escape(test)));
        for (id, c) in m.mutations.iter().zip(row) {
            s.push_str(&format!(
                "<td class=\"{}\" title=\"{}\">{}</td>",
                match c {
                    Cell::Killed => "k",
                    Cell::Passed => "p",
                    _ => "o",
                },
                escape(&format!("{test} under {id}: {}", cell_words(*c))),
                escape(c.symbol())
            ));
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody>\n</table>\n");
    s
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:0}\
header,section{padding:0 1.5rem}\
table.kill-matrix{border-collapse:collapse;font-size:.8rem}\
table.kill-matrix th,table.kill-matrix td{border:1px solid #ccc;padding:.15rem .35rem}\
table.kill-matrix thead th{writing-mode:vertical-rl;vertical-align:bottom}\
table.kill-matrix tbody th{text-align:left;font-weight:normal}\
td.k{background:#c8f0c8;text-align:center}td.p{text-align:center}\
td.o{background:#f5e6b8;text-align:center}\
table#expectations{border-collapse:collapse;font-size:.9rem;margin-bottom:1rem}\
table#expectations th,table#expectations td{border:1px solid #ccc;padding:.15rem .5rem;text-align:left}\
td.met{background:#c8f0c8}td.unmet{background:#f4c7c3}";

/// The whole page. `stryker` is the document [`crate::battery::report::stryker::stryker`]
/// built for `r` (absent when the battery did not complete: the page then shows the
/// headline and the matrix of what ran, without the component).
pub fn page(r: &BatteryReport, stryker: Option<&serde_json::Value>) -> String {
    let title = title(r);
    let mut s = String::new();
    s.push_str("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    s.push_str(&format!("<title>{}</title>\n", escape(&title)));
    s.push_str(&format!("<style>{STYLE}</style>\n"));
    if stryker.is_some() {
        s.push_str(&format!(
            "<!-- mutation-testing-elements {ELEMENTS_VERSION} (Apache-2.0), inlined unchanged -->\n<script>\n"
        ));
        s.push_str(ELEMENTS_BUNDLE);
        s.push_str("\n</script>\n");
    }
    s.push_str("</head>\n<body>\n<header>\n");
    s.push_str(&format!(
        "<h1>Mutation battery <code>{}</code></h1>\n",
        escape(&r.catalog.name)
    ));
    s.push_str(&format!("<p id=\"headline\">{}</p>\n", escape(&title)));
    if let Some(f) = &r.refusal {
        s.push_str(&format!(
            "<p id=\"refusal\"><strong>{}</strong>: {}</p>\n",
            escape(&f.kind.to_string()),
            escape(&f.detail)
        ));
    }
    if !r.mutations.is_empty() {
        s.push_str(
            "<p>Expectations (what the exit code counts; the component below colours by \
             verdict, in which a gap's expected survival is red):</p>\n",
        );
        s.push_str(&expectations_table(r));
    }
    s.push_str("</header>\n");
    if let Some(doc) = stryker {
        s.push_str(&format!(
            "<mutation-test-report-app title-postfix=\"{}\"></mutation-test-report-app>\n",
            escape(&r.catalog.name)
        ));
        s.push_str("<script type=\"application/json\" id=\"battery-report\">");
        s.push_str(&script_json(doc));
        s.push_str("</script>\n<script>\n");
        s.push_str(
            "document.querySelector('mutation-test-report-app').report = \
             JSON.parse(document.getElementById('battery-report').textContent);\n",
        );
        s.push_str("</script>\n");
    }
    if !r.kill_matrix.mutations.is_empty() {
        s.push_str("<section>\n<h2>Kill matrix</h2>\n");
        s.push_str(
            "<p>K: the test failed under the mutation; .: passed; T: unfinished at the \
             timeout; -: not run; i: ignored; ?: no result (the binary died); x: the test is \
             missing under the mutation.</p>\n",
        );
        s.push_str(&kill_matrix_table(&r.kill_matrix));
        s.push_str("</section>\n");
    }
    s.push_str("</body>\n</html>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The text of the JSON data block, as an HTML parser would cut it: from the opening
    /// tag to the first `</script` (case-insensitive), which is where the element ends.
    fn data_block(page: &str) -> &str {
        let open = "<script type=\"application/json\" id=\"battery-report\">";
        let start = page.find(open).expect("data block present") + open.len();
        let end = page[start..]
            .to_ascii_lowercase()
            .find("</script")
            .expect("data block closed");
        &page[start..start + end]
    }

    proptest! {
        #[test]
        fn any_text_survives_the_data_block(text in ".*", tail in "(</script>|<!--|<script>|]]>|\u{2028})*") {
            let doc = serde_json::json!({"title": format!("{text}{tail}"), "nested": [tail.clone()]});
            let json = script_json(&doc);
            prop_assert!(!json.contains('<'), "a '<' reached the page: {json}");
            let back: serde_json::Value = serde_json::from_str(&json).unwrap();
            prop_assert_eq!(back, doc);
        }

        #[test]
        fn escape_leaves_no_markup(text in ".*") {
            let e = escape(&text);
            prop_assert!(!e.contains('<') && !e.contains('>') && !e.contains('"'));
        }
    }

    #[test]
    fn bundle_is_inlined_unchanged_and_cannot_end_its_element() {
        // The bundle is stored byte for byte as npm ships it; inlined as is, it must not
        // contain the sequences that would end or re-mode a script element.
        let lower = ELEMENTS_BUNDLE.to_ascii_lowercase();
        assert!(!lower.contains("</script"));
        assert!(!lower.contains("<script"));
        assert!(ELEMENTS_BUNDLE.contains("mutation-test-report-app"));
    }

    #[test]
    fn data_block_round_trips_a_hostile_report() {
        let doc = serde_json::json!({
            "files": {"src/a.rs": {"source": "// </script><script>alert(1)</script> <!-- x", "mutants": []}}
        });
        let page_text = format!(
            "<script type=\"application/json\" id=\"battery-report\">{}</script>",
            script_json(&doc)
        );
        let back: serde_json::Value = serde_json::from_str(data_block(&page_text)).unwrap();
        assert_eq!(back, doc);
    }

    #[test]
    fn kill_matrix_table_has_one_cell_per_test_and_mutation() {
        let m = KillMatrix {
            tests: vec!["t::a".into(), "t::<b>".into()],
            mutations: vec!["m1".into(), "m&2".into()],
            cells: vec![
                vec![Cell::Killed, Cell::Passed],
                vec![Cell::NotRun, Cell::Killed],
            ],
        };
        let html = kill_matrix_table(&m);
        assert_eq!(html.matches("<td ").count(), 4);
        assert_eq!(html.matches("<tr>").count(), 3);
        assert!(html.contains("<code>t::&lt;b&gt;</code>"));
        assert!(html.contains("<code>m&amp;2</code>"));
        assert!(
            html.contains("title=\"t::a under m1: failed under the mutation (killed it)\">K</td>")
        );
    }
}
