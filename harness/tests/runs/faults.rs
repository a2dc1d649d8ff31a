//! Faults injected at known points of a battery run on a private copy of the sample
//! workspace: files created by someone else while the tests run, a SIGKILL after a test
//! wrote a file (its cargo dies with the harness), a signal to the harness and its test processes at once, a `lock run`
//! killed while its command runs, a target directory among the tree's files, closed output
//! streams, and the smaller refusals (a mutation under `.git`, a misspelt feature, LOCKED).
//!
//! The known point is `SAMPLE_PAUSE_DIR` (see `fixtures/workspaces/README.md`): a failing
//! sample test writes its process id to `paused` there and waits for `resume`.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{Sandbox, wait_with_limit};

/// Sets `SAMPLE_PAUSE_DIR` for every run of the sandbox's catalog; returns the directory.
fn pause_here(sb: &Sandbox) -> PathBuf {
    let dir = sb.dir.path().join("pause");
    std::fs::create_dir_all(&dir).unwrap();
    sb.edit(
        "mutations/sample.toml",
        "select = \"contract::\"\n",
        &format!(
            "select = \"contract::\"\nenv = {{ SAMPLE_PAUSE_DIR = {:?} }}\n",
            dir.to_str().unwrap()
        ),
    );
    dir
}

/// Waits until the paused test wrote its pid; panics when `child` exits first.
fn wait_paused(dir: &Path, child: &mut Child, rx: &mpsc::Receiver<String>) -> u32 {
    let start = Instant::now();
    loop {
        if let Ok(pid) = std::fs::read_to_string(dir.join("paused"))
            && let Ok(pid) = pid.trim().parse()
        {
            return pid;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let seen: Vec<String> = rx.try_iter().collect();
            panic!(
                "harness exited ({status}) before the test paused:\n{}",
                seen.join("\n")
            );
        }
        assert!(start.elapsed() < Duration::from_secs(300), "never paused");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn resume(dir: &Path) {
    std::fs::write(dir.join("resume"), "go").unwrap();
}

/// The process group of `pid` (`/proc/PID/stat` field 5).
fn pgid_of(pid: u32) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 1..];
    rest.split_whitespace().nth(2).unwrap().parse().unwrap()
}

fn signal(pid: i32, sig: i32) {
    // SAFETY: plain syscall on processes this test started.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// Whether `pid` is a live process (not a zombie, not gone).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        let rest = &s[s.rfind(')').unwrap() + 1..];
        rest.split_whitespace().next() != Some("Z")
    })
}

