//! `genai serve`: command-line arguments and the signal handling around [`engine::server::serve`].

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;

use engine::server::{ServerConfig, serve};

use crate::model::{KvArgs, ModelArgs, apply_isa, default_model, model_kind};

/// Arguments of `genai serve`.
#[derive(Args, Clone)]
pub(crate) struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on (0: any free port, printed at start).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// KV byte budget [default: --max-running sequences of 2048 tokens].
    #[arg(long)]
    kv_budget_bytes: Option<u64>,
    /// Requests running in the continuous batch at once.
    #[arg(long, default_value_t = 4)]
    max_running: usize,
    /// Requests waiting for KV budget at once; one more is answered 429.
    #[arg(long, default_value_t = 16)]
    max_queue: usize,
    /// Largest request body in bytes (larger: 413).
    #[arg(long, default_value_t = 1 << 20)]
    max_body_bytes: usize,
    /// Prefill chunk in tokens (a running stream waits at most one chunk per step).
    #[arg(long, default_value_t = 64)]
    chunk: usize,
    /// Pace the batch: at least this many milliseconds per step (0: full speed); holds
    /// requests running on a tiny model for demonstrations and tests.
    #[arg(long, default_value_t = 0)]
    step_interval_ms: u64,
    /// Do not keep finished requests' KV pages for later requests that share their prefix
    /// (each request prefills its whole prompt).
    #[arg(long)]
    no_prefix_cache: bool,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    kv: KvArgs,
}

/// Serve until SIGTERM or Ctrl-C; exit 0 after the running requests finished.
pub(crate) fn run(args: ServeArgs) -> Result<()> {
    apply_isa(&args.model)?;
    let model: PathBuf = match &args.model.model {
        Some(p) => {
            model_kind(p)?;
            p.clone()
        }
        None => default_model()?,
    };
    let config = ServerConfig {
        threads: args.model.threads.unwrap_or(0),
        kv_budget_bytes: args.kv_budget_bytes,
        max_running: args.max_running.max(1),
        max_queue: args.max_queue,
        max_body_bytes: args.max_body_bytes,
        chunk: args.chunk.max(1),
        step_interval: std::time::Duration::from_millis(args.step_interval_ms),
        kv_dtype: args.kv.dtype(),
        prefix_cache: !args.no_prefix_cache,
        ..ServerConfig::new(model)
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(async move {
        let addr = format!("{}:{}", args.host, args.port);
        let listener = tokio::net::TcpListener::bind(&addr)
            .await
            .with_context(|| format!("listening on {addr}"))?;
        let local = listener.local_addr()?;
        eprintln!(
            "genai serve: listening on http://{local} (loading {})",
            config.model.display()
        );
        let shutdown = async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("installing the SIGTERM handler");
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            eprintln!(
                "genai serve: shutting down: not accepting, finishing running requests, \
                 answering queued ones 503"
            );
        };
        serve(
            listener,
            config,
            |budget| eprintln!("genai serve: ready; {budget}"),
            shutdown,
        )
        .await?;
        eprintln!("genai serve: stopped");
        Ok(())
    })
}
