//! The `Engine`: one request funnel (validate → encode → count → admit → on_admitted → clamp → run → complete) for every request on every route.
//!
//! An [`Engine`] serves a bare GGUF model or a declared-workflow package. Every
//! request, whatever it carries (text, token ids or token rows; bound application
//! tensors; component overrides; a session id) and whichever executor runs it, takes
//! the same path, written out once in [`Engine::generate_with`] (docs/design.md §2.1):
//!
//! 1. **validate**: the request's shape, its application tensors and component
//!    overrides against the package's declarations ([`Package::validate_request`]),
//!    its session; the route is chosen here;
//! 2. **encode**: text to token ids (token prompts pass through);
//! 3. **count**: the [`Demand`]: prompt tokens per row, token rows, the session's
//!    carried prefix, positions contributed by application inputs (from their
//!    declared shapes), new tokens;
//! 4. **admit**: the [`Scheduler`] reserves the KV bytes, clamps or refuses;
//! 5. **on_admitted**: the caller's signal, exactly once, only after admission;
//! 6. **clamp**: `max_new_tokens` lowered to the admitted count;
//! 7. **run**: the fused decode core or the workflow interpreter;
//! 8. **complete**: the reservation is released, after success and after failure.
//!
//! Routes (docs/design.md §2.2): an engine holding a decode core (a bare GGUF, or a package
//! whose decoder is the native `llama_decoder` block) runs prompt-only requests on it;
//! a request binding an application tensor or overriding a component runs on the
//! interpreter; an engine without a decode core runs everything on the interpreter.
//! Both executors record the components they invoke in an [`EventLog`].
//!
//! KV geometry: the scheduler's [`KvGeometry`] is the one concept; a package's
//! `llama_decoder` geometry ([`crate::workflow::KvGeometry`]) is converted to it.

// EngineError carries the typed errors of the model, package and interpreter by value;
// boxing them is a follow-up (see the report).
#![allow(clippy::result_large_err, clippy::large_enum_variant)]

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use crate::batch::Piece;
use crate::funnel::{Core, DecodeCore, model_geometry};
use crate::gguf::GgufFile;
use crate::isa::Isa;
use crate::kernels::matmul::Cpu;
use crate::model::Model;
use crate::scheduler::{Demand, KvGeometry, Scheduler, Usage};
use crate::service::{Service, ServiceOptions, ServiceStats, SubmitOptions, Ticket};
use crate::tokenizer::{GgufVocab, Tokenizer};
use crate::workflow::manifest::{Implementation, NativeKind};
use crate::workflow::{self, GgufWeights, ModelBlocks, NativeBlocks, Package, WorkflowError};

/// KV element type of the decode core's caches (the interpreter's native blocks use the same).
use crate::kv::{KV_DTYPE, KvDtype};

pub use crate::batch::Finish;
/// What a per-token callback tells the generation (one enum for both executors).
pub use crate::flow::Flow;
pub use crate::request::{
    BadRequest, Completion, EngineError, GenerateRequest, GenerateResult, Prompt, Route,
};

/// How an [`Engine`] is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineOptions {
    /// The KV byte budget, in bytes, of the engine's own scheduler.
    pub kv_budget_bytes: u64,
    /// Running-batch limit of the engine's own scheduler (≥ 1).
    pub max_running: usize,
    /// Run prompt-only requests on the fused decode core when the model has one;
    /// `false` runs every request on the workflow interpreter.
    pub decode_core: bool,
    /// Kernel threads (0: one per core).
    pub threads: usize,
    /// Element type of the KV caches (decode core and interpreter); it sets the KV
    /// geometry's bytes per element, so the byte budget holds twice as many f16 tokens.
    pub kv_dtype: KvDtype,
}

impl Default for EngineOptions {
    /// A 1 GiB budget, 8 running requests, the decode core on, one thread per core, an
    /// f16 KV cache ([`KV_DTYPE`]).
    fn default() -> Self {
        EngineOptions {
            kv_budget_bytes: 1 << 30,
            max_running: 8,
            decode_core: true,
            threads: 0,
            kv_dtype: KV_DTYPE,
        }
    }
}

