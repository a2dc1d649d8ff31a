//! Kept doc tests: the doc test binary rustdoc built, copied by the switched library the first time the test reaches it, then run again per mutant without rustdoc.
//!
//! In switch mode every mutant lives in one build, chosen at run time, so the executable
//! rustdoc builds for a doc test is the same for every mutant: only its environment differs.
//! rustdoc keeps no doc test executable on stable toolchains (`--persist-doctests` is
//! unstable), and builds each one again per `cargo test --doc`, which on a crate whose doc
//! tests reach most of its code is most of a battery's time. So in the reach run (each
//! listed test on its own, `battery/execute/reach.rs`) a doc test runs with [`KEEP_ENV`]
//! naming a folder, and the switched library's reach recorder, on the first switched
//! function the process executes, copies the running executable there with its arguments,
//! working directory and environment ([`keeper`]). A kept doc test is then judged as rustdoc
//! judges it: it passes when the executable exits successfully, or, for a `should_panic`
//! block, when it does not (rustdoc's rule); the block's attributes are read from its fence.
//!
//! A doc test is kept only when that is the same run: its reach run selected it alone (its
//! filter matched no other doc test), exactly one process recorded itself, its fence marks a
//! block that runs (not `ignore`, `no_run` or `compile_fail`), and the kept executable,
//! run again at once with no mutant selected, passes ([`collect`]). Otherwise it stays with
//! `cargo test --doc`, and the reach report says why.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::system::runner::{RunError, Runner};

/// The environment variable that names the folder a doc test's process keeps its
/// executable in (set only in switch mode's reach run of a doc test).
pub const KEEP_ENV: &str = "HARNESS_REACH_KEEP";

/// The environment variable that names the folder a libtest test's process records how it
/// was run in, without copying its executable (set only in switch mode's reach run of a
/// libtest test; see [`crate::libtest_direct`]).
pub const RECORD_ENV: &str = "HARNESS_REACH_RECORD";

/// Rust statements for a switched function's reach recorder (`reach::recorder`), run the
/// first time the function executes in a process: when [`KEEP_ENV`] is set, the process
/// copies its executable to `PID.exe` in that folder (once per process: the copy is created
/// exclusively) and then writes `PID.run`, the record [`parse_record`] reads: NUL-terminated
/// fields, the argument count, the arguments (the program first), the working directory,
/// then name and value of each environment variable. When [`RECORD_ENV`] is set instead
/// (a libtest test's reach run, [`crate::libtest_direct`]), the process copies nothing: it
/// creates an empty `PID.seen` (once per process), writes the same record, and records its
/// ancestors that were started in the same recording as `PPID.spawner` (see [`spawners`]:
/// a test that starts the crate's binary is recorded by its child). The record
/// is written under a temporary name and renamed, so a `PID.run` is always whole. Every
/// path is absolute and every trait method is called through its trait's path: a
/// `#![no_std]` library that links `std` itself has no `std` prelude.
pub fn keeper() -> String {
    format!(
        "#[allow(unused, clippy::all)]\n\
         fn __harness_keep() {{\n\
         use ::std::os::unix::ffi::OsStrExt as _;\n\
         let (dir, copy) = match (::std::env::var_os({KEEP_ENV:?}), ::std::env::var_os({RECORD_ENV:?})) {{\n\
         (::std::option::Option::Some(d), _) => (d, true),\n\
         (::std::option::Option::None, ::std::option::Option::Some(d)) => (d, false),\n\
         _ => return,\n\
         }};\n\
         let dir = ::std::path::PathBuf::from(dir);\n\
         let id = ::std::process::id();\n\
         let exe = dir.join(::std::format!(\"{{id}}.{{}}\", if copy {{ \"exe\" }} else {{ \"seen\" }}));\n\
         if ::std::fs::OpenOptions::new().write(true).create_new(true).open(&exe).is_err() {{ return; }}\n\
         if copy && ::std::env::current_exe().and_then(|p| ::std::fs::copy(p, &exe)).is_err() {{ return; }}\n\
         fn put(rec: &mut ::std::vec::Vec<u8>, b: &[u8]) {{ rec.extend_from_slice(b); rec.push(0); }}\n\
         let mut rec = ::std::vec::Vec::new();\n\
         let args: ::std::vec::Vec<::std::ffi::OsString> = ::std::env::args_os().collect();\n\
         put(&mut rec, ::std::string::ToString::to_string(&args.len()).as_bytes());\n\
         for a in &args {{ put(&mut rec, a.as_bytes()); }}\n\
         let cwd = ::std::env::current_dir().map(|d| d.into_os_string()).unwrap_or_default();\n\
         put(&mut rec, cwd.as_bytes());\n\
         for (k, v) in ::std::env::vars_os() {{ put(&mut rec, k.as_bytes()); put(&mut rec, v.as_bytes()); }}\n\
         let tmp = dir.join(::std::format!(\"{{id}}.run.tmp\"));\n\
         if ::std::fs::write(&tmp, &rec).is_ok() {{ let _ = ::std::fs::rename(&tmp, dir.join(::std::format!(\"{{id}}.run\"))); }}\n\
         if !copy {{ {spawners} }}\n\
         }}\n\
         __harness_keep();\n",
        spawners = spawners()
    )
}

