//! base-check on job logs captured from real git checkouts (fixtures/ci/checkout/, made by
//! scripts/capture-checkout-logs): every checkout step keeps its own evidence, a base and a
//! head exist only for a merge the CI made (GitHub's and GitLab's merge refs, GitLab's merge
//! train), a job that checked out a head ref or a branch tested that commit itself, and each
//! answer equals what git itself says (`git merge-base --is-ancestor`, `git rev-parse`) on
//! the captured server's history. Needs the `git` command-line tool.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use git2::Repository;
use harness::ci::cibase::{self, Answer, BaseReport, HeadState, Questions, TestedKind};
use harness::system::exit::ExitCode;

use crate::common;
use common::checkout::{fixtures, git, git_is_ancestor, server_of};

/// The captured server: a mirror of app.bundle, serving any commit by sha as GitHub does.
fn server() -> (tempfile::TempDir, PathBuf) {
    server_of("app.bundle")
}

/// What real git said at capture time: named commits and each step's checked-out sha.
struct Truth {
    commits: HashMap<String, String>,
    steps: Vec<(String, usize, String, String)>,
}

fn truth() -> Truth {
    let text = std::fs::read_to_string(fixtures().join("truth.txt")).unwrap();
    let mut t = Truth {
        commits: HashMap::new(),
        steps: Vec::new(),
    };
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            ["commit", name, sha] => {
                t.commits.insert(name.to_string(), sha.to_string());
            }
            [case, step, path, sha] if step.starts_with("step") => t.steps.push((
                case.to_string(),
                step[4..].parse().unwrap(),
                path.to_string(),
                sha.to_string(),
            )),
            _ => {}
        }
    }
    t
}

impl Truth {
    fn sha(&self, name: &str) -> String {
        self.commits[name].clone()
    }
}

fn git_rev(repo: &Path, rev: &str) -> String {
    String::from_utf8(git(repo, &["rev-parse", rev]).stdout)
        .unwrap()
        .trim()
        .to_string()
}

fn log(case: &str) -> String {
    std::fs::read_to_string(fixtures().join(format!("{case}.log"))).unwrap()
}

fn run(repo: &Path, case: &str, commits: &[(&str, String)], pr_head: Option<String>) -> BaseReport {
    let repo = Repository::open(repo).unwrap();
    let questions = Questions {
        commits: commits
            .iter()
            .map(|(l, r)| (l.to_string(), r.clone()))
            .collect(),
        merge: None,
        pr_head,

        ..Questions::default()
    };
    cibase::check(
        &repo,
        &cibase::parse_jobs(&log(case)),
        &questions,
        &format!("{case}.log"),
    )
}

/// Each answer of job 1 equals git's: in base = ancestor of the merge's first parent, in
/// merge = ancestor of the merge.
fn assert_answers_are_gits(repo: &Path, report: &BaseReport, merge: &str) {
    let base = git_rev(repo, &format!("{merge}^1"));
    let j = &report.jobs[0];
    assert_eq!(j.tested.as_deref(), Some(merge));
    assert_eq!(j.base.as_deref(), Some(base.as_str()));
    assert_eq!(j.head, Some(git_rev(repo, &format!("{merge}^2"))));
    for a in &j.answers {
        let c = a.commit.as_deref().unwrap_or(&a.rev);
        assert_eq!(
            a.in_base.as_ref().unwrap().answer,
            git_is_ancestor(repo, c, &base),
            "{}: in base",
            a.label
        );
        assert_eq!(
            a.in_tested.answer,
            git_is_ancestor(repo, c, merge),
            "{}: in merge",
            a.label
        );
    }
}

