//! base-check on merge queues and merge trains, on job logs captured from real git checkouts
//! (fixtures/ci/checkout/, made by scripts/capture-checkout-logs): a GitHub `merge_group` run
//! (`gh-readonly-queue/main/pr-<n>-<sha>`) and a GitLab merge train car
//! (`refs/merge-requests/<iid>/train`), each on three histories: the fix in a request queued
//! ahead, the fix only on the request's own head, the fix in neither. Every answer equals
//! what git itself says (`git merge-base --is-ancestor`) and none is a false yes. Needs the
//! `git` command-line tool.

use std::collections::HashMap;
use std::path::Path;

use git2::Repository;
use harness::ci::cibase::{self, Answer, BaseReport, Questions, TestedKind};
use harness::system::exit::ExitCode;

use crate::common;
use common::checkout::{fixtures, git, git_is_ancestor, server_of};

/// The named commits and each case's checked-out sha, as real git said at capture time.
fn truth() -> (HashMap<String, String>, HashMap<String, String>) {
    let text = std::fs::read_to_string(fixtures().join("truth.txt")).unwrap();
    let (mut commits, mut steps) = (HashMap::new(), HashMap::new());
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        match line.split_whitespace().collect::<Vec<_>>().as_slice() {
            ["commit", name, sha] => {
                commits.insert(name.to_string(), sha.to_string());
            }
            [case, "step1", ".", sha] => {
                steps.insert(case.to_string(), sha.to_string());
            }
            _ => {}
        }
    }
    (commits, steps)
}

fn check(
    repo: &Path,
    log: &str,
    commits: &[(&str, String)],
    base_branch: Option<&str>,
) -> BaseReport {
    let repo = Repository::open(repo).unwrap();
    let questions = Questions {
        commits: commits
            .iter()
            .map(|(l, r)| (l.to_string(), r.clone()))
            .collect(),
        base_branch: base_branch.map(str::to_string),
        ..Questions::default()
    };
    cibase::check(&repo, &cibase::parse_jobs(log), &questions, "job.log")
}

fn log(case: &str) -> String {
    std::fs::read_to_string(fixtures().join(format!("{case}.log"))).unwrap()
}

