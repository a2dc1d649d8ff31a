//! Base check against real git histories built with git2 in temporary directories, and
//! CI logs written in GitHub Actions' and GitLab CI's raw formats.

use std::path::Path;
use std::process::Command;

use git2::{Oid, Repository, Signature, Time};
use harness::ci::cibase::{self, Answer, BaseReport, JobStatus, Questions};
use harness::system::exit::ExitCode;

/// A commit with an empty tree, a fixed author and the given time (seconds): the same
/// inputs always give the same sha, so snapshots are stable.
fn commit(repo: &Repository, parents: &[Oid], msg: &str, time: i64) -> Oid {
    let sig = Signature::new("Dev", "dev@example.com", &Time::new(time, 0)).unwrap();
    let tree_id = repo.treebuilder(None).unwrap().write().unwrap();
    let tree = repo.find_tree(tree_id).unwrap();
    let parents: Vec<git2::Commit> = parents
        .iter()
        .map(|p| repo.find_commit(*p).unwrap())
        .collect();
    let refs: Vec<&git2::Commit> = parents.iter().collect();
    repo.commit(None, &sig, &sig, msg, &tree, &refs).unwrap()
}

/// `cibase::check` with the named commits and an optional `--merge`.
fn check(
    repo: &Repository,
    jobs: &[cibase::Job],
    commits: &[(String, String)],
    merge: Option<&str>,
    log: &str,
) -> BaseReport {
    let questions = Questions {
        commits: commits.to_vec(),
        merge: merge.map(str::to_string),
        pr_head: None,

        ..Questions::default()
    };
    cibase::check(repo, jobs, &questions, log)
}

fn branch(repo: &Repository, name: &str, oid: Oid) {
    repo.reference(&format!("refs/heads/{name}"), oid, true, "test")
        .unwrap();
}

/// GitHub Actions raw-log lines for one job: ISO timestamps, `##[group]`, the checkout of
/// a pull request's merge ref and the job's result.
fn github_job(start: &str, pr: u32, merge: Oid, head: Oid, base: Oid, red: bool) -> String {
    let m = merge.to_string();
    let lines = vec![
        "Current runner version: '2.321.0'".to_string(),
        "##[group]Operating System".to_string(),
        "Ubuntu".to_string(),
        "##[endgroup]".to_string(),
        format!("Complete job name: test (pr {pr})"),
        "##[group]Run actions/checkout@v4".to_string(),
        "with:".to_string(),
        "##[endgroup]".to_string(),
        "##[group]Fetching the repository".to_string(),
        format!(
            "[command]/usr/bin/git -c protocol.version=2 fetch --no-tags --prune --no-recurse-submodules --depth=1 origin +{m}:refs/remotes/pull/{pr}/merge"
        ),
        "##[endgroup]".to_string(),
        "##[group]Checking out the ref".to_string(),
        format!("[command]/usr/bin/git checkout --progress --force refs/remotes/pull/{pr}/merge"),
        format!("Note: switching to 'refs/remotes/pull/{pr}/merge'."),
        format!("HEAD is now at {} Merge {head} into {base}", &m[..7]),
        "##[endgroup]".to_string(),
        "[command]/usr/bin/git log -1 --format='%H'".to_string(),
        format!("'{m}'"),
        "##[group]Run scripts/test".to_string(),
        "test result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.01s".to_string(),
        if red {
            "##[error]Process completed with exit code 101.".to_string()
        } else {
            "Post job cleanup.".to_string()
        },
        "Cleaning up orphan processes".to_string(),
    ];
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| format!("{start}:{:02}.{:07}Z {l}\n", i, i * 1234))
        .collect()
}

fn gitlab_job(sha8: &str, iid: u32, green: bool) -> String {
    format!(
        "\u{1b}[0KRunning with gitlab-runner 17.5.0 (8e4ed3d3)\u{1b}[0;m\n\
         \u{1b}[0K  on runner-1 abcdef, system ID: s_0123\u{1b}[0;m\n\
         section_start:1732870000:get_sources\r\u{1b}[0K\u{1b}[0K\u{1b}[36;1mGetting source from Git repository\u{1b}[0;m\u{1b}[0;m\n\
         \u{1b}[32;1mFetching changes with git depth set to 20...\u{1b}[0;m\n\
         \u{1b}[32;1mChecking out {sha8} as detached HEAD (ref is refs/merge-requests/{iid}/merge)...\u{1b}[0;m\n\
         section_end:1732870003:get_sources\r\u{1b}[0K\n\
         $ cargo test --workspace\n\
         {}\n",
        if green {
            "\u{1b}[32;1mJob succeeded\u{1b}[0;m"
        } else {
            "\u{1b}[31;1mERROR: Job failed: exit code 101\u{1b}[0;m"
        }
    )
}