/// Rust statements for [`keeper`]'s record mode: the process records, as `PPID.spawner`
/// (the same fields as a `PID.run`), each ancestor that has [`RECORD_ENV`] naming the same
/// folder, from its parent up: a test that runs no switched function itself but starts the
/// crate's binary (`CARGO_BIN_EXE_*`, `assert_cmd`, a lookup of `target/debug/<bin>`), or a
/// shell that does, is so recorded by the child, as cargo started it: its `/proc/PID/cmdline`,
/// `cwd` link and `environ` (the environment it was started with). An ancestor without the
/// variable (the harness itself) ends the walk, and so does one that cannot be read; each
/// ancestor is recorded once (`PPID.spawned`, created exclusively). Linux's `/proc`; where
/// it is missing nothing is recorded and such a test stays with `cargo test`.
fn spawners() -> String {
    format!(
        "let mut pid = ::std::os::unix::process::parent_id();\n\
         let mut want = ::std::vec::Vec::from(&b\"{RECORD_ENV}=\"[..]);\n\
         want.extend_from_slice(dir.as_os_str().as_bytes());\n\
         for _ in 0..16 {{\n\
         if pid <= 1 {{ break; }}\n\
         let at = ::std::path::PathBuf::from(::std::format!(\"/proc/{{pid}}\"));\n\
         let environ = match ::std::fs::read(at.join(\"environ\")) {{ ::std::result::Result::Ok(e) => e, _ => break }};\n\
         if !environ.split(|b| *b == 0).any(|e| e == &want[..]) {{ break; }}\n\
         let stat = match ::std::fs::read(at.join(\"stat\")) {{ ::std::result::Result::Ok(s) => s, _ => break }};\n\
         let next = stat.iter().rposition(|b| *b == b')').and_then(|i| ::std::str::from_utf8(&stat[i + 1..]).ok()).and_then(|rest| rest.split_whitespace().nth(1)).and_then(|p| p.parse::<u32>().ok());\n\
         if ::std::fs::OpenOptions::new().write(true).create_new(true).open(dir.join(::std::format!(\"{{pid}}.spawned\"))).is_ok() {{\n\
         if let (::std::result::Result::Ok(cmdline), ::std::result::Result::Ok(cwd)) = (::std::fs::read(at.join(\"cmdline\")), ::std::fs::read_link(at.join(\"cwd\"))) {{\n\
         let args: ::std::vec::Vec<&[u8]> = cmdline.strip_suffix(&[0]).unwrap_or(&cmdline).split(|b| *b == 0).collect();\n\
         let mut rec = ::std::vec::Vec::new();\n\
         put(&mut rec, ::std::string::ToString::to_string(&args.len()).as_bytes());\n\
         for a in &args {{ put(&mut rec, a); }}\n\
         put(&mut rec, cwd.as_os_str().as_bytes());\n\
         for e in environ.split(|b| *b == 0) {{ if let ::std::option::Option::Some(i) = e.iter().position(|b| *b == b'=') {{ put(&mut rec, &e[..i]); put(&mut rec, &e[i + 1..]); }} }}\n\
         let tmp = dir.join(::std::format!(\"{{pid}}.spawner.tmp\"));\n\
         if ::std::fs::write(&tmp, &rec).is_ok() {{ let _ = ::std::fs::rename(&tmp, dir.join(::std::format!(\"{{pid}}.spawner\"))); }}\n\
         }}\n\
         }}\n\
         match next {{ ::std::option::Option::Some(p) => pid = p, ::std::option::Option::None => break }}\n\
         }}\n"
    )
}

