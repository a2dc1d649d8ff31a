//! `genai chat` on the real SmolLM2-135M-Instruct under Ctrl-C (SIGINT) and end of input:
//! Ctrl-C during a reply stops the reply and returns to the prompt; Ctrl-C or Ctrl-D at the
//! prompt ends the chat with exit 0.

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::common;
use common::model_path;

/// A `genai chat` child whose stderr and stdout are read on threads, killed if the test
/// fails first.
struct Chat {
    child: Child,
    stderr: mpsc::Receiver<u8>,
    stdout: mpsc::Receiver<u8>,
    seen: String,
}

/// The bytes of `from`, one by one, on a channel.
fn bytes_of(mut from: impl Read + Send + 'static) -> mpsc::Receiver<u8> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut b = [0u8; 1];
        while from.read(&mut b).is_ok_and(|n| n == 1) {
            if tx.send(b[0]).is_err() {
                return;
            }
        }
    });
    rx
}

impl Chat {
    fn start() -> Chat {
        let mut child = Command::new(env!("CARGO_BIN_EXE_genai"))
            .args(["chat", "--threads", "1", "-n", "2000", "--model"])
            .arg(model_path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = bytes_of(child.stderr.take().unwrap());
        let stdout = bytes_of(child.stdout.take().unwrap());
        Chat {
            child,
            stderr,
            stdout,
            seen: String::new(),
        }
    }

    /// Wait until stderr has shown `needle` `count` times in all.
    fn wait_for(&mut self, needle: &str, count: usize) {
        let t0 = Instant::now();
        while self.seen.matches(needle).count() < count {
            let left = Duration::from_secs(60).saturating_sub(t0.elapsed());
            match self.stderr.recv_timeout(left) {
                Ok(b) => self.seen.push(b as char),
                Err(_) => panic!(
                    "{needle:?} x{count} not seen in 60 s; stderr:\n{}",
                    self.seen
                ),
            }
        }
    }

    fn interrupt(&self) {
        // SAFETY: sending a signal to our own child process.
        assert_eq!(
            unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) },
            0
        );
    }

    fn exit_code(&mut self) -> Option<i32> {
        let t0 = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st.code();
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "chat did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Chat {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[test]
fn ctrl_c_stops_the_reply_and_returns_to_the_prompt_then_exits_0_at_the_prompt() {
    let mut chat = Chat::start();
    chat.wait_for("> ", 1);
    let mut stdin = chat.child.stdin.take().unwrap();
    writeln!(
        stdin,
        "Write a very long story about a dragon who learns to bake."
    )
    .unwrap();
    stdin.flush().unwrap();
    // Stop the reply as soon as its first text is printed.
    chat.stdout
        .recv_timeout(Duration::from_secs(60))
        .expect("the reply starts within 60 s");
    chat.interrupt();
    chat.wait_for("finish ", 1);
    chat.wait_for("> ", 2);
    assert!(
        chat.seen.contains("finish Callback"),
        "the reply ended by the interrupt, not its limit:\n{}",
        chat.seen
    );
    assert!(
        !chat.seen.contains("generated 2000 tokens"),
        "{}",
        chat.seen
    );
    // Ctrl-C at the prompt: exit 0.
    chat.interrupt();
    assert_eq!(chat.exit_code(), Some(0), "{}", chat.seen);
}

#[test]
fn ctrl_d_at_the_prompt_exits_0() {
    let mut chat = Chat::start();
    chat.wait_for("> ", 1);
    drop(chat.child.stdin.take());
    assert_eq!(chat.exit_code(), Some(0), "{}", chat.seen);
}