fn answers(report: &BaseReport, job: usize) -> Vec<(String, Answer, Answer)> {
    report.jobs[job]
        .answers
        .iter()
        .map(|a| {
            (
                a.label.clone(),
                a.in_base.as_ref().unwrap().answer,
                a.in_tested.answer,
            )
        })
        .collect()
}

fn commits(list: &[(&str, String)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(l, r)| (l.to_string(), r.clone()))
        .collect()
}

/// main: c1 - c2 - fix(c3, t=3000) - c4; the PR branch forks at c2 with one commit.
/// Job 1 ran at t=5000, after the fix landed, but on a merge ref computed when main was at
/// c2: its base predates the fix. Job 2 ran on a merge ref recomputed onto c4.
struct PrHistory {
    _dir: tempfile::TempDir,
    repo: Repository,
    c1: Oid,
    c2: Oid,
    fix: Oid,
    c4: Oid,
    pr: Oid,
    stale_merge: Oid,
    fresh_merge: Oid,
}

fn pr_history() -> PrHistory {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repository::init(dir.path()).unwrap();
    let c1 = commit(&repo, &[], "c1", 1000);
    let c2 = commit(&repo, &[c1], "c2", 2000);
    let fix = commit(&repo, &[c2], "fix: admission budget", 3000);
    let c4 = commit(&repo, &[fix], "c4", 4000);
    let pr = commit(&repo, &[c2], "pr: feature", 2500);
    branch(&repo, "main", c4);
    branch(&repo, "feature", pr);
    repo.tag_lightweight("v1", &repo.find_object(c1, None).unwrap(), false)
        .unwrap();
    let stale_merge = commit(&repo, &[c2, pr], &format!("Merge {pr} into {c2}"), 2600);
    let fresh_merge = commit(&repo, &[c4, pr], &format!("Merge {pr} into {c4}"), 4600);
    repo.reference("refs/pull/12/merge", fresh_merge, true, "test")
        .unwrap();
    PrHistory {
        _dir: dir,
        repo,
        c1,
        c2,
        fix,
        c4,
        pr,
        stale_merge,
        fresh_merge,
    }
}

#[test]
fn stale_base_predates_a_fix_that_landed_before_the_job_ran() {
    let h = pr_history();
    // Job timestamps (t=5000, 1970-01-01T01:23:20Z) are after the fix (t=3000): only
    // ancestry decides.
    let log = github_job("1970-01-01T01:23", 12, h.stale_merge, h.pr, h.c2, true)
        + &github_job("1970-01-01T01:25", 12, h.fresh_merge, h.pr, h.c4, false);
    let jobs = cibase::parse_jobs(&log);
    assert_eq!(jobs.len(), 2, "one answer per job");
    assert_eq!(jobs[0].status, JobStatus::Red);
    assert_eq!(jobs[1].status, JobStatus::Green);
    let report = check(
        &h.repo,
        &jobs,
        &commits(&[
            ("fix", h.fix.to_string()),
            ("pr-head", h.pr.to_string()[..10].to_string()),
            ("release", "v1".to_string()),
            ("tip", "main".to_string()),
        ]),
        None,
        "job.log",
    );
    assert_eq!(
        report.jobs[0].base.as_deref(),
        Some(h.c2.to_string().as_str())
    );
    assert_eq!(
        report.jobs[0].answers[2].commit,
        Some(h.c1.to_string()),
        "tag v1"
    );
    assert_eq!(
        report.jobs[0].tested.as_deref(),
        Some(h.stale_merge.to_string().as_str())
    );
    assert_eq!(
        answers(&report, 0),
        [
            ("fix".to_string(), Answer::No, Answer::No),
            ("pr-head".to_string(), Answer::No, Answer::Yes),
            ("release".to_string(), Answer::Yes, Answer::Yes),
            ("tip".to_string(), Answer::No, Answer::No),
        ]
    );
    assert_eq!(
        answers(&report, 1),
        [
            ("fix".to_string(), Answer::Yes, Answer::Yes),
            ("pr-head".to_string(), Answer::No, Answer::Yes),
            ("release".to_string(), Answer::Yes, Answer::Yes),
            // A commit equal to the base is in it.
            ("tip".to_string(), Answer::Yes, Answer::Yes),
        ]
    );
    assert!(
        report.jobs[0].follows[0].contains("stale base")
            && report.jobs[0].follows[0].contains("re-running reuses the same merge ref"),
        "{:?}",
        report.jobs[0].follows
    );
    assert_eq!(report.exit_code, ExitCode::AllMet);
    insta::assert_snapshot!("stale_base_table", report.to_table());
    insta::assert_snapshot!("stale_base_markdown", report.to_markdown());
    insta::assert_json_snapshot!("stale_base_json", report);
}