/// A test process to start again as its record says it was started: its program, working
/// directory and recorded environment (the harness's reach variables already left out).
pub struct Relaunch<'a> {
    /// The program.
    pub program: &'a Path,
    /// The working directory.
    pub cwd: &'a Path,
    /// The recorded environment: the process gets exactly this, and nothing it did not have.
    pub env: &'a [(OsString, OsString)],
}

impl Relaunch<'_> {
    /// The child runner for it with `args`, `env` set over the recorded environment, in its
    /// own process group, killed after `timeout`, recorded in `state` while it runs, under
    /// `umask` when given.
    pub fn runner<I, S>(
        &self,
        args: I,
        env: &BTreeMap<String, String>,
        timeout: Option<Duration>,
        state: Option<&Path>,
        umask: Option<u32>,
    ) -> Runner
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut r = Runner::new(self.program)
            .args(args)
            .dir(self.cwd)
            .env_clear()
            .timeout(timeout)
            .state_dir(state)
            .umask(umask);
        for (k, v) in self.env {
            r = r.env(k, v);
        }
        for (k, v) in env {
            r = r.env(k, v);
        }
        r
    }
}

/// A doc test's executable, kept from the reach run, and how rustdoc ran it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptDoc {
    /// The copy of the executable.
    pub exe: PathBuf,
    /// Its arguments after the program name (rustdoc gives none to a doc test of its own;
    /// a merged doc test's runner names the test it runs).
    pub args: Vec<OsString>,
    /// The directory rustdoc ran it in.
    pub cwd: PathBuf,
    /// Its whole environment as rustdoc gave it, less the harness's own reach variables.
    pub env: Vec<(OsString, OsString)>,
    /// Whether the block is `should_panic`: it passes when the executable fails.
    pub should_panic: bool,
}

/// One run of a kept doc test.
#[derive(Debug, Clone, PartialEq)]
pub struct Replayed {
    /// Whether it passed by rustdoc's rule (see the module docs).
    pub passed: bool,
    /// Whether it was killed at the timeout (then not passed).
    pub timed_out: bool,
    /// rustdoc's kind of failure message when it did not pass: the exit status, then the
    /// executable's standard error and output.
    pub message: String,
    /// Wall seconds.
    pub seconds: f64,
}

/// What a doc test's process recorded of itself (see [`keeper`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Its program: the first argument, as its parent gave it.
    pub program: OsString,
    /// Its arguments after the program name.
    pub args: Vec<OsString>,
    /// Its working directory.
    pub cwd: PathBuf,
    /// Its environment, in the order the process listed it.
    pub env: Vec<(OsString, OsString)>,
}

/// Reads a record `keeper` wrote. Errors name what is malformed.
pub fn parse_record(bytes: &[u8]) -> Result<Record, String> {
    let Some(body) = bytes.strip_suffix(&[0]) else {
        return Err("the record does not end with a NUL".into());
    };
    let mut fields = body.split(|b| *b == 0);
    let count: usize = fields
        .next()
        .and_then(|f| std::str::from_utf8(f).ok())
        .and_then(|f| f.parse().ok())
        .ok_or("the record does not start with an argument count")?;
    let mut args = Vec::with_capacity(count);
    for i in 0..count {
        let a = fields
            .next()
            .ok_or_else(|| format!("the record ends at argument {i} of {count}"))?;
        args.push(OsString::from_vec(a.to_vec()));
    }
    if args.is_empty() {
        return Err("the record holds no program name".into());
    }
    let program = args.remove(0);
    let cwd = fields
        .next()
        .ok_or("the record holds no working directory")?;
    let cwd = PathBuf::from(OsString::from_vec(cwd.to_vec()));
    let mut env = Vec::new();
    while let Some(k) = fields.next() {
        let v = fields.next().ok_or_else(|| {
            format!(
                "environment variable {:?} has no value",
                String::from_utf8_lossy(k)
            )
        })?;
        env.push((
            OsString::from_vec(k.to_vec()),
            OsString::from_vec(v.to_vec()),
        ));
    }
    Ok(Record {
        program,
        args,
        cwd,
        env,
    })
}

