//! Benchmarks of the CI questions: auditing a 100 MB test log (time and peak memory) and
//! ancestry answers in a 100,000-commit repository (median over a mix of yes and no).
//!
//! Run: `cargo bench -p harness --bench ci_questions` (add `--profile dev` to reuse a
//! test build). Needs the `git` command-line tool (the repository is built with
//! `git fast-import`). Budgets: audit under 1 s with memory that does not grow with the
//! log's size; median ancestry answer under 100 ms. Prints each part's figures, then a
//! summary (medians, the audit's peak RSS, each against its budget), and exits non-zero
//! when a budget is missed.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use harness::ci::audit::{self, LaneAuditArgs, OutputFormat};
use harness::ci::cibase::{self, Answer, Shallow};

/// Reset this process's peak RSS (Linux: `5` to /proc/self/clear_refs), so that the next
/// [`peak_rss_kib`] measures only what runs after it.
fn reset_peak_rss() {
    std::fs::write("/proc/self/clear_refs", "5").expect("reset peak RSS via /proc/self/clear_refs");
}

/// Peak resident set size since the last [`reset_peak_rss`], in KiB (`VmHWM`).
fn peak_rss_kib() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/self/status")
}

/// CPU time used by this thread (user + system), unaffected by other processes' load.
fn thread_cpu() -> Duration {
    // SAFETY: clock_gettime only writes into the zeroed struct we pass.
    unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }
}

/// The 1-minute load average (`/proc/loadavg`), to read wall times against.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".to_string())
}

/// Current resident set size in KiB (`VmRSS`).
fn rss_kib() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

/// Write a cargo-test log of about `bytes` bytes: many targets, a few hundred tests each,
/// and long captured output from failing tests (the bulk of a real large log).
fn write_big_log(path: &Path, bytes: u64) -> (u64, u64) {
    let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(path).unwrap());
    let mut written = 0u64;
    let mut targets = 0u64;
    let mut tests = 0u64;
    let emit = |w: &mut BufWriter<std::fs::File>, s: &str| {
        w.write_all(s.as_bytes()).unwrap();
        s.len() as u64
    };
    while written < bytes {
        targets += 1;
        written += emit(
            &mut w,
            &format!(
                "     Running tests/t{targets}.rs (target/debug/deps/t{targets}-0123456789abcdef)\n\nrunning 200 tests\n"
            ),
        );
        for i in 0..200 {
            let outcome = if i == 7 { "FAILED" } else { "ok" };
            written += emit(
                &mut w,
                &format!("test module_{}::case_{i} ... {outcome}\n", i % 13),
            );
        }
        tests += 200;
        written += emit(&mut w, "\nfailures:\n\n---- module_7::case_7 stdout ----\n");
        // Captured output: about 45 KB per target.
        for k in 0..600 {
            written += emit(
                &mut w,
                &format!(
                    "step {k}: observed value 0x{:016x} differs from the reference at row {k}\n",
                    k * 2654435761u64
                ),
            );
        }
        written += emit(
            &mut w,
            "\nfailures:\n    module_7::case_7\n\ntest result: FAILED. 199 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 1.00s\n\n",
        );
    }
    w.flush().unwrap();
    (targets, tests)
}

/// One budget line of the closing summary.
struct Figure {
    what: String,
    value: String,
    budget: &'static str,
    met: bool,
}

