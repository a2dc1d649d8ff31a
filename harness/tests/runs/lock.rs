//! The host lock through the real binary: nested refusal, running under an ancestor's hold,
//! LOCKED with the holder's details, `--wait`, TTL reporting and dead holders.

use crate::common;

use std::time::{Duration, Instant};

use common::{Sandbox, wait_for_line, wait_with_limit};

fn harness_bin() -> &'static str {
    env!("CARGO_BIN_EXE_harness")
}

/// Polls `lock status` until it reports a holder.
fn wait_until_held(sb: &Sandbox) -> String {
    let start = Instant::now();
    loop {
        let s = sb.run(&["lock", "status"]);
        if s.stdout.contains("held by") {
            return s.stdout;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "never held: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn nested_lock_run_refuses_at_once_naming_the_holder() {
    let sb = Sandbox::new();
    let state = sb.state.to_str().unwrap();
    let mut child = sb
        .cmd()
        .args(["lock", "run", "--owner", "outer-job", "--", harness_bin()])
        .args([
            "--state-dir",
            state,
            "lock",
            "run",
            "--owner",
            "inner",
            "--",
            "true",
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_with_limit(&mut child, Duration::from_secs(30));
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    // The inner `lock run` refused (2) and the outer passed that code through.
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains("nested `lock run`"), "{err}");
    assert!(
        err.contains(&format!("ancestor pid {}", child.id())),
        "{err}"
    );
    assert!(err.contains("owner outer-job"), "{err}");
}

#[test]
fn battery_runs_under_its_ancestors_hold_and_says_so() {
    let sb = Sandbox::new();
    let state = sb.state.to_str().unwrap();
    let out = sb
        .cmd()
        .args(["lock", "run", "--owner", "ci-lane", "--", harness_bin()])
        .args([
            "--state-dir",
            state,
            "battery",
            sb.catalog.to_str().unwrap(),
        ])
        .args(["--only", "add-subtracts"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("running under the host lock held by ancestor pid"),
        "{err}"
    );
    assert!(err.contains("owner ci-lane"), "{err}");
    assert!(
        sb.report_json()["lock"]
            .as_str()
            .unwrap()
            .starts_with("ancestor pid ")
    );
    // Released afterwards.
    assert!(sb.run(&["lock", "status"]).stdout.contains("free"));
}

#[test]
fn held_lock_refuses_without_wait_waits_with_it_and_dead_holders_never_block() {
    let sb = Sandbox::new();
    let pidfile = sb.dir.path().join("command.pid");
    let script = format!("echo $$ > {}; exec sleep 30", pidfile.display());
    let (mut holder, _rx) = sb.spawn(&[
        "lock", "run", "--owner", "long-job", "--ttl", "1", "--", "sh", "-c", &script,
    ]);
    let status = wait_until_held(&sb);
    assert!(status.contains(&format!("pid {}", holder.id())), "{status}");
    assert!(status.contains("owner long-job"), "{status}");
    std::thread::sleep(Duration::from_millis(2100));
    let status = sb.run(&["lock", "status"]).stdout;
    assert!(status.contains("OVER its TTL of 1s"), "{status}");

    // Not an ancestor, no --wait: LOCKED at once with the holder's details.
    let started = Instant::now();
    sb.battery(&[])
        .expect_code(2)
        .stderr_has("LOCKED: the host lock")
        .stderr_has("owner long-job")
        .stderr_has("sleep 30");
    assert!(started.elapsed() < Duration::from_secs(10));
    sb.run(&["lock", "run", "--", "true"])
        .expect_code(2)
        .stderr_has("LOCKED");

    // With --wait: says whom it waits on, and runs once the holder and its command are
    // gone. Both die by SIGKILL, so they never release anything themselves.
    let (mut waiter, rx) = sb.spawn(&["lock", "run", "--wait", "--", "true"]);
    let line = wait_for_line(
        &rx,
        "waiting for the host lock held by",
        Duration::from_secs(30),
    );
    assert!(line.contains("owner long-job"), "{line}");
    let command: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    holder.kill().unwrap();
    holder.wait().unwrap();
    // SAFETY: killing the command this test started.
    unsafe {
        libc::kill(command, libc::SIGKILL);
    }
    let st = wait_with_limit(&mut waiter, Duration::from_secs(30));
    assert_eq!(st.code(), Some(0));

    // Dead holder left its record behind; it does not block.
    sb.run(&["lock", "run", "--", "true"]).expect_code(0);
    assert!(sb.run(&["lock", "status"]).stdout.contains("free"));
}

#[test]
fn lock_run_passes_the_command_exit_code_through() {
    let sb = Sandbox::new();
    sb.run(&["lock", "run", "--", "sh", "-c", "exit 7"])
        .expect_code(7);
}

/// Takes `state/host.lock` the way `lock status` probes it (an exclusive `flock`, held for
/// an instant) for `hold`, from another thread; returns once the probe holds it.
fn probe_lock_for(state: &std::path::Path, hold: Duration) -> std::thread::JoinHandle<()> {
    use std::os::fd::AsRawFd;
    std::fs::create_dir_all(state).unwrap();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(state.join("host.lock"))
        .unwrap();
    // SAFETY: flock on a descriptor this test owns.
    let taken = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    assert_eq!(taken, 0, "the probe could not take the free lock");
    std::thread::spawn(move || {
        std::thread::sleep(hold);
        drop(file);
    })
}

/// `lock status` finds the lock free by taking it for an instant. A `lock run` or another
/// `lock status` that starts during such a probe must not take the prober for a holder:
/// it once refused with LOCKED (an unknown holder, or the last holder's stale record), at
/// random, whenever a status poll and a `lock run` met.
#[test]
fn a_status_probe_is_never_taken_for_a_holder() {
    let sb = Sandbox::new();
    let probe = probe_lock_for(&sb.state, Duration::from_millis(40));
    sb.run(&["lock", "run", "--owner", "after-probe", "--", "true"])
        .expect_code(0);
    probe.join().unwrap();

    let probe = probe_lock_for(&sb.state, Duration::from_millis(40));
    let status = sb.run(&["lock", "status"]);
    probe.join().unwrap();
    assert!(status.stdout.contains("free"), "{status:?}");
}