fn wait_gone(pid: u32) {
    let start = Instant::now();
    while alive(pid) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "pid {pid} lives on"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn lines(rx: &mpsc::Receiver<String>) -> String {
    rx.try_iter().collect::<Vec<_>>().join("\n")
}

#[test]
fn files_made_by_someone_else_during_the_tests_are_kept_and_refused() {
    let sb = Sandbox::new();
    let dir = pause_here(&sb);
    let before = sb.tree();
    let cat = sb.catalog.to_str().unwrap();
    let (mut child, rx) = sb.spawn(&["battery", cat, "--only", "max-takes-min"]);
    wait_paused(&dir, &mut child, &rx);
    // The test has written proptest-regressions/contract.txt; meanwhile the user writes
    // notes and a new source file.
    assert!(sb.ws.join("proptest-regressions/contract.txt").exists());
    sb.write("NOTES.txt", "my notes\n");
    sb.write("src/draft.rs", "pub fn draft() {}\n");
    resume(&dir);
    let status = wait_with_limit(&mut child, Duration::from_secs(120));
    let text = lines(&rx);
    assert_eq!(status.code(), Some(2), "{text}");
    assert!(
        text.contains(
            "TREE-DIRTY: files appeared in the tree during the build and tests of mutation max-takes-min that no process of the run created; kept: NOTES.txt, src/draft.rs"
        ),
        "{text}"
    );
    // Nothing the user made is lost; what the test made is gone; the mutation is undone.
    assert_eq!(sb.read("NOTES.txt"), "my notes\n");
    assert_eq!(sb.read("src/draft.rs"), "pub fn draft() {}\n");
    assert!(!sb.ws.join("proptest-regressions").exists());
    let mut want = before;
    want.insert("NOTES.txt".into(), b"my notes\n".to_vec());
    want.insert("src/draft.rs".into(), b"pub fn draft() {}\n".to_vec());
    assert_eq!(sb.tree(), want);
    let r = sb.report_json();
    assert_eq!(r["status"], "refused");
    assert_eq!(r["refusal"]["kind"], "TREE-DIRTY");
}

#[test]
fn restore_after_sigkill_removes_exactly_the_files_the_tests_created() {
    let sb = Sandbox::new();
    let dir = pause_here(&sb);
    let before = sb.tree();
    let cat = sb.catalog.to_str().unwrap();
    let (mut child, rx) = sb.spawn(&["battery", cat, "--only", "max-takes-min"]);
    let test_pid = wait_paused(&dir, &mut child, &rx);
    sb.write("NOTES.txt", "my notes\n");
    child.kill().unwrap(); // SIGKILL: no handler runs
    child.wait().unwrap();
    assert!(sb.read("src/lib.rs").contains(".min()"));
    assert!(sb.ws.join("proptest-regressions/contract.txt").exists());
    let run = sb.run(&["restore"]);
    run.expect_code(0)
        .stderr_has("restored")
        .stderr_has("removed proptest-regressions/contract.txt, created in")
        .stderr_has("kept NOTES.txt: it appeared in");
    wait_gone(test_pid);
    let mut want = before;
    want.insert("NOTES.txt".into(), b"my notes\n".to_vec());
    assert_eq!(sb.tree(), want);
    assert!(!sb.ws.join("proptest-regressions").exists());
    // Nothing left to settle.
    let again = sb.run(&["restore"]);
    again.expect_code(0);
    assert!(!again.stderr.contains("removed"), "{}", again.stderr);
}

#[test]
fn cargo_dies_with_a_killed_harness_and_the_next_command_kills_its_tests() {
    let sb = Sandbox::new();
    let dir = pause_here(&sb);
    let cat = sb.catalog.to_str().unwrap();
    let (mut child, rx) = sb.spawn(&["battery", cat, "--only", "add-subtracts"]);
    let test_pid = wait_paused(&dir, &mut child, &rx);
    // cargo, the harness's own child, leads the group the test binary runs in.
    let cargo = pgid_of(test_pid) as u32;
    assert_ne!(cargo, test_pid);
    child.kill().unwrap(); // SIGKILL: no handler runs
    child.wait().unwrap();
    // The direct child goes with the harness at once, not only once a later command
    // reaps its recorded group (it would otherwise wait for its paused test for ever).
    let start = Instant::now();
    while alive(cargo) {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "cargo (pid {cargo}) outlived the killed harness"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(alive(test_pid), "the test binary is left to the record");
    sb.run(&["restore"])
        .expect_code(0)
        .stderr_has(&format!("killed process group {cargo}"));
    wait_gone(test_pid);
}

#[test]
fn a_signal_to_the_harness_and_its_tests_during_the_last_mutation_is_an_interruption() {
    let sb = Sandbox::new();
    let dir = pause_here(&sb);
    let before = sb.tree();
    let cat = sb.catalog.to_str().unwrap();
    // The last (only) mutation's tests are running when a CI cancel signals every process.
    let (mut child, rx) = sb.spawn(&["battery", cat, "--only", "add-subtracts"]);
    let test_pid = wait_paused(&dir, &mut child, &rx);
    let tests = pgid_of(test_pid);
    signal(child.id() as i32, libc::SIGTERM);
    signal(-tests, libc::SIGTERM);
    let status = wait_with_limit(&mut child, Duration::from_secs(60));
    let text = lines(&rx);
    assert_eq!(status.code(), Some(130), "{text}");
    let r = sb.report_json();
    assert_eq!(r["status"], "interrupted");
    assert_eq!(r["mutations"], serde_json::json!([]), "a verdict was given");
    assert_eq!(sb.tree(), before);
}

#[test]
fn a_killed_lock_run_keeps_the_lock_while_its_command_runs_and_locked_writes_a_report() {
    let sb = Sandbox::new();
    let pidfile = sb.dir.path().join("command.pid");
    let script = format!("echo $$ > {}; exec sleep 60", pidfile.display());
    let (mut holder, _rx) =
        sb.spawn(&["lock", "run", "--owner", "outer", "--", "sh", "-c", &script]);
    let start = Instant::now();
    let command: u32 = loop {
        if let Ok(p) = std::fs::read_to_string(&pidfile)
            && let Ok(p) = p.trim().parse()
        {
            break p;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "command never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    holder.kill().unwrap();
    holder.wait().unwrap();
    assert!(alive(command));
    // The command still runs under the lock: nobody else may take it.
    let status = sb.run(&["lock", "status"]);
    assert!(
        status.stdout.contains(&format!(
            "held by pid {} (exited; processes it started still hold the lock)",
            holder.id()
        )),
        "{status:?}"
    );
    assert!(
        status
            .stdout
            .contains(&format!("held now by pid {command}")),
        "{status:?}"
    );
    sb.run(&["lock", "run", "--", "true"])
        .expect_code(2)
        .stderr_has("LOCKED");
    // A LOCKED battery writes its report, like every refusal.
    sb.battery(&[]).expect_code(2).stderr_has("LOCKED");
    let r = sb.report_json();
    assert_eq!(r["status"], "refused");
    assert_eq!(r["refusal"]["kind"], "LOCKED");
    assert!(
        r["refusal"]["detail"]
            .as_str()
            .unwrap()
            .contains("owner outer"),
        "{r}"
    );
    assert!(alive(command), "a refused command killed the running one");
    // Once the command is gone, the lock is free.
    signal(command as i32, libc::SIGKILL);
    wait_gone(command);
    sb.run(&["lock", "run", "--", "true"]).expect_code(0);
}

#[test]
fn a_target_directory_among_the_trees_files_is_refused_before_anything_is_built() {
    let sb = Sandbox::new();
    let cat = sb.catalog.to_str().unwrap();
    let good = sb.read("mutations/sample.toml");
    let with_target = |t: &str| {
        sb.write(
            "mutations/sample.toml",
            &good.replace(
                "select = \"contract::\"\n",
                &format!("select = \"contract::\"\ntarget_dir = {t:?}\n"),
            ),
        )
    };
    let src_before: Vec<_> = std::fs::read_dir(sb.ws.join("src")).unwrap().collect();
    for (t, says) in [
        (
            "src",
            "holds files of the tree (src/crlf.rs, src/lib.rs, src/unused.rs)",
        ),
        (".", "is the workspace root"),
        ("src/..", "is the workspace root"),
        ("..", "holds the workspace root"),
    ] {
        with_target(t);
        sb.run(&["check", cat])
            .expect_code(2)
            .stderr_has("field `target_dir`")
            .stderr_has(says);
        sb.battery(&[])
            .expect_code(2)
            .stderr_has("field `target_dir`")
            .stderr_has(says);
    }
    // Nothing was built anywhere in the tree.
    assert_eq!(
        std::fs::read_dir(sb.ws.join("src")).unwrap().count(),
        src_before.len()
    );
    assert!(!sb.ws.join("target").exists());
    assert!(!sb.ws.join("CACHEDIR.TAG").exists());
    // Outside the workspace is fine, and said; so is a new folder inside it.
    let outside = sb.dir.path().join("elsewhere");
    with_target(outside.to_str().unwrap());
    sb.run(&["check", cat])
        .expect_code(0)
        .stdout_has("(outside the workspace)");
    with_target("build-out");
    sb.run(&["check", cat])
        .expect_code(0)
        .stdout_has("build-out (inside the workspace)");
}

#[test]
fn closed_output_streams_neither_stop_the_run_nor_lose_the_report() {
    let sb = Sandbox::new();
    let before = sb.tree();
    // Both streams are pipes whose reading end is already closed: every write fails.
    let (out_r, out_w) = std::io::pipe().unwrap();
    let (err_r, err_w) = std::io::pipe().unwrap();
    drop(out_r);
    drop(err_r);
    let status = sb
        .cmd()
        .args([
            "battery",
            sb.catalog.to_str().unwrap(),
            "--only",
            "add-subtracts",
        ])
        .stdout(Stdio::from(out_w))
        .stderr(Stdio::from(err_w))
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let r = sb.report_json();
    assert_eq!(r["status"], "complete");
    assert_eq!(r["mutations"][0]["verdict"], "KILLED");
    assert_eq!(sb.tree(), before);
}

#[test]
fn a_mutation_under_git_and_a_misspelt_feature_are_catalog_errors() {
    let sb = Sandbox::new();
    let cat = sb.catalog.to_str().unwrap();
    let good = sb.read("mutations/sample.toml");
    sb.write(
        "mutations/sample.toml",
        &format!(
            "{good}\n[[mutation]]\nid = \"git-config\"\ntitle = \"t\"\nrole = \"defect\"\nfile = \".git/HEAD\"\nfind = \"ref\"\nreplace = \"fer\"\nkilled_by = [\"contract::adds_two_numbers\"]\nrationale = \"r\"\n"
        ),
    );
    sb.run(&["check", cat])
        .expect_code(2)
        .stderr_has("CATALOG-DRIFT")
        .stderr_has("mutation git-config: file .git/HEAD is inside .git");
    sb.write(
        "mutations/sample.toml",
        &good.replace(
            "select = \"contract::\"\n",
            "select = \"contract::\"\nfeatures = [\"fast-mode\"]\n",
        ),
    );
    sb.run(&["check", cat])
        .expect_code(2)
        .stderr_has("CATALOG-DRIFT")
        .stderr_has("package sample has no feature \"fast-mode\" (it declares none)");
    sb.battery(&[])
        .expect_code(2)
        .stderr_has("CATALOG-DRIFT: ")
        .stderr_has("no feature \"fast-mode\"");
    assert_eq!(sb.report_json()["refusal"]["kind"], "CATALOG-DRIFT");
    // Found by `cargo metadata`, before any build.
    assert!(!sb.ws.join("target/harness/sample/debug").exists());
}