#[test]
fn every_checkout_step_keeps_its_own_sha_and_place() {
    let t = truth();
    let cases = [
        "stale-base",
        "merge-then-base",
        "merge-then-other-repo",
        "merge-ref-moved",
        "rebased",
    ];
    for case in cases {
        let jobs = cibase::parse_jobs(&log(case));
        assert_eq!(jobs.len(), 1, "{case}");
        let want: Vec<_> = t.steps.iter().filter(|s| s.0 == case).collect();
        assert_eq!(
            jobs[0].steps.len(),
            want.len(),
            "{case}: {:#?}",
            jobs[0].steps
        );
        for (case, n, path, sha) in want {
            let s = &jobs[0].steps[n - 1];
            assert_eq!(s.full.as_deref(), Some(sha.as_str()), "{case} step {n}");
            assert_eq!(s.place(), path, "{case} step {n}");
            assert_eq!(s.depth, Some(1), "{case} step {n}");
        }
    }
    // The second repository's step names that repository, the first the job's own.
    let jobs = cibase::parse_jobs(&log("merge-then-other-repo"));
    assert_eq!(jobs[0].steps[0].repository.as_deref(), Some("acme/app"));
    assert_eq!(
        jobs[0].steps[1].repository.as_deref(),
        Some("acme/bench-tools")
    );
    assert_eq!(jobs[0].steps[0].merge_request(), Some(12));
    assert_eq!(
        jobs[0].steps[1].ref_name.as_deref(),
        Some("refs/remotes/origin/main")
    );
}

#[test]
fn base_branch_checked_out_into_a_subfolder_is_not_the_tested_merge() {
    let t = truth();
    let (_d, repo) = server();
    let commits = [
        ("fix", t.sha("fix")),
        ("pr", t.sha("head1")),
        ("c2", t.sha("c2")),
    ];
    let report = run(&repo, "merge-then-base", &commits, None);
    assert_eq!(report.jobs[0].tested_step, Some(1));
    assert_answers_are_gits(&repo, &report, &t.sha("merge1"));
    // The fix is on main (checked out into base/) but not in what the tests ran on.
    let fix = &report.jobs[0].answers[0];
    assert_eq!(
        (fix.in_base.as_ref().unwrap().answer, fix.in_tested.answer),
        (Answer::No, Answer::No)
    );
    assert!(
        report.jobs[0].follows[0].contains("stale base"),
        "{:?}",
        report.jobs[0].follows
    );
    assert_eq!(report.exit_code, ExitCode::AllMet);
    insta::assert_snapshot!("merge_then_base_table", report.to_table());
    insta::assert_snapshot!("merge_then_base_markdown", report.to_markdown());
    insta::assert_json_snapshot!("merge_then_base_json", report);
}

#[test]
fn another_repository_checked_out_beside_is_listed_and_left_out_of_the_answers() {
    let t = truth();
    let (_d, repo) = server();
    let commits = [("fix", t.sha("fix")), ("pr", t.sha("head1"))];
    let report = run(&repo, "merge-then-other-repo", &commits, None);
    assert_answers_are_gits(&repo, &report, &t.sha("merge1"));
    let tools = &t.sha("tools-main")[..12];
    let all = format!("{:?}{:?}", report.jobs[0].notes, report.jobs[0].answers);
    assert!(
        !all.contains(tools),
        "the other repository's commit leaks into the answers: {all}"
    );
    assert!(report.to_table().contains("acme/bench-tools"));
    assert_eq!(report.exit_code, ExitCode::AllMet);
}

#[test]
fn two_checkouts_of_the_merge_ref_at_different_commits_are_unknown() {
    let t = truth();
    let (_d, repo) = server();
    let report = run(&repo, "merge-ref-moved", &[("fix", t.sha("fix"))], None);
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
            .starts_with("contradictory evidence")
            && a.in_base
                .as_ref()
                .unwrap()
                .reason
                .contains(&t.sha("merge1")[..12])
            && a.in_base
                .as_ref()
                .unwrap()
                .reason
                .contains(&t.sha("merge2")[..12]),
        "{}",
        a.in_base.as_ref().unwrap().reason
    );
    assert_eq!(report.jobs[0].tested, None);
    assert_eq!(report.exit_code, ExitCode::Refused);
}