/// A CPU inference engine: one model behind one service ([`crate::service`]) that every
/// request, from every front end, enters through (one queue, one admission, one continuous
/// batch).
///
/// [`Engine::submit`] is the one door: it runs stages 1–3 of the funnel (validate, encode,
/// count) on the caller's thread and admits, queues or refuses under the service's lock;
/// the service's worker thread runs every admitted request (the decode core's rows join its
/// continuous batch; the interpreter's requests run on a thread of their own) and releases
/// its reservation when it ends. [`Engine::generate_stream`] and friends are clients of
/// `submit` that wait for the result.
pub struct Engine {
    core: Arc<Core>,
    options: ServiceOptions,
    service: OnceLock<Service>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("decode_core", &self.core.core.is_some())
            .field("package", &self.core.package.as_ref().map(Package::name))
            .field("geometry", &self.core.geometry)
            .field("usage", &self.core.scheduler.usage())
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Serve a bare GGUF model on the decode core (tokenizer from its vocabulary).
    ///
    /// Errors: [`EngineError::Model`] naming the path, [`EngineError::Tokenizer`],
    /// [`EngineError::Scheduler`].
    pub fn load_gguf(path: impl AsRef<Path>, opts: EngineOptions) -> Result<Engine, EngineError> {
        let path = path.as_ref();
        let merr = |source| EngineError::Model {
            path: path.to_path_buf(),
            source,
        };
        let file = Arc::new(GgufFile::open(path).map_err(|e| merr(e.into()))?);
        let tokenizer = Tokenizer::from_vocab(&GgufVocab::from_metadata(file.metadata())?)?;
        let model =
            Arc::new(Model::from_file(file, Cpu::new(opts.threads, Isa::best())).map_err(merr)?);
        let geometry = model_geometry(&model, opts.kv_dtype);
        let names = ["token_embedding", "llama_decoder", "lm_head"].map(String::from);
        Engine::assemble(
            Some(DecodeCore { model, names }),
            None,
            Some(Arc::new(tokenizer)),
            Some(geometry),
            opts,
        )
    }

    /// Serve a package directory: its decoder runs prompt-only requests on the decode
    /// core when it is the native `llama_decoder` block and `opts.decode_core` is set;
    /// everything else runs on the interpreter. The tokenizer is the package's
    /// `tokenizer.json` if present, else its weights' GGUF vocabulary, else none.
    ///
    /// Errors: [`EngineError::Package`] (manifest, validation, weights),
    /// [`EngineError::Model`], [`EngineError::Tokenizer`], [`EngineError::Scheduler`].
    pub fn load_package(dir: impl AsRef<Path>, opts: EngineOptions) -> Result<Engine, EngineError> {
        let dir = dir.as_ref();
        let mpath = dir.join("package.json");
        let text = std::fs::read_to_string(&mpath).map_err(|source| WorkflowError::Io {
            path: mpath.clone(),
            source,
        })?;
        let manifest = Package::parse_manifest(&text, &mpath)?;
        let native_block = |kind: NativeKind| {
            manifest
                .components
                .iter()
                .find_map(|c| match &c.implementation {
                    Implementation::Native(n) if n.block == kind => Some(c.name.clone()),
                    _ => None,
                })
        };
        let names = [
            native_block(NativeKind::TokenEmbedding),
            native_block(NativeKind::LlamaDecoder),
            native_block(NativeKind::LmHead),
        ];
        let has_native = names.iter().any(Option::is_some);
        let mut file = None;
        let mut model = None;
        if let Some(w) = &manifest.weights {
            let wpath = dir.join(w);
            let merr = |source| EngineError::Model {
                path: wpath.clone(),
                source,
            };
            let f = Arc::new(GgufFile::open(&wpath).map_err(|e| merr(e.into()))?);
            if has_native {
                let cpu = Cpu::new(opts.threads, Isa::best());
                model = Some(Arc::new(Model::from_file(f.clone(), cpu).map_err(merr)?));
            }
            file = Some(f);
        }
        let tjson = dir.join("tokenizer.json");
        let tokenizer = match &file {
            _ if tjson.is_file() => {
                let vocab = file
                    .as_ref()
                    .and_then(|f| GgufVocab::from_metadata(f.metadata()).ok());
                Some(Tokenizer::from_tokenizer_json(
                    &tjson,
                    vocab.as_ref().and_then(|v| v.bos),
                    vocab.as_ref().and_then(|v| v.eos),
                )?)
            }
            Some(f) if f.metadata().get("tokenizer.ggml.tokens").is_some() => Some(
                Tokenizer::from_vocab(&GgufVocab::from_metadata(f.metadata())?)?,
            ),
            _ => None,
        };
        let weights: Option<Arc<dyn workflow::Weights>> = match &file {
            Some(f) => Some(Arc::new(GgufWeights::new(f.clone()).map_err(|source| {
                WorkflowError::Weights {
                    package: manifest.name.clone(),
                    path: dir.join(manifest.weights.as_deref().unwrap_or_default()),
                    source,
                }
            })?)),
            None => None,
        };
        let native: Option<Arc<dyn NativeBlocks>> = model.as_ref().map(|m| {
            Arc::new(ModelBlocks::from_model(m.clone()).with_kv_dtype(opts.kv_dtype))
                as Arc<dyn NativeBlocks>
        });
        let package = Package::from_parts(manifest, weights, native)?;
        let geometry = package.kv_geometry().map(|g| KvGeometry {
            n_layers: g.n_layers,
            n_kv_heads: g.n_kv_heads,
            head_dim: g.head_dim,
            elem_bytes: g.elem_bytes,
        });
        let core = match (&model, names) {
            (Some(model), [Some(e), Some(d), Some(h)]) if opts.decode_core => Some(DecodeCore {
                model: model.clone(),
                names: [e, d, h],
            }),
            _ => None,
        };
        Engine::assemble(core, Some(package), tokenizer.map(Arc::new), geometry, opts)
    }