#[test]
fn fix_merged_from_a_side_branch_is_in_later_bases_only() {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repository::init(dir.path()).unwrap();
    let c1 = commit(&repo, &[], "c1", 100);
    let c2 = commit(&repo, &[c1], "c2", 200);
    let fix = commit(&repo, &[c1], "fix on a branch", 150);
    let merged = commit(&repo, &[c2, fix], "Merge branch 'fix'", 300);
    let pr = commit(&repo, &[c1], "pr", 160);
    let m_before = commit(&repo, &[c2, pr], &format!("Merge {pr} into {c2}"), 310);
    let m_after = commit(
        &repo,
        &[merged, pr],
        &format!("Merge {pr} into {merged}"),
        320,
    );
    let log = github_job("2026-11-29T10:00", 3, m_before, pr, c2, true)
        + &github_job("2026-11-29T10:05", 3, m_after, pr, merged, true);
    let report = check(
        &repo,
        &cibase::parse_jobs(&log),
        &commits(&[("fix", fix.to_string())]),
        None,
        "job.log",
    );
    assert_eq!(
        answers(&report, 0),
        [("fix".to_string(), Answer::No, Answer::No)]
    );
    assert_eq!(
        answers(&report, 1),
        [("fix".to_string(), Answer::Yes, Answer::Yes)]
    );
    // Red with the fix in its base: the fix did not fix it.
    assert!(
        report.jobs[1].follows[0].contains("did not fix"),
        "{:?}",
        report.jobs[1].follows
    );
}

#[test]
fn gitlab_merged_results_takes_parents_from_the_repository() {
    let h = pr_history();
    let sha8 = &h.fresh_merge.to_string()[..8];
    let log = gitlab_job(sha8, 7, true);
    let jobs = cibase::parse_jobs(&log);
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].status, JobStatus::Green);
    let checkout = &jobs[0].steps[0];
    assert_eq!(checkout.short.as_deref(), Some(sha8));
    assert_eq!(
        checkout.ref_name.as_deref(),
        Some("refs/merge-requests/7/merge")
    );
    // A known break that landed on main after c4 is not in the tested base.
    let brk = commit(&h.repo, &[h.c4], "break", 6000);
    let report = check(
        &h.repo,
        &jobs,
        &commits(&[("break", brk.to_string()), ("fix", h.fix.to_string())]),
        None,
        "job.log",
    );
    assert_eq!(
        report.jobs[0].base.as_deref(),
        Some(h.c4.to_string().as_str())
    );
    assert_eq!(
        report.jobs[0].head.as_deref(),
        Some(h.pr.to_string().as_str())
    );
    assert_eq!(
        answers(&report, 0),
        [
            ("break".to_string(), Answer::No, Answer::No),
            ("fix".to_string(), Answer::Yes, Answer::Yes)
        ]
    );
    assert!(report.jobs[0].follows[0].contains("says nothing about now"));
    assert_eq!(report.exit_code, ExitCode::AllMet);
}