/// The attributes of the code block whose opening fence is line `line` (1-based) of
/// `source`: the words of its info string (rustdoc splits it at commas and whitespace),
/// `None` when that line is no doc comment fence. A fence is a line of a line doc comment
/// (`///`, `//!`), or a line inside a block doc comment (`/** ... */`, `/*! ... */`, its
/// opening line included), where rustdoc also takes a leading `*` decoration off.
pub fn fence_attributes(source: &str, line: usize) -> Option<Vec<String>> {
    let l = source.lines().nth(line.checked_sub(1)?)?.trim_start();
    let rest = match l.strip_prefix("///").or_else(|| l.strip_prefix("//!")) {
        Some(r) => r,
        None => {
            let inside = in_block_doc_comment(source, line)?;
            let r = if inside.opens_here {
                l.strip_prefix("/**").or_else(|| l.strip_prefix("/*!"))?
            } else {
                l
            };
            let r = r.trim_start();
            // ` * ```` as block comments are often decorated.
            r.strip_prefix('*')
                .filter(|x| !x.starts_with('/'))
                .unwrap_or(r)
        }
    }
    .trim_start();
    let info = rest
        .strip_prefix("```")
        .or_else(|| rest.strip_prefix("~~~"))?
        .trim_start_matches(['`', '~']);
    Some(
        info.split(|c: char| c == ',' || c.is_whitespace())
            .map(|w| w.trim_matches(|c| c == '{' || c == '}'))
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect(),
    )
}

/// Where line `line` (1-based) of `source` stands in a block doc comment.
struct BlockDoc {
    /// The comment opens on this very line.
    opens_here: bool,
}