fn bench_audit(figures: &mut Vec<Figure>) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("big.log");
    let (targets, tests) = write_big_log(&log, 100 * 1024 * 1024);
    let size = std::fs::metadata(&log).unwrap().len();
    std::fs::write(
        dir.path().join("lanes.toml"),
        "[[lane]]\nname = \"big\"\nrequired = true\nlog = \"big.log\"\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("must-run.txt"),
        "module_3::case_3\nsample::t5 module_7::case_7\nmodule_0::case_999\n",
    )
    .unwrap();
    let args = LaneAuditArgs {
        lanes: dir.path().join("lanes.toml"),
        logs: vec![],
        must_run: dir.path().join("must-run.txt"),
        manifest_path: None,
        jobs: None,
        format: OutputFormat::Json,
    };
    let rss_before = rss_kib();
    reset_peak_rss();
    let mut times = Vec::new();
    let mut cpu = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let c = thread_cpu();
        let report = audit::audit_files(&args).unwrap();
        cpu.push(thread_cpu() - c);
        times.push(t.elapsed());
        assert_eq!(report.tests.len(), 3);
        assert_eq!(report.lanes[0].targets.len() as u64, targets);
    }
    let rss_after = peak_rss_kib();
    times.sort();
    cpu.sort();
    let median = times[1];
    let growth_mib = (rss_after - rss_before) as f64 / 1024.0;
    println!(
        "audit: {:.1} MB log, {targets} targets, {tests} test lines: median wall {:.3} s (min {:.3} s), \
         median CPU {:.3} s over 3 runs (load average {}); \
         RSS {:.1} MiB before, peak {:.1} MiB during (+{growth_mib:.1} MiB)",
        size as f64 / 1e6,
        median.as_secs_f64(),
        times[0].as_secs_f64(),
        cpu[1].as_secs_f64(),
        load_average(),
        rss_before as f64 / 1024.0,
        rss_after as f64 / 1024.0,
    );
    // Memory bound: the parser keeps results, not the log: far below the log's size.
    // Wall time depends on the machine's load: the budget is checked on CPU time.
    let ok_time = cpu[1] < Duration::from_secs(1);
    let ok_mem = growth_mib < (size as f64 / (1024.0 * 1024.0)) / 4.0;
    figures.push(Figure {
        what: format!("audit of a {:.0} MB log", size as f64 / 1e6),
        value: format!(
            "median {:.3} s wall, {:.3} s CPU",
            median.as_secs_f64(),
            cpu[1].as_secs_f64()
        ),
        budget: "1 s (checked on CPU)",
        met: ok_time,
    });
    figures.push(Figure {
        what: "audit peak RSS".to_string(),
        value: format!(
            "{:.1} MiB (+{growth_mib:.1} MiB over the {:.1} MiB before)",
            rss_after as f64 / 1024.0,
            rss_before as f64 / 1024.0
        ),
        budget: "growth under a quarter of the log",
        met: ok_mem,
    });
}

/// Deterministic pseudo-random numbers (64-bit LCG, Knuth's MMIX constants).
struct Lcg(u64);
impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n
    }
}

/// Build a repository with `n` commits on main (a merged side commit every 1000), plus an
/// unmerged side commit forked every 500 main commits. Returns (main marks, side marks).
fn build_repo(dir: &Path, n: usize) -> (Vec<String>, Vec<String>) {
    let ok = Command::new("git")
        .args(["init", "--quiet"])
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(ok.success());
    let marks = dir.join("marks");
    let mut child = Command::new("git")
        .args(["fast-import", "--quiet"])
        .arg(format!("--export-marks={}", marks.display()))
        .current_dir(dir)
        .stdin(Stdio::piped())
        .spawn()
        .expect("git fast-import");
    let mut main_marks = Vec::with_capacity(n);
    let mut side_marks = Vec::new();
    {
        let mut w = BufWriter::new(child.stdin.take().unwrap());
        let mut mark = 0usize;
        let mut commit = |w: &mut BufWriter<_>,
                          r: &str,
                          from: Option<usize>,
                          merge: Option<usize>,
                          msg: &str| {
            mark += 1;
            writeln!(
                w,
                "commit {r}\nmark :{mark}\ncommitter Dev <dev@example.com> {} +0000",
                1_000_000_000 + mark
            )
            .unwrap();
            writeln!(w, "data {}\n{msg}", msg.len()).unwrap();
            if let Some(f) = from {
                writeln!(w, "from :{f}").unwrap();
            }
            if let Some(m) = merge {
                writeln!(w, "merge :{m}").unwrap();
            }
            writeln!(w).unwrap();
            mark
        };
        let mut prev: Option<usize> = None;
        for i in 0..n {
            let merge = if i > 0 && i % 1000 == 0 {
                Some(commit(
                    &mut w,
                    "refs/heads/merged",
                    prev,
                    None,
                    &format!("side {i}"),
                ))
            } else {
                None
            };
            let m = commit(&mut w, "refs/heads/main", prev, merge, &format!("main {i}"));
            main_marks.push(m);
            if i % 500 == 250 {
                side_marks.push(commit(
                    &mut w,
                    &format!("refs/heads/side/{i}"),
                    Some(m),
                    None,
                    &format!("unmerged {i}"),
                ));
            }
            prev = Some(m);
        }
        w.flush().unwrap();
    }
    assert!(child.wait().unwrap().success());
    let mut by_mark = std::collections::HashMap::new();
    for line in BufReader::new(std::fs::File::open(&marks).unwrap()).lines() {
        let line = line.unwrap();
        let (m, sha) = line.split_once(' ').unwrap();
        by_mark.insert(
            m.trim_start_matches(':').parse::<usize>().unwrap(),
            sha.to_string(),
        );
    }
    (
        main_marks.iter().map(|m| by_mark[m].clone()).collect(),
        side_marks.iter().map(|m| by_mark[m].clone()).collect(),
    )
}

