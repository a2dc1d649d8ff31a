//! `--since REV` on a private copy of the sample workspace committed to git: only the
//! mutations whose occurrences meet the working tree's diff against the merge base run, and
//! a revision that does not fit the tree is refused.

mod common;

use common::Sandbox;

/// The sample catalog without its TIMEOUT mutation (which alone costs the timeout floor).
fn short_catalog(sb: &Sandbox) -> String {
    let text = sb.read("mutations/sample.toml");
    let cut = text.find("[[mutation]]\nid = \"countdown-hangs\"").unwrap();
    sb.write("mutations/short.toml", &text[..cut]);
    sb.ws.join("mutations/short.toml").display().to_string()
}

fn commit_all(ws: &std::path::Path) {
    let repo = git2::Repository::open(ws).unwrap();
    let mut index = repo.index().unwrap();
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("test", "test@example.invalid").unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, "sample", &tree, &[])
        .unwrap();
}

fn ids(dir: &std::path::Path) -> Vec<String> {
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("sample/battery.json")).unwrap())
            .unwrap();
    assert_eq!(r["since"], "HEAD");
    assert!(r["unfalsified"].is_null());
    r["mutations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn only_mutations_meeting_the_diff_run_and_a_foreign_revision_is_refused() {
    let sb = Sandbox::new();
    let catalog = short_catalog(&sb);
    commit_all(&sb.ws);
    let out = sb.dir.path();
    let run = |name: &str| {
        let dir = out.join(name);
        let r = sb.run(&[
            "battery",
            &catalog,
            "--since",
            "HEAD",
            "--reports",
            dir.to_str().unwrap(),
        ]);
        (r, dir)
    };

    // Nothing changed: nothing runs.
    let (clean, d0) = run("clean");
    assert_eq!(clean.code, Some(0), "{clean:?}");
    assert!(ids(&d0).is_empty());

    // An uncommitted edit of the line `clamp-upper-inverted` mutates, and of a line of
    // src/lib.rs between `max-takes-min` (line 14) and `even-negative-odd` (line 19) that
    // no mutation covers: only the first runs.
    sb.edit("src/crlf.rs", "if x > hi {", "if x > hi  {");
    sb.edit(
        "src/lib.rs",
        "/// Whether `n` is even",
        "/// Whether `n` is even,",
    );
    let (edited, d1) = run("edited");
    assert!(
        edited.code == Some(0) || edited.code == Some(1),
        "{edited:?}"
    );
    assert_eq!(ids(&d1), ["clamp-upper-inverted"]);

    // The line of `max-takes-min` edited too: it joins.
    sb.edit(
        "src/lib.rs",
        "xs.iter().copied().max()",
        "xs.iter().copied().max() ",
    );
    let (more, d2) = run("more");
    assert!(more.code == Some(0) || more.code == Some(1), "{more:?}");
    assert_eq!(ids(&d2), ["max-takes-min", "clamp-upper-inverted"]);

    // A revision the repository does not have is refused, naming it.
    sb.run(&["battery", &catalog, "--since", "no-such-branch"])
        .expect_code(2)
        .stderr_has("--since no-such-branch: no-such-branch does not name a commit");
}