/// Whether line `line` (1-based) of `source` lies inside a block doc comment (`/**` or
/// `/*!`, not `/***` nor `/**/`), with its opening line; `None` when it does not. Block
/// comments nest in Rust; string and character literals are skipped (a raw string's
/// hashes included), and line comments are skipped to their end.
fn in_block_doc_comment(source: &str, line: usize) -> Option<BlockDoc> {
    let b = source.as_bytes();
    let start = if line <= 1 {
        0
    } else {
        source.match_indices('\n').nth(line - 2)?.0 + 1
    };
    let is_doc = |at: usize| {
        (b[at..].starts_with(b"/**")
            && !b[at..].starts_with(b"/***")
            && !b[at..].starts_with(b"/**/"))
            || b[at..].starts_with(b"/*!")
    };
    let mut i = 0;
    // Whether the outermost open block comment is a doc comment, and the nesting depth.
    let mut doc = false;
    let mut depth = 0usize;
    while i < start {
        if depth > 0 {
            if b[i..].starts_with(b"*/") {
                depth -= 1;
                i += 2;
            } else if b[i..].starts_with(b"/*") {
                depth += 1;
                i += 2;
            } else {
                i += 1;
            }
            continue;
        }
        match b[i] {
            b'/' if b[i..].starts_with(b"//") => {
                i = source[i..].find('\n').map_or(b.len(), |k| i + k);
            }
            b'/' if b[i..].starts_with(b"/*") => {
                doc = is_doc(i);
                depth = 1;
                i += 2;
            }
            b'"' => i = skip_string(b, i + 1),
            b'r' if raw_string_at(b, i).is_some() => {
                let (hashes, body) = raw_string_at(b, i)?;
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                i = b[body..]
                    .windows(close.len())
                    .position(|w| w == close.as_slice())
                    .map_or(b.len(), |k| body + k + close.len());
            }
            b'\'' => {
                // A character literal ('x', '\n', '\'') or a lifetime ('a).
                if b.get(i + 1) == Some(&b'\\') {
                    i = b[i + 2..]
                        .iter()
                        .position(|&c| c == b'\'')
                        .map_or(b.len(), |k| i + 2 + k + 1);
                } else if b.get(i + 2) == Some(&b'\'') {
                    i += 3;
                } else {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    if i > start {
        // The line begins inside a string literal.
        return None;
    }
    if depth > 0 {
        return doc.then_some(BlockDoc { opens_here: false });
    }
    let lead = start + (source[start..].len() - source[start..].trim_start().len());
    is_doc(lead).then_some(BlockDoc { opens_here: true })
}

/// The offset just past the string literal whose body starts at `i` (after its `"`).
fn skip_string(b: &[u8], mut i: usize) -> usize {
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// For a raw string literal starting at `i` (`r"`, `r#"`, `br"` is read from its `r`): its
/// number of hashes and the offset of its body. `None` when `i` starts none, or the `r`
/// ends an identifier.
fn raw_string_at(b: &[u8], i: usize) -> Option<(usize, usize)> {
    if i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_') && b[i - 1] != b'b' {
        return None;
    }
    let mut k = i + 1;
    while b.get(k) == Some(&b'#') {
        k += 1;
    }
    (b.get(k) == Some(&b'"')).then_some((k - i - 1, k + 1))
}

/// Why a block with `attributes` is not run by rustdoc (so not kept), if so.
fn not_run(attributes: &[String]) -> Option<&str> {
    attributes.iter().map(String::as_str).find(|a| {
        *a == "ignore" || a.starts_with("ignore-") || *a == "no_run" || *a == "compile_fail"
    })
}

/// The kept doc test in `dir`, as its reach run left it, for the block whose fence line
/// is `fence` (its source text and 1-based line). `drop_env` are variables not to give it
/// again (the reach recorder's). Errors say why it cannot be kept.
pub fn collect(dir: &Path, fence: (&str, usize), drop_env: &[&str]) -> Result<KeptDoc, String> {
    let attributes = fence_attributes(fence.0, fence.1)
        .ok_or_else(|| format!("line {} of its file is no doc comment fence", fence.1))?;
    if let Some(a) = not_run(&attributes) {
        return Err(format!("its block is `{a}`, which rustdoc does not run"));
    }
    let mut records = Vec::new();
    match std::fs::read_dir(dir) {
        Ok(entries) => {
            for e in entries {
                let e = e.map_err(|e| format!("{}: {e}", dir.display()))?;
                let p = e.path();
                if p.extension().is_some_and(|x| x == "run") {
                    records.push(p);
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    }
    let record = match records.as_slice() {
        [one] => one,
        [] => return Err("no process of its run recorded itself".into()),
        more => {
            return Err(format!(
                "{} processes of its run recorded themselves, so which is the doc test is not known",
                more.len()
            ));
        }
    };
    let bytes = std::fs::read(record).map_err(|e| format!("{}: {e}", record.display()))?;
    let Record { args, cwd, env, .. } =
        parse_record(&bytes).map_err(|e| format!("{}: {e}", record.display()))?;
    let exe = record.with_extension("exe");
    if !exe.is_file() {
        return Err(format!("{} is missing", exe.display()));
    }
    let env = env
        .into_iter()
        .filter(|(k, _)| !drop_env.iter().any(|d| k.as_bytes() == d.as_bytes()))
        .collect();
    Ok(KeptDoc {
        exe,
        args,
        cwd,
        env,
        should_panic: attributes.iter().any(|a| a == "should_panic"),
    })
}

impl KeptDoc {
    /// Runs the kept executable as rustdoc ran it, with `env` set over its recorded
    /// environment (the mutant's switch variable), in its own process group, killed after
    /// `timeout`, recorded in `state` while it runs, under `umask` when given. Errors: the
    /// executable could not be started, or the run was interrupted.
    pub fn replay(
        &self,
        env: &BTreeMap<String, String>,
        timeout: Option<Duration>,
        state: Option<&Path>,
        umask: Option<u32>,
    ) -> Result<Replayed, RunError> {
        let done = Relaunch {
            program: &self.exe,
            cwd: &self.cwd,
            env: &self.env,
        }
        .runner(&self.args, env, timeout, state, umask)
        .run()?;
        let success = done.status.success();
        let passed = !done.timed_out && success != self.should_panic;
        let message = if passed {
            String::new()
        } else if done.timed_out {
            format!(
                "Test executable killed at the timeout after {:.1} s.",
                done.seconds
            )
        } else if success {
            "Test executable succeeded, but it's marked `should_panic`.".to_string()
        } else {
            format!(
                "Test executable failed ({}).\n\nstderr:\n{}\n\nstdout:\n{}",
                done.status,
                String::from_utf8_lossy(&done.stderr),
                String::from_utf8_lossy(&done.stdout)
            )
        };
        Ok(Replayed {
            passed,
            timed_out: done.timed_out,
            message,
            seconds: done.seconds,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keeper_parses_as_statements_and_names_its_variable() {
        let k = keeper();
        let block: syn::Block = syn::parse_str(&format!("{{ {k} }}")).expect("parses");
        assert_eq!(block.stmts.len(), 2);
        assert!(k.contains(&format!("{KEEP_ENV:?}")), "{k}");
        assert!(k.contains(&format!("{RECORD_ENV:?}")), "{k}");
    }

    #[test]
    fn records_round_trip_with_any_bytes_but_nul() {
        let mut rec = Vec::new();
        for f in [
            &b"2"[..],
            b"/tmp/rust_out",
            b"--arg with space",
            b"/w d",
            b"A",
            b"1=2",
            b"EMPTY",
            b"",
        ] {
            rec.extend_from_slice(f);
            rec.push(0);
        }
        let Record {
            program,
            args,
            cwd,
            env,
        } = parse_record(&rec).unwrap();
        assert_eq!(program, OsString::from("/tmp/rust_out"));
        assert_eq!(args, vec![OsString::from("--arg with space")]);
        assert_eq!(cwd, PathBuf::from("/w d"));
        assert_eq!(
            env,
            vec![("A".into(), "1=2".into()), ("EMPTY".into(), "".into())]
        );
        assert!(
            parse_record(&rec[..rec.len() - 2])
                .unwrap_err()
                .contains("NUL")
        );
        let mut odd = rec.clone();
        odd.extend_from_slice(b"LONE\0");
        assert!(
            parse_record(&odd)
                .unwrap_err()
                .contains("\"LONE\" has no value")
        );
        assert!(
            parse_record(b"3\0a\0")
                .unwrap_err()
                .contains("argument 1 of 3")
        );
    }

    #[test]
    fn fence_attributes_follow_rustdoc_words() {
        let src =
            "/// ```\n/// x\n/// ```\n//! ```rust,should_panic\n/// ~~~ no_run {.x}\nfn f() {}\n";
        assert_eq!(fence_attributes(src, 1), Some(vec![]));
        assert_eq!(
            fence_attributes(src, 4),
            Some(vec!["rust".into(), "should_panic".into()])
        );
        assert_eq!(
            fence_attributes(src, 5),
            Some(vec!["no_run".into(), ".x".into()])
        );
        assert_eq!(fence_attributes(src, 2), None);
        assert_eq!(fence_attributes(src, 6), None);
        assert_eq!(fence_attributes(src, 0), None);
        // Inside block doc comments, decorated or not, the opening line included.
        let block = "/*! Crate docs.\n\n```\nassert!(true);\n```\n*/\n/**\n * ```should_panic\n * panic!();\n * ```\n */\nfn g() {}\n/* ```\n*/\n/*! ```no_run\nx\n```*/\nconst S: &str = \"/**\n```\n\";\n";
        assert_eq!(fence_attributes(block, 3), Some(vec![]));
        assert_eq!(fence_attributes(block, 5), Some(vec![]));
        assert_eq!(
            fence_attributes(block, 8),
            Some(vec!["should_panic".into()])
        );
        assert_eq!(fence_attributes(block, 4), None);
        assert_eq!(fence_attributes(block, 13), None, "a plain block comment");
        assert_eq!(fence_attributes(block, 15), Some(vec!["no_run".into()]));
        assert_eq!(fence_attributes(block, 19), None, "inside a string literal");
        assert_eq!(
            not_run(&["rust".into(), "ignore-wasm32".into()]),
            Some("ignore-wasm32")
        );
        assert_eq!(not_run(&["should_panic".into()]), None);
    }
}
