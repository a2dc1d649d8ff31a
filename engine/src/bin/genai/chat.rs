//! `genai chat`: an interactive multi-turn chat on the terminal, each reply streamed as it is generated.

use std::io::BufRead;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;

use engine::chat::Message;

use crate::generate::{SampleArgs, request, stream};
use crate::model::{KvArgs, ModelArgs, chat_template, load_engine};

/// Arguments of `genai chat`.
#[derive(Args)]
pub(crate) struct ChatArgs {
    /// A system turn.
    #[arg(long)]
    system: Option<String>,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    kv: KvArgs,
    #[command(flatten)]
    sample: SampleArgs,
}

/// Chat until an empty line, end of input or Ctrl-C at the prompt (exit 0); Ctrl-C during
/// a reply stops the reply.
pub(crate) fn run(args: ChatArgs) -> Result<()> {
    let l = load_engine(&args.model, args.kv.options())?;
    // Each turn re-sends the whole conversation: the prefix cache keeps its KV pages, so a
    // turn prefills only what it adds.
    let l = crate::model::Loaded {
        engine: l.engine.with_service(engine::service::ServiceOptions {
            prefix_cache: true,
            ..Default::default()
        })?,
        ..l
    };
    let template = chat_template(&l)?;
    let mut msgs = Vec::new();
    if let Some(s) = args.system {
        msgs.push(Message::system(s));
    }
    // Ctrl-C during a reply stops the reply and returns to the prompt; Ctrl-C, Ctrl-D
    // (end of input) or an empty line at the prompt ends the chat with exit 0.
    let interrupt = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, interrupt.clone())
        .context("installing the Ctrl-C handler")?;
    let lines = stdin_lines();
    loop {
        // Cleared before the prompt shows: a Ctrl-C seen at the prompt ends the chat.
        interrupt.store(false, Ordering::SeqCst);
        eprint!("> ");
        let line = loop {
            match lines.recv_timeout(Duration::from_millis(50)) {
                Ok(line) => break Some(line),
                Err(mpsc::RecvTimeoutError::Disconnected) => break None,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if interrupt.load(Ordering::SeqCst) {
                        break None;
                    }
                }
            }
        };
        let Some(line) = line.filter(|l| !l.trim().is_empty()) else {
            eprintln!();
            break;
        };
        msgs.push(Message::user(line.trim_end()));
        let prompt = template.render(&msgs, true)?;
        let text = stream(&l, &request(prompt, &args.sample), Some(&interrupt))?;
        msgs.push(Message::assistant(text));
    }
    Ok(())
}

/// Lines of standard input, read on their own thread so that the chat prompt can also wait
/// for Ctrl-C; the channel closes at end of input or on a read error.
fn stdin_lines() -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        loop {
            let mut line = String::new();
            match stdin.lock().read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    if tx.send(line).is_err() {
                        return;
                    }
                }
            }
        }
    });
    rx
}
