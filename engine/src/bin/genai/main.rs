//! `genai`: command-line front end of the engine (generate, chat, template, tokenize, info, bench, serve), one module per subcommand.

use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

mod bench;
mod chat;
mod generate;
mod info;
mod measure;
mod model;
mod serve;
mod template;
mod tokenize;

#[derive(Parser)]
#[command(
    name = "genai",
    version,
    about = "CPU inference for decoder LLMs (GGUF)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate a continuation of PROMPT (raw text; special tokens such as <|im_start|> are recognised).
    Generate(generate::GenerateArgs),
    /// An interactive multi-turn chat on the terminal (empty line or EOF ends it).
    Chat(chat::ChatArgs),
    /// Chat templates: render a conversation with a model's template.
    Template {
        #[command(subcommand)]
        command: template::TemplateCommand,
    },
    /// Print the token ids of TEXT (special tokens recognised).
    Tokenize(tokenize::TokenizeArgs),
    /// Model summary from the GGUF metadata.
    Info(info::InfoArgs),
    /// Prefill and decode tokens/s: median over several runs after a warm-up.
    Bench(bench::BenchArgs),
    /// An OpenAI-compatible HTTP server on the engine's admission funnel and continuous batch.
    Serve(serve::ServeArgs),
}

fn main() -> ExitCode {
    fixed_mmap_threshold();
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("genai: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Pin glibc's mmap threshold at 1 MiB. By default glibc raises it after the first large
/// free (up to 32 MiB), after which prefill's multi-megabyte activation buffers come from
/// the heap and stay resident once freed; with a fixed threshold they are mapped and
/// returned to the system on free, keeping resident memory near weights + KV cache.
/// One malloc arena for every thread: the forward pass runs on the kernel pool's threads,
/// and a per-thread arena would keep each thread's freed buffers resident separately.
fn fixed_mmap_threshold() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator tuning; called before any other thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Run the chosen subcommand.
fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Generate(args) => generate::run(args),
        Command::Chat(args) => chat::run(args),
        Command::Template { command } => template::run(command),
        Command::Tokenize(args) => tokenize::run(args),
        Command::Info(args) => info::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Serve(args) => serve::run(args),
    }
}