#[test]
fn a_step_whose_lines_disagree_is_unknown() {
    // The captured log with `git log -1`'s output replaced by another commit's sha: the
    // full sha no longer starts with `HEAD is now at`'s abbreviation, nor is it the fetched one.
    let t = truth();
    let (_d, repo) = server();
    let (m, fix) = (t.sha("merge1"), t.sha("fix"));
    let text = log("stale-base");
    let edited: String = text
        .lines()
        .map(|l| if l.ends_with(&format!(" {m}")) { l.replace(&m, &fix) } else { l.to_string() } + "\n")
        .collect();
    assert_ne!(text, edited);
    let repo = Repository::open(&repo).unwrap();
    let questions = Questions {
        commits: vec![("fix".to_string(), fix.clone())],
        ..Questions::default()
    };
    let report = cibase::check(
        &repo,
        &cibase::parse_jobs(&edited),
        &questions,
        "edited.log",
    );
    let a = &report.jobs[0].answers[0];
    assert_eq!(a.in_base.as_ref().unwrap().answer, Answer::Unknown);
    assert!(
        a.in_base
            .as_ref()
            .unwrap()
            .reason
            .starts_with("contradictory evidence in step 1"),
        "{}",
        a.in_base.as_ref().unwrap().reason
    );
    assert_eq!(report.exit_code, ExitCode::Refused);
}

#[test]
fn pr_head_tells_an_older_or_force_pushed_head_from_the_current_one() {
    let t = truth();
    let (_d, repo) = server();
    let current = git_rev(&repo, "refs/pull/12/head");
    assert_eq!(current, t.sha("head3"));
    let cases = [
        ("rebased", t.sha("head2"), HeadState::Current),
        ("rebased", current.clone(), HeadState::Behind),
        ("stale-base", current.clone(), HeadState::Replaced),
    ];
    for (case, pr_head, want) in cases {
        let report = run(&repo, case, &[], Some(pr_head.clone()));
        let tested = report.jobs[0].head.clone().unwrap();
        // git's view: equal, an ancestor (pushed on top), or gone from the history (rewritten).
        let truth = if tested == pr_head {
            HeadState::Current
        } else if git_is_ancestor(&repo, &tested, &pr_head) == Answer::Yes {
            HeadState::Behind
        } else {
            HeadState::Replaced
        };
        assert_eq!(
            truth, want,
            "{case}: the fixture is not what this case needs"
        );
        let h = report.jobs[0].pr_head.as_ref().unwrap();
        assert_eq!(h.state, truth, "{case}: {}", h.reason);
        assert_eq!(report.exit_code, ExitCode::AllMet);
        if want != HeadState::Current {
            let f = &report.jobs[0].follows[0];
            assert!(f.contains("older head") && f.contains("What to do"), "{f}");
        }
    }
    let report = run(&repo, "stale-base", &[], Some(current));
    insta::assert_snapshot!("force_pushed_table", report.to_table());
}