    fn assemble(
        core: Option<DecodeCore>,
        package: Option<Package>,
        tokenizer: Option<Arc<Tokenizer>>,
        geometry: Option<KvGeometry>,
        opts: EngineOptions,
    ) -> Result<Engine, EngineError> {
        let scheduler = Scheduler::with_geometry(opts.kv_budget_bytes, geometry, opts.max_running)?;
        Ok(Engine {
            core: Arc::new(Core {
                core,
                package,
                tokenizer,
                geometry,
                scheduler,
                sessions: Mutex::new(HashMap::new()),
                kv_dtype: opts.kv_dtype,
            }),
            options: ServiceOptions::default(),
            service: OnceLock::new(),
        })
    }

    /// The core, to change before the service starts.
    ///
    /// Errors: [`EngineError::ServiceStarted`] once a request was submitted (the worker
    /// shares the core from then on).
    fn core_mut(&mut self) -> Result<&mut Core, EngineError> {
        if self.service.get().is_some() {
            return Err(EngineError::ServiceStarted);
        }
        Arc::get_mut(&mut self.core).ok_or(EngineError::ServiceStarted)
    }

    /// Share a scheduler (one KV byte budget across holders) instead of the engine's own.
    ///
    /// Errors: [`EngineError::SchedulerMismatch`] if it prices tokens differently from
    /// this model's KV geometry (a scheduler without `bytes_per_token`, no byte budget, is
    /// accepted); [`EngineError::ServiceStarted`] after the first request.
    pub fn with_scheduler(mut self, scheduler: Scheduler) -> Result<Engine, EngineError> {
        let model = self
            .core
            .geometry
            .map(|g| g.bytes_per_token())
            .transpose()?;
        match (scheduler.bytes_per_token(), model) {
            (Some(s), Some(m)) if s != m => {
                return Err(EngineError::SchedulerMismatch {
                    scheduler: s,
                    model: m,
                });
            }
            (Some(s), None) => {
                return Err(EngineError::SchedulerMismatch {
                    scheduler: s,
                    model: 0,
                });
            }
            _ => {}
        }
        self.core_mut()?.scheduler = scheduler;
        Ok(self)
    }

    /// The same engine with a KV byte budget of `bytes` (its own scheduler, the same KV
    /// geometry and running-batch limit).
    ///
    /// Errors: [`EngineError::Scheduler`] for an invalid configuration;
    /// [`EngineError::ServiceStarted`] after the first request.
    pub fn with_kv_budget(mut self, bytes: u64) -> Result<Engine, EngineError> {
        let max_running = self.core.scheduler.usage().max_running;
        let geometry = self.core.geometry;
        self.core_mut()?.scheduler = Scheduler::with_geometry(bytes, geometry, max_running)?;
        Ok(self)
    }

    /// The same engine whose service runs with `options` (queue bound, prefill chunk, step
    /// pace).
    ///
    /// Errors: [`EngineError::ServiceStarted`] after the first request.
    pub fn with_service(mut self, options: ServiceOptions) -> Result<Engine, EngineError> {
        self.core_mut()?;
        self.options = options;
        Ok(self)
    }

    /// The scheduler (a handle on the shared budget).
    pub fn scheduler(&self) -> &Scheduler {
        &self.core.scheduler
    }

    /// The KV budget's state now: bytes used and limit, running and queued requests.
    pub fn usage(&self) -> Usage {
        self.core.scheduler.usage()
    }

    /// Element type of the engine's KV caches ([`EngineOptions::kv_dtype`]).
    pub fn kv_dtype(&self) -> KvDtype {
        self.core.kv_dtype
    }

    /// Bytes of the budget the prefix cache holds now (part of [`Engine::usage`]'s used
    /// bytes; evicted before any request waits for bytes).
    pub fn cached_bytes(&self) -> u64 {
        self.core.scheduler.cached_bytes()
    }

