//! `genai info`: a model's summary from its GGUF metadata, and with `--memory` its resident memory after one forward pass.

use anyhow::Result;
use clap::Args;

use engine::kv::KvCache;
use engine::model::Logits;
use engine::runtime::EngineOptions;

use crate::measure::{memory_bound_line, resident_bytes};
use crate::model::{ModelArgs, load_engine};

/// Arguments of `genai info`.
#[derive(Args)]
pub(crate) struct InfoArgs {
    /// Also report resident memory after load (from /proc/self/status).
    #[arg(long)]
    memory: bool,
    #[command(flatten)]
    model: ModelArgs,
}

/// Print the model summary (and the memory lines with `--memory`).
pub(crate) fn run(args: InfoArgs) -> Result<()> {
    let l = load_engine(&args.model, EngineOptions::default())?;
    let m = l.model()?;
    let file = m.weights().file();
    let c = m.config();
    let size = l.file_bytes();
    println!(
        "file            {}",
        file.path()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    );
    println!("gguf version    {}", file.version());
    println!("architecture    {}", c.architecture);
    if let Ok(name) = file.metadata().get_str("general.name") {
        println!("name            {name}");
    }
    println!("tensors         {}", file.tensors().len());
    println!("blocks          {}", c.n_layers);
    println!("hidden          {}", c.hidden);
    println!("ffn             {}", c.ffn);
    println!(
        "heads           {} (kv {}, head dim {})",
        c.n_heads, c.n_kv_heads, c.head_dim
    );
    println!("rope base       {}", c.rope_base);
    println!("rms eps         {}", c.rms_eps);
    println!("context         {}", c.context_len);
    println!("vocab           {}", c.vocab);
    println!("tied embeddings {}", m.weights().tied_embeddings);
    println!(
        "kernels         {} threads, {}",
        m.cpu().threads(),
        m.cpu().isa()
    );
    if args.memory {
        // One decode step touches every weight page, so the figure counts them all.
        let mut kv = KvCache::new(m.kv_config(1, engine::kv::KV_DTYPE))?;
        let seq = kv.create_sequence();
        m.forward(&mut kv, seq, &[0], Logits::Last)?;
        let rss = resident_bytes()?;
        let kv_bytes = (kv.created_pages() * kv.page_bytes()) as u64;
        println!("file bytes      {size}");
        println!(
            "resident bytes  {rss} after one forward pass ({:.2}x the file)",
            rss as f64 / size.max(1) as f64
        );
        memory_bound_line(rss, size, kv_bytes);
    }
    Ok(())
}