#[test]
fn shallow_workspace_is_unknown_until_the_advised_fetch_is_run() {
    let t = truth();
    let (_d, server) = server();
    let merge = t.sha("merge1");
    // The job's workspace, made by the commands its log shows (actions/checkout's default depth 1).
    let fetch = format!(
        "fetch --no-tags --prune --no-recurse-submodules --depth=1 origin +{merge}:refs/remotes/pull/12/merge"
    );
    assert!(log("stale-base").contains(&fetch));
    let ws = tempfile::tempdir().unwrap();
    let w = ws.path();
    git(w, &["init", "--quiet"]);
    let url = format!("file://{}", server.display());
    git(w, &["remote", "add", "origin", &url]);
    let mut args = vec!["-c", "protocol.version=2"];
    args.extend(fetch.split(' '));
    git(w, &args);
    git(
        w,
        &[
            "checkout",
            "--quiet",
            "--force",
            "refs/remotes/pull/12/merge",
        ],
    );
    assert!(w.join(".git/shallow").exists());

    let commits = [
        ("fix", t.sha("fix")),
        ("c1", t.sha("c1")),
        ("pr", t.sha("head1")),
    ];
    let report = run(w, "stale-base", &commits, None);
    assert_eq!(report.exit_code, ExitCode::Refused);
    let reason = &report.jobs[0].answers[0].in_base.as_ref().unwrap().reason;
    assert_eq!(
        report.jobs[0].answers[0].in_base.as_ref().unwrap().answer,
        Answer::Unknown,
        "{reason}"
    );
    // The advice is a command to run as given.
    let cmd = reason
        .split('`')
        .nth(1)
        .unwrap_or_else(|| panic!("no command in: {reason}"));
    assert!(cmd.starts_with("git fetch --unshallow origin "), "{cmd}");
    let words: Vec<&str> = cmd.split(' ').skip(1).collect();
    git(w, &words);
    // The merge's history is complete now; the fix (on main, after the merge was made) is
    // still not in the workspace and no line of the log names it: unknown, with its fetch.
    let report = run(w, "stale-base", &commits, None);
    assert_eq!(report.exit_code, ExitCode::Refused, "{}", report.to_table());
    let reason = &report.jobs[0].answers[0].in_tested.reason;
    assert!(
        reason.starts_with("not found in the repository or the log"),
        "{reason}"
    );
    let cmd = reason
        .split('`')
        .nth(1)
        .unwrap_or_else(|| panic!("no command in: {reason}"));
    assert_eq!(cmd, format!("git fetch origin {}", t.sha("fix")));
    let words: Vec<&str> = cmd.split(' ').skip(1).collect();
    git(w, &words);
    let report = run(w, "stale-base", &commits, None);
    assert_eq!(report.exit_code, ExitCode::AllMet, "{}", report.to_table());
    assert_answers_are_gits(&server, &report, &merge);
}