    /// KV geometry of the model's decoder; `None` without one.
    pub fn kv_geometry(&self) -> Option<KvGeometry> {
        self.core.geometry
    }

    /// Whether prompt-only requests run on the fused decode core.
    pub fn has_decode_core(&self) -> bool {
        self.core.core.is_some()
    }

    /// The package, when serving one.
    pub fn package(&self) -> Option<&Package> {
        self.core.package.as_ref()
    }

    /// The tokenizer, if the model has one.
    pub fn tokenizer(&self) -> Option<&Tokenizer> {
        self.core.tokenizer.as_deref()
    }

    /// The decode core's model, when the engine has one.
    pub fn model(&self) -> Option<&Arc<Model>> {
        self.core.core.as_ref().map(|c| &c.model)
    }

    /// Forget a session's carried state. Returns whether it existed.
    pub fn end_session(&self, id: &str) -> bool {
        self.core.sessions_lock().remove(id).is_some()
    }

    /// The service, started on first use.
    fn service(&self) -> &Service {
        self.service
            .get_or_init(|| Service::start(self.core.clone(), self.options.clone()))
    }

    /// Submit `req`: the one door of every request. Stages 1–3 of the funnel run here,
    /// then admission under the service's lock; the [`Ticket`] resolves once (admitted,
    /// queued, or refused with the typed reason), then streams tokens and one result.
    /// Dropping or cancelling the ticket releases its KV reservation.
    pub fn submit(&self, req: GenerateRequest, options: SubmitOptions) -> Ticket {
        self.service().submit(req, options)
    }

    /// Stop admitting: new requests and queued ones are refused with
    /// [`EngineError::ShuttingDown`]; running ones finish.
    pub fn drain(&self) {
        if let Some(s) = self.service.get() {
            s.drain();
        }
    }

    /// The service's figures now (seconds per batch step, decode tokens and seconds so
    /// far); the default before the first request.
    pub fn service_stats(&self) -> ServiceStats {
        self.service.get().map(Service::stats).unwrap_or_default()
    }

    /// `Retry-After` for a request of `demand` that found the queue full: whole seconds (at
    /// least 1) until the scheduler would admit it if the batch keeps its pace.
    pub fn retry_after_secs(&self, demand: &Demand) -> u64 {
        self.service.get().map_or(1, |s| s.retry_after(demand))
    }

    /// Serve `req` without callbacks; see [`Engine::generate_with`].
    ///
    /// # Errors
    /// As [`Engine::generate_with`].
    pub fn generate(&self, req: &GenerateRequest) -> Result<GenerateResult, EngineError> {
        self.submit(req.clone(), SubmitOptions::default()).wait()
    }

    /// As [`Engine::generate_stream`] with a callback that sees token ids only.
    ///
    /// # Errors
    /// As [`Engine::generate_stream`].
    pub fn generate_with(
        &self,
        req: &GenerateRequest,
        on_admitted: &mut dyn FnMut(Route),
        on_token: &mut dyn FnMut(usize, u32) -> Flow,
    ) -> Result<GenerateResult, EngineError> {
        self.generate_stream(req, on_admitted, &mut |row, piece| on_token(row, piece.id))
    }

    /// Serve `req` through the service and wait for it, in lockstep: `on_admitted(route)`
    /// is called exactly once, after the scheduler admitted the request and before any
    /// component runs, and never for a refused request; `on_token(row, piece)` is called
    /// for every generated token with the text it releases, before the row's next token is
    /// generated, and may stop that row. A request that fits the budget only later waits
    /// in the service's queue.
    ///
    /// # Errors
    /// Before admission: [`EngineError::BadRequest`], [`EngineError::Request`],
    /// [`EngineError::Tokenizer`], then [`EngineError::Refused`] or
    /// [`EngineError::QueueFull`] (nothing ran). After admission:
    /// [`EngineError::DecodeCore`], [`EngineError::Interpreter`] (the reservation is released
    /// either way), [`EngineError::Release`].
    pub fn generate_stream(
        &self,
        req: &GenerateRequest,
        on_admitted: &mut dyn FnMut(Route),
        on_token: &mut dyn FnMut(usize, Piece<'_>) -> Flow,
    ) -> Result<GenerateResult, EngineError> {
        let ticket = self.submit(req.clone(), SubmitOptions { lockstep: true });
        ticket.follow(on_admitted, on_token)
    }

    /// Stages 1–3 of the funnel without admitting: what the request would ask the
    /// scheduler for.
    ///
    /// # Errors
    /// The funnel's errors before admission.
    pub fn demand(&self, req: &GenerateRequest) -> Result<Demand, EngineError> {
        Ok(self.core.plan(req)?.demand)
    }
}