/// Case, bundle, the request's own head, the requests queued ahead, and for each named
/// commit (fix: request 31/41's fix, fix33: a fix on request 33/43's own branch, late: a fix
/// that landed on main after the queue was made) what brought it in.
struct Case {
    case: &'static str,
    bundle: &'static str,
    head: &'static str,
    ahead: &'static [u64],
    came_with: [&'static str; 3],
}

const CASES: [Case; 6] = [
    Case {
        case: "gh-queue-fix-ahead",
        bundle: "queue-app.bundle",
        head: "q-head32",
        ahead: &[31],
        came_with: ["request #31", "none", "none"],
    },
    Case {
        case: "gh-queue-fix-on-head",
        bundle: "queue-app.bundle",
        head: "q-head33",
        ahead: &[32],
        came_with: ["none", "this request's head", "none"],
    },
    Case {
        case: "gh-queue-fix-absent",
        bundle: "queue-app.bundle",
        head: "q-head32",
        ahead: &[],
        came_with: ["none", "none", "none"],
    },
    Case {
        case: "gl-train-fix-ahead",
        bundle: "queue-gitlab-app.bundle",
        head: "q-head32",
        ahead: &[41],
        came_with: ["request #41", "none", "none"],
    },
    Case {
        case: "gl-train-fix-on-head",
        bundle: "queue-gitlab-app.bundle",
        head: "q-head33",
        ahead: &[42],
        came_with: ["none", "this request's head", "none"],
    },
    Case {
        case: "gl-train-fix-absent",
        bundle: "queue-gitlab-app.bundle",
        head: "q-head32",
        ahead: &[],
        came_with: ["none", "none", "none"],
    },
];

fn named(commits: &HashMap<String, String>) -> [(&'static str, String); 3] {
    [
        ("fix", commits["q-fix"].clone()),
        ("fix33", commits["q-fix33"].clone()),
        ("late", commits["q-late"].clone()),
    ]
}

#[test]
fn queue_entries_name_the_tested_commit_its_base_head_and_the_requests_ahead() {
    let (commits, steps) = truth();
    for c in &CASES {
        let (_d, repo) = server_of(c.bundle);
        let report = check(&repo, &log(c.case), &named(&commits), None);
        let table = report.to_table();
        let j = &report.jobs[0];
        let tested = &steps[c.case];
        assert_eq!(j.kind, Some(TestedKind::Queue), "{}: {table}", c.case);
        assert_eq!(j.tested.as_deref(), Some(tested.as_str()), "{}", c.case);
        assert_eq!(
            j.base.as_deref(),
            Some(commits["q-base"].as_str()),
            "{}: {table}",
            c.case
        );
        assert_eq!(
            j.head.as_deref(),
            Some(commits[c.head].as_str()),
            "{}",
            c.case
        );
        let q = j.queue.as_ref().unwrap();
        let ahead: Vec<u64> = q.ahead.iter().filter_map(|e| e.request).collect();
        assert_eq!(ahead, c.ahead, "{}: {table}", c.case);
        assert_eq!(q.base_branch, "main");
        for (a, want) in j.answers.iter().zip(c.came_with) {
            let commit = a.commit.as_deref().unwrap();
            // Every answer is git's, so none is a false yes.
            assert_eq!(
                a.in_tested.answer,
                git_is_ancestor(&repo, commit, tested),
                "{} {}: {table}",
                c.case,
                a.label
            );
            assert_eq!(
                a.in_base.as_ref().unwrap().answer,
                git_is_ancestor(&repo, commit, &commits["q-base"]),
                "{} {}",
                c.case,
                a.label
            );
            let came = a.came_with.as_deref().unwrap();
            assert!(came.starts_with(want), "{} {}: {came}", c.case, a.label);
        }
        assert_eq!(report.exit_code, ExitCode::AllMet, "{}: {table}", c.case);
    }
}

#[test]
fn what_follows_names_where_the_fix_came_from() {
    let (commits, _) = truth();
    let (_d, repo) = server_of("queue-app.bundle");
    let ahead = check(&repo, &log("gh-queue-fix-ahead"), &named(&commits), None);
    let f = &ahead.jobs[0].follows;
    assert!(
        f[0].contains("came only with request #31") && f[0].contains("stays ahead in the queue"),
        "{f:?}"
    );
    let absent = check(&repo, &log("gh-queue-fix-absent"), &named(&commits), None);
    let f = &absent.jobs[0].follows;
    assert!(
        f[0].starts_with("fix is in neither the queue's base")
            && f[0].contains("never ran with it"),
        "{f:?}"
    );
    insta::assert_snapshot!("queue_fix_ahead_table", ahead.to_table());
    let (_d, repo) = server_of("queue-gitlab-app.bundle");
    let head = check(&repo, &log("gl-train-fix-on-head"), &named(&commits), None);
    insta::assert_snapshot!("train_fix_on_head_markdown", head.to_markdown());
}

#[test]
fn without_the_base_branch_or_with_contradicting_evidence_nothing_is_a_yes() {
    let (commits, _) = truth();
    let (_d, repo) = server_of("queue-app.bundle");
    // The base branch is not in the repository: where the queue meets it cannot be told.
    git(&repo, &["update-ref", "-d", "refs/heads/main"]);
    let r = check(&repo, &log("gh-queue-fix-ahead"), &named(&commits), None);
    assert_eq!(r.exit_code, ExitCode::Refused);
    assert!(
        r.jobs[0]
            .notes
            .iter()
            .any(|n| n.contains("`git fetch origin main`")),
        "{:?}",
        r.jobs[0].notes
    );
    for a in &r.jobs[0].answers {
        assert_eq!(a.in_tested.answer, Answer::Unknown, "{}", a.label);
    }
    // --base-branch names it as another revision.
    let base = commits["q-base"].clone();
    let r = check(
        &repo,
        &log("gh-queue-fix-ahead"),
        &named(&commits),
        Some(&base),
    );
    assert_eq!(r.exit_code, ExitCode::AllMet, "{}", r.to_table());
    assert!(
        r.jobs[0].answers[0]
            .came_with
            .as_deref()
            .unwrap()
            .starts_with("request #31")
    );

    // The queue's ref names another request than the tested commit's message: unknown.
    let (_d, repo) = server_of("queue-app.bundle");
    let edited = log("gh-queue-fix-ahead").replace("/pr-32-", "/pr-99-");
    let r = check(&repo, &edited, &named(&commits), None);
    assert_eq!(r.exit_code, ExitCode::Refused);
    assert!(
        r.jobs[0]
            .notes
            .iter()
            .any(|n| n.contains("names request 99")),
        "{:?}",
        r.jobs[0].notes
    );
    assert!(
        r.jobs[0]
            .answers
            .iter()
            .all(|a| a.in_tested.answer == Answer::Unknown)
    );
}