fn bench_ancestry(figures: &mut Vec<Figure>) {
    let dir = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let n = 100_000;
    let (main, side) = build_repo(dir.path(), n);
    println!(
        "ancestry: built {} commits in {:.1} s",
        main.len() + side.len() + n / 1000,
        t.elapsed().as_secs_f64()
    );
    // As fast-import left it; as a repacked clone; with a commit-graph (what `git gc` and
    // `git commit-graph write` leave, and libgit2 reads).
    for (state, prepare) in [
        ("fast-import pack", None),
        (
            "after git repack -adf",
            Some(&["repack", "-a", "-d", "-f", "-q"][..]),
        ),
        (
            "with commit-graph",
            Some(&["commit-graph", "write", "--reachable"][..]),
        ),
    ] {
        if let Some(args) = prepare {
            let st = Command::new("git")
                .args(args)
                .current_dir(dir.path())
                .status()
                .unwrap();
            assert!(st.success(), "git {args:?}");
        }
        let (wall, cpu) = ancestry_queries(dir.path(), &main, &side, state);
        figures.push(Figure {
            what: format!("ancestry, {state}"),
            value: format!(
                "median {:.1} ms wall, {:.1} ms CPU",
                wall.as_secs_f64() * 1e3,
                cpu.as_secs_f64() * 1e3
            ),
            budget: "100 ms (checked on CPU)",
            met: cpu < Duration::from_millis(100),
        });
    }
}

/// Median (wall, CPU) of 100 answers (50 yes, 50 no) about the tip of `main`.
fn ancestry_queries(
    dir: &Path,
    main: &[String],
    side: &[String],
    state: &str,
) -> (Duration, Duration) {
    let n = main.len();
    let repo = cibase::open_repo(dir).unwrap();
    let shallow = Shallow::of(&repo);
    let tip = cibase::resolve(&repo, &main[n - 1]).unwrap();
    // Alternate yes (a main commit anywhere in history) and no (an unmerged side commit).
    let mut rng = Lcg(20261129);
    let queries: Vec<(&String, Answer)> = (0..100)
        .map(|q| {
            if q % 2 == 0 {
                (&main[rng.below(n)], Answer::Yes)
            } else {
                (&side[rng.below(side.len())], Answer::No)
            }
        })
        .collect();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    // As base-check asks: one History per tip, shared by every question about it.
    let mut history = cibase::History::new(&repo, tip);
    let mut wall = Vec::new();
    let mut cpu = Vec::new();
    for (rev, want) in &queries {
        let start = Instant::now();
        let c0 = thread_cpu();
        let c = cibase::resolve(&repo, rev).unwrap();
        let got = history.contains(&shallow, "base", c);
        cpu.push(thread_cpu() - c0);
        wall.push(start.elapsed());
        assert_eq!(got.answer, *want, "{rev}: {}", got.reason);
    }
    wall.sort();
    cpu.sort();
    let median = |v: &[Duration]| (v[49] + v[50]) / 2;
    println!(
        "ancestry ({state}), 50 yes + 50 no in a {n}-commit history: median wall {:.1} ms (p90 {:.1}, max {:.1}), \
         median CPU {:.1} ms (p90 {:.1}, max {:.1}); load average {}",
        ms(median(&wall)),
        ms(wall[89]),
        ms(wall[99]),
        ms(median(&cpu)),
        ms(cpu[89]),
        ms(cpu[99]),
        load_average(),
    );
    (median(&wall), median(&cpu))
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument selects one part.
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let want = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    let mut figures = Vec::new();
    if want("audit") {
        bench_audit(&mut figures);
    }
    if want("ancestry") {
        bench_ancestry(&mut figures);
    }
    // The closing summary: one line per figure against its budget. Budgets on time are
    // checked on CPU time, which other processes' load does not inflate; the wall time
    // is what a user waits on a quiet machine.
    println!("\nsummary (load average {}):", load_average());
    for f in &figures {
        println!(
            "  {:<36} {:<52} budget {:<34} {}",
            f.what,
            f.value,
            f.budget,
            if f.met { "met" } else { "OVER BUDGET" }
        );
    }
    if figures.iter().any(|f| !f.met) {
        std::process::exit(1);
    }
}