#[test]
fn gitlab_merge_ref_not_fetched_is_unknown_with_the_ref_to_fetch() {
    let h = pr_history();
    let log = gitlab_job("deadbeef", 9, false);
    let report = check(
        &h.repo,
        &cibase::parse_jobs(&log),
        &commits(&[("fix", h.fix.to_string())]),
        None,
        "job.log",
    );
    let a = &report.jobs[0].answers[0];
    assert_eq!(
        (a.in_base.as_ref().unwrap().answer, a.in_tested.answer),
        (Answer::Unknown, Answer::Unknown)
    );
    assert!(
        a.in_base
            .as_ref()
            .unwrap()
            .reason
            .contains("missing object"),
        "{}",
        a.in_base.as_ref().unwrap().reason
    );
    assert_eq!(report.exit_code, ExitCode::Refused);
    // --merge names the commit instead.
    let report = check(
        &h.repo,
        &cibase::parse_jobs(&log),
        &commits(&[("fix", h.fix.to_string())]),
        Some("refs/pull/12/merge"),
        "job.log",
    );
    assert_eq!(
        answers(&report, 0),
        [("fix".to_string(), Answer::Yes, Answer::Yes)]
    );
    assert_eq!(report.exit_code, ExitCode::AllMet);
}

#[test]
fn log_without_checkout_line_exits_2() {
    let h = pr_history();
    let log = "2026-11-29T10:00:00.0000000Z Current runner version: '2.321.0'\n2026-11-29T10:00:01.0000000Z ##[group]Run cargo test\n";
    let report = check(
        &h.repo,
        &cibase::parse_jobs(log),
        &commits(&[("fix", h.fix.to_string())]),
        None,
        "job.log",
    );
    assert_eq!(report.jobs.len(), 1);
    assert!(report.jobs[0].notes[0].contains("no checkout line"));
    assert_eq!(report.jobs[0].answers[0].in_tested.answer, Answer::Unknown);
    assert_eq!(report.exit_code, ExitCode::Refused);
    // Even with no commit asked about.
    assert_eq!(
        check(&h.repo, &cibase::parse_jobs(log), &[], None, "job.log").exit_code,
        ExitCode::Refused
    );
}