#[test]
fn cli_lists_steps_and_takes_pr_head() {
    let t = truth();
    let (_d, repo) = server();
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["base-check", "--log"])
        .arg(fixtures().join("merge-then-base.log"))
        .arg("--repo")
        .arg(&repo)
        .args(["--commit", &format!("fix={}", t.sha("fix"))])
        .args(["--pr-head", &t.sha("head3"), "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["jobs"][0]["job"]["steps"][1]["path"], "base");
    assert_eq!(v["jobs"][0]["job"]["steps"][1]["full"], t.sha("fix"));
    assert_eq!(v["jobs"][0]["tested_step"], 1);
    assert_eq!(v["jobs"][0]["answers"][0]["in_tested"]["answer"], "no");
    assert_eq!(v["jobs"][0]["pr_head"]["state"], "replaced");
}

/// The jobs of pull request 21 / merge request 7, whose head is the developer's own merge of
/// main into the topic branch, by case: the bundle that holds their history and whether the
/// CI made the merge the job tested.
const ROLE_CASES: [(&str, &str, bool); 7] = [
    ("gh-merge-ref", "app.bundle", true),
    ("gh-head-ref", "app.bundle", false),
    ("gh-branch", "app.bundle", false),
    ("gl-merge-ref", "gitlab-app.bundle", true),
    ("gl-train", "gitlab-app.bundle", true),
    ("gl-head-ref", "gitlab-app.bundle", false),
    ("gl-branch", "gitlab-app.bundle", false),
];

fn role_commits(t: &Truth) -> [(&'static str, String); 3] {
    [
        ("fix2", t.sha("fix2")),
        ("topic1", t.sha("topic1")),
        ("late", t.sha("late")),
    ]
}

#[test]
fn role_fixtures_are_what_the_cases_need() {
    // git's view of the captured history: the developer's merge is a two-parent commit whose
    // first parent is the topic's own commit and second main's fix; the CI's merges have main
    // first and the developer's merge second.
    let t = truth();
    for bundle in ["app.bundle", "gitlab-app.bundle"] {
        let (_d, repo) = server_of(bundle);
        let dm = t.sha("devmerge");
        assert_eq!(git_rev(&repo, &format!("{dm}^1")), t.sha("topic1"));
        assert_eq!(git_rev(&repo, &format!("{dm}^2")), t.sha("fix2"));
        assert_eq!(git_is_ancestor(&repo, &t.sha("late"), &dm), Answer::No);
    }
    for (case, _, ci_merge) in ROLE_CASES {
        let step = t.steps.iter().find(|s| s.0 == case).unwrap();
        assert_eq!(step.3 != t.sha("devmerge"), ci_merge, "{case}");
    }
}

#[test]
fn ci_made_merges_have_a_base_and_a_head() {
    let t = truth();
    for (case, bundle, ci_merge) in ROLE_CASES {
        if !ci_merge {
            continue;
        }
        let (_d, repo) = server_of(bundle);
        let report = run(&repo, case, &role_commits(&t), None);
        let j = &report.jobs[0];
        // A merge train's ref is a queue entry: its base is where it meets main.
        let kind = if case == "gl-train" {
            TestedKind::Queue
        } else {
            TestedKind::CiMerge
        };
        assert_eq!(j.kind, Some(kind), "{case}: {}", report.to_table());
        let merge = &t.steps.iter().find(|s| s.0 == case).unwrap().3;
        assert_answers_are_gits(&repo, &report, merge);
        assert_eq!(
            j.head.as_deref(),
            Some(t.sha("devmerge").as_str()),
            "{case}"
        );
        assert_eq!(j.base.as_deref(), Some(t.sha("fix2").as_str()), "{case}");
        // The topic's own commit came with the head; the late fix is in neither.
        assert!(
            j.follows[1].contains("came with the pull request's head: the job tested it"),
            "{case}: {:?}",
            j.follows
        );
        assert!(
            j.follows[2].contains("not in the tested base")
                || j.follows[2].contains("in neither the queue's base"),
            "{case}: {:?}",
            j.follows
        );
        assert_eq!(report.exit_code, ExitCode::AllMet, "{case}");
    }
    let (_d, repo) = server_of("gitlab-app.bundle");
    insta::assert_snapshot!(
        "gitlab_merged_results_table",
        run(&repo, "gl-merge-ref", &role_commits(&t), None).to_table()
    );
}

#[test]
fn head_ref_and_branch_jobs_tested_their_commit_itself() {
    // The developer's merge of main into the topic is a merge commit, but no CI made it: the
    // report names the tested commit and answers only whether each commit is in it.
    let t = truth();
    for (case, bundle, ci_merge) in ROLE_CASES {
        if ci_merge {
            continue;
        }
        let (_d, repo) = server_of(bundle);
        let report = run(&repo, case, &role_commits(&t), None);
        let j = &report.jobs[0];
        let table = report.to_table();
        assert_eq!(j.kind, Some(TestedKind::Commit), "{case}: {table}");
        let dm = t.sha("devmerge");
        assert_eq!(j.tested.as_deref(), Some(dm.as_str()), "{case}");
        assert_eq!((&j.base, &j.head), (&None, &None), "{case}: {table}");
        for a in &j.answers {
            assert!(
                a.in_base.is_none(),
                "{case} {}: an answer about a base",
                a.label
            );
            assert_eq!(
                a.in_tested.answer,
                git_is_ancestor(&repo, a.commit.as_deref().unwrap(), &dm),
                "{case} {}",
                a.label
            );
        }
        let follows = j.follows.join("\n");
        for role in ["base", "pull request's head", "the job tested it"] {
            assert!(!follows.contains(role), "{case}: `{role}` in {follows}");
        }
        assert!(!table.contains("tested merge"), "{case}: {table}");
        // Outside the checkout steps' own evidence (their refs), no line speaks of a base or a head.
        for line in table.lines().filter(|l| {
            !l.starts_with("  1 ") && !l.starts_with("base-check:") && !l.starts_with("job ")
        }) {
            assert!(
                !line.contains("base") && !line.contains(" head"),
                "{case}: {line}"
            );
        }
        assert!(
            j.follows[0].starts_with("fix2 is in the tested commit")
                && j.follows[2].starts_with("late is not in the tested commit"),
            "{case}: {follows}"
        );
        assert_eq!(report.exit_code, ExitCode::AllMet, "{case}");
    }
    let (_d, repo) = server_of("gitlab-app.bundle");
    let gl = run(&repo, "gl-head-ref", &role_commits(&t), None);
    insta::assert_snapshot!("gitlab_head_ref_table", gl.to_table());
    insta::assert_snapshot!("gitlab_head_ref_markdown", gl.to_markdown());
    insta::assert_json_snapshot!("gitlab_head_ref_json", gl);
    let (_d, repo) = server_of("app.bundle");
    let gh = run(&repo, "gh-head-ref", &role_commits(&t), None);
    insta::assert_snapshot!("github_head_ref_table", gh.to_table());
}

#[test]
fn a_sha_found_nowhere_is_unknown_and_one_the_log_names_says_fetch() {
    let t = truth();
    let (_d, repo) = server();
    // Not in the repository (complete, not shallow) and named by no line of the log.
    let nowhere = "0123456789abcdef0123456789abcdef01234567".to_string();
    let report = run(
        &repo,
        "merge-then-other-repo",
        &[("typo", nowhere.clone()), ("tools", t.sha("tools-main"))],
        None,
    );
    let j = &report.jobs[0];
    let typo = &j.answers[0];
    for r in [typo.in_base.as_ref().unwrap(), &typo.in_tested] {
        assert_eq!(r.answer, Answer::Unknown, "{}", r.reason);
        assert!(
            r.reason
                .starts_with("not found in the repository or the log"),
            "{}",
            r.reason
        );
    }
    assert!(
        j.follows[0].starts_with("typo: cannot say"),
        "{:?}",
        j.follows
    );
    assert!(!j.follows[0].contains("stale base"), "{:?}", j.follows);
    // The other repository's commit: the log names it (step 2), this repository lacks it.
    let tools = &j.answers[1];
    assert_eq!(tools.in_tested.answer, Answer::Unknown);
    assert!(
        tools
            .in_tested
            .reason
            .contains("though the log names it (job 1 (bench (pr 12)) step 2)")
            && tools
                .in_tested
                .reason
                .contains("checked out acme/bench-tools, not acme/app"),
        "{}",
        tools.in_tested.reason
    );
    assert_eq!(report.exit_code, ExitCode::Refused);
    // The same from the command line: exit 2.
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["base-check", "--log"])
        .arg(fixtures().join("gl-head-ref.log"))
        .arg("--repo")
        .arg(&repo)
        .args(["--commit", &format!("typo={nowhere}")])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(
        stdout.contains("not found in the repository or the log"),
        "{stdout}"
    );
}

#[test]
fn pr_head_on_a_force_pushed_branch_gives_one_action() {
    let t = truth();
    let (_d, repo) = server();
    let check = |case: &str, commits: &[(&str, String)]| {
        let report = run(&repo, case, commits, Some(t.sha("head3")));
        let h = report.jobs[0].pr_head.clone().unwrap();
        assert_eq!(h.state, HeadState::Replaced, "{case}: {}", h.reason);
        let follows = report.jobs[0].follows.clone();
        let actions = follows.iter().filter(|f| f.contains("What to do")).count();
        assert_eq!(actions, 1, "{case}: {follows:#?}");
        for f in &follows {
            assert!(
                !f.contains("move the base") && !f.contains("not a stale base"),
                "{case}: {follows:#?}"
            );
        }
        (report, follows)
    };
    // A stale base (the fix is in neither base nor merge) and a force-pushed head.
    let (report, _) = check("stale-base", &[("fix", t.sha("fix"))]);
    insta::assert_snapshot!("force_pushed_stale_base_table", report.to_table());
    // A head ref fetched by name re-runs on whatever the ref names then; GitLab's pipeline
    // commit stays the same.
    let (_, f) = check("gh-head-ref", &[("late", t.sha("late"))]);
    assert!(f[0].contains("checks out its ref again by name"), "{f:#?}");
    let (_g, gl_repo) = server_of("gitlab-app.bundle");
    let report = run(&gl_repo, "gl-head-ref", &[], Some(t.sha("devmerge")));
    let h = report.jobs[0].pr_head.as_ref().unwrap();
    assert_eq!(h.state, HeadState::Current, "{}", h.reason);
}
