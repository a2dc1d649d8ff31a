//! Loading the model for serving: the engine under its KV byte budget and queue bound, and the chat template.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};

use super::state::{App, seconds_now};
use super::{Budget, DEFAULT_SEQ_TOKENS, ServeError, ServerConfig};
use crate::chat::ChatTemplate;
use crate::runtime::{Engine, EngineOptions};
use crate::service::ServiceOptions;

/// The model's name in `/v1/models` and responses: the GGUF file stem or the package
/// directory name.
fn model_name(path: &std::path::Path) -> String {
    let name = if path.is_dir() {
        path.file_name()
    } else {
        path.file_stem()
    };
    name.map_or_else(|| "model".to_string(), |n| n.to_string_lossy().into_owned())
}

/// Load `config.model` under its KV byte budget (its service relays each batch step's output
/// to the handlers through a task on `runtime`). Returns the app the handlers share and the
/// budget to print.
///
/// # Errors
/// [`ServeError::Engine`] when the engine fails to load; [`ServeError::Unservable`] when the
/// model has no KV geometry, no decode core or a broken chat template.
pub(super) fn load(
    config: &ServerConfig,
    runtime: tokio::runtime::Handle,
) -> Result<(Arc<App>, Budget), ServeError> {
    let probe = EngineOptions {
        threads: config.threads,
        max_running: config.max_running.max(1),
        kv_dtype: config.kv_dtype,
        ..EngineOptions::default()
    };
    let open = |opts: EngineOptions| {
        if config.model.is_dir() {
            Engine::load_package(&config.model, opts)
        } else {
            Engine::load_gguf(&config.model, opts)
        }
    };
    let engine = open(probe)?;
    let geometry = engine.kv_geometry().ok_or_else(|| {
        ServeError::Unservable("the model has no KV geometry (no decoder)".into())
    })?;
    let bpt = geometry
        .bytes_per_token()
        .map_err(|e| ServeError::Engine(e.into()))?;
    let bytes = config
        .kv_budget_bytes
        .unwrap_or(config.max_running.max(1) as u64 * DEFAULT_SEQ_TOKENS * bpt);
    let engine = engine.with_kv_budget(bytes)?.with_service(ServiceOptions {
        max_queue: config.max_queue,
        chunk: config.chunk,
        step_interval: config.step_interval,
        relay: Some(runtime),
        prefix_cache: config.prefix_cache,
    })?;
    let model = engine.model().cloned().ok_or_else(|| {
        ServeError::Unservable(
            "the model has no decode core (its decoder is not the native llama_decoder block); \
             the server runs requests on the continuous batch only"
                .into(),
        )
    })?;
    let metadata = model.weights().file().metadata();
    let template = match metadata.get_str("tokenizer.chat_template") {
        Ok(_) => Some(
            ChatTemplate::from_gguf(metadata, None)
                .map_err(|e| ServeError::Unservable(format!("the model's chat template: {e}")))?,
        ),
        Err(_) => None,
    };
    // The vocabulary's byte trie for `response_format`, built while loading rather than in
    // the first constrained request's first step.
    if let Some(tok) = engine.tokenizer() {
        tok.constraint_vocab();
    }
    let tokens = bytes / bpt;
    let app = Arc::new(App {
        context_len: model.config().context_len,
        engine: Arc::new(engine),
        template,
        model_name: model_name(&config.model),
        created: seconds_now(),
        draining: AtomicBool::new(false),
        next_id: AtomicU64::new(0),
    });
    Ok((
        app,
        Budget {
            bytes,
            bytes_per_token: bpt,
            tokens,
            max_running: config.max_running.max(1),
            max_queue: config.max_queue,
        },
    ))
}