#[test]
fn abbreviation_shared_by_two_commits_is_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repository::init(dir.path()).unwrap();
    let root = commit(&repo, &[], "root", 1);
    // Commit until two share their first four hex digits (libgit2's shortest prefix).
    let mut seen = std::collections::HashMap::new();
    let mut pair = None;
    for i in 0..100_000 {
        let c = commit(&repo, &[root], &format!("c{i}"), 10);
        let prefix = c.to_string()[..4].to_string();
        if let Some(prev) = seen.insert(prefix.clone(), c) {
            pair = Some((prefix, prev, c));
            break;
        }
    }
    let (prefix, a, b) = pair.expect("a shared 4-digit prefix within 100000 commits");
    let base = commit(&repo, &[a, b], "base", 20);
    let merge = commit(
        &repo,
        &[base, root],
        &format!("Merge {root} into {base}"),
        30,
    );
    let log = github_job("2026-11-29T10:00", 1, merge, root, base, false);
    let report = check(
        &repo,
        &cibase::parse_jobs(&log),
        &commits(&[
            ("amb", prefix.clone()),
            ("a", a.to_string()[..12].to_string()),
        ]),
        None,
        "job.log",
    );
    let amb = &report.jobs[0].answers[0];
    assert_eq!(amb.in_base.as_ref().unwrap().answer, Answer::Unknown);
    assert!(
        amb.in_base
            .as_ref()
            .unwrap()
            .reason
            .starts_with(&format!("ambiguous abbreviation: {prefix}"))
            && amb
                .in_base
                .as_ref()
                .unwrap()
                .reason
                .contains(&a.to_string()[..12])
            && amb
                .in_base
                .as_ref()
                .unwrap()
                .reason
                .contains(&b.to_string()[..12]),
        "{}",
        amb.in_base.as_ref().unwrap().reason
    );
    // The longer abbreviation of one of them is answered.
    assert_eq!(
        report.jobs[0].answers[1].in_base.as_ref().unwrap().answer,
        Answer::Yes
    );
    assert_eq!(report.exit_code, ExitCode::Refused);
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("the git command-line tool is needed for the shallow-clone test");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn shallow_clone_answers_unknown_not_no() {
    let src_dir = tempfile::tempdir().unwrap();
    let src = Repository::init(src_dir.path()).unwrap();
    let mut main = vec![commit(&src, &[], "m0", 100)];
    for i in 1..10 {
        let c = commit(&src, &[main[i - 1]], &format!("m{i}"), 100 + i as i64);
        main.push(c);
    }
    let side = commit(&src, &[main[2]], "side", 500);
    branch(&src, "main", main[9]);
    branch(&src, "side", side);
    src.set_head("refs/heads/main").unwrap();
    let pr = commit(&src, &[main[9]], "pr", 600);
    let merge = commit(
        &src,
        &[main[9], pr],
        &format!("Merge {pr} into {}", main[9]),
        700,
    );

    let clone_dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", src_dir.path().display());
    git(
        clone_dir.path(),
        &[
            "clone",
            "--quiet",
            "--depth",
            "2",
            "--no-single-branch",
            &url,
            "shallow",
        ],
    );
    let repo = Repository::open(clone_dir.path().join("shallow")).unwrap();
    assert!(repo.is_shallow());

    let log = github_job("2026-11-29T10:00", 4, merge, pr, main[9], true);
    let report = check(
        &repo,
        &cibase::parse_jobs(&log),
        &commits(&[
            ("recent", main[8].to_string()),
            ("old", main[1].to_string()),
            ("side", side.to_string()),
        ]),
        None,
        "job.log",
    );
    let got: Vec<(String, Answer, String)> = report.jobs[0]
        .answers
        .iter()
        .map(|a| {
            (
                a.label.clone(),
                a.in_base.as_ref().unwrap().answer,
                a.in_base.as_ref().unwrap().reason.clone(),
            )
        })
        .collect();
    assert_eq!(got[0].1, Answer::Yes, "{got:?}");
    // Cut away by the shallow clone: the object is missing.
    assert_eq!(got[1].1, Answer::Unknown, "{got:?}");
    assert!(got[1].2.starts_with("missing object"), "{got:?}");
    // Present (its branch was fetched) but the base's history stops at the shallow
    // boundary: the walk cannot prove "no".
    assert_eq!(got[2].1, Answer::Unknown, "{got:?}");
    assert!(got[2].2.starts_with("shallow history"), "{got:?}");
    assert_eq!(report.exit_code, ExitCode::Refused);

    // Deepened, the same questions have definite answers.
    git(
        &clone_dir.path().join("shallow"),
        &["fetch", "--quiet", "--unshallow"],
    );
    let repo = Repository::open(clone_dir.path().join("shallow")).unwrap();
    let report = check(
        &repo,
        &cibase::parse_jobs(&log),
        &commits(&[("old", main[1].to_string()), ("side", side.to_string())]),
        None,
        "job.log",
    );
    assert_eq!(
        answers(&report, 0),
        [
            ("old".to_string(), Answer::Yes, Answer::Yes),
            ("side".to_string(), Answer::No, Answer::Unknown)
        ],
        "the merge commit itself was never fetched: in-merge stays unknown"
    );
}

fn harness(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(args)
        .output()
        .expect("run harness");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn cli_exit_codes_and_formats() {
    let h = pr_history();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("job.log");
    std::fs::write(
        &log,
        github_job("2026-11-29T10:00", 12, h.stale_merge, h.pr, h.c2, true),
    )
    .unwrap();
    let repo = h.repo.workdir().unwrap().display().to_string();
    let log_s = log.display().to_string();
    let fix = format!("fix={}", h.fix);
    let (code, out, err) = harness(&[
        "base-check",
        "--log",
        &log_s,
        "--repo",
        &repo,
        "--commit",
        &fix,
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("stale base"), "{out}");
    let (code, out, _) = harness(&[
        "base-check",
        "--log",
        &log_s,
        "--repo",
        &repo,
        "--commit",
        &fix,
        "--format",
        "json",
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["schema"], "harness.base-check/4");
    assert_eq!(v["jobs"][0]["answers"][0]["in_base"]["answer"], "no");
    let (code, _, _) = harness(&[
        "base-check",
        "--log",
        &log_s,
        "--repo",
        &repo,
        "--commit",
        "nope=0123456789abcdef",
    ]);
    assert_eq!(code, 2, "a missing object is unknown: exit 2");
    let (code, _, err) = harness(&[
        "base-check",
        "--log",
        &log_s,
        "--repo",
        &repo,
        "--commit",
        "fix",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("expected LABEL=REV"), "{err}");
    let (code, _, err) = harness(&["base-check", "--log", "no-such.log", "--repo", &repo]);
    assert_eq!(code, 2);
    assert!(err.contains("no-such.log"), "{err}");
}
