//! The funnel's first stages (validate, encode, count) and the interpreter's run, on what the engine serves: its model, package, tokenizer, KV geometry, scheduler and sessions.

// EngineError carries the typed errors of the model, package and interpreter by value;
// boxing them is a follow-up (see the report).
#![allow(clippy::result_large_err, clippy::large_enum_variant)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::batch::{Finish, Piece};
use crate::flow::Flow;
use crate::kernels::sample::SamplerConfig;
use crate::kv::KvDtype;
use crate::model::Model;
use crate::request::{BadRequest, Completion, EngineError, GenerateRequest, Prompt, Route};
use crate::scheduler::{Demand, KvGeometry, Scheduler};
use crate::tokenizer::{StreamState, Tokenizer};
use crate::workflow::{BoundRequest, EventLog, Interpreter, LoopExit, Package, Request, Session};

/// The fused decode core: the Llama model and the names its components log under.
#[derive(Debug)]
pub(crate) struct DecodeCore {
    pub(crate) model: Arc<Model>,
    /// Component names for `token_embedding`, `llama_decoder`, `lm_head`.
    pub(crate) names: [String; 3],
}

/// What a session keeps between turns (tokens only; each turn re-prefills).
#[derive(Debug, Clone)]
pub(crate) struct SessionState {
    route: Route,
    /// Decode-core route: every token of earlier turns.
    pub(crate) history: Vec<u32>,
    /// Interpreter route: the package's session cells.
    cells: Session,
}

/// A request after validation: its route, its bound package request, its session.
pub(crate) struct Plan {
    pub(crate) route: Route,
    bound: Option<BoundRequest>,
    pub(crate) session: Option<(String, SessionState)>,
    pub(crate) carried: usize,
}

impl Plan {
    pub(crate) fn extra_positions(&self) -> usize {
        self.bound.as_ref().map_or(0, BoundRequest::extra_positions)
    }
}

/// Stage 3: the KV positions of a validated, encoded request, before any component
/// runs: prompt tokens per row, every row, the session's carried prefix, and the
/// positions its application inputs contribute (from their declared shapes).
fn count(plan: &Plan, rows: &[Vec<u32>], req: &GenerateRequest) -> Demand {
    Demand::prompt(rows[0].len(), req.max_new_tokens)
        .with_rows(rows.len())
        .with_carried_prefix(plan.carried)
        .with_extra_positions(plan.extra_positions())
}

/// What the engine serves: the model, its package, tokenizer and KV geometry, the
/// scheduler that prices and admits requests, and the sessions' carried state. The
/// service's worker ([`crate::service`]) and the front ends' submitting threads share it.
pub(crate) struct Core {
    pub(crate) core: Option<DecodeCore>,
    pub(crate) package: Option<Package>,
    pub(crate) tokenizer: Option<Arc<Tokenizer>>,
    pub(crate) geometry: Option<KvGeometry>,
    pub(crate) scheduler: Scheduler,
    pub(crate) sessions: Mutex<HashMap<String, SessionState>>,
    pub(crate) kv_dtype: KvDtype,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core")
            .field("decode_core", &self.core.is_some())
            .field("package", &self.package.as_ref().map(Package::name))
            .field("geometry", &self.geometry)
            .field("usage", &self.scheduler.usage())
            .finish_non_exhaustive()
    }
}

pub(crate) fn model_geometry(model: &Model, dtype: KvDtype) -> KvGeometry {
    let c = model.config();
    KvGeometry {
        n_layers: c.n_layers,
        n_kv_heads: c.n_kv_heads,
        head_dim: c.head_dim,
        elem_bytes: dtype.size(),
    }
}

/// A request after stages 1–3: its plan, token rows and demand, ready to admit.
pub(crate) struct Planned {
    pub(crate) plan: Plan,
    pub(crate) rows: Vec<Vec<u32>>,
    pub(crate) demand: Demand,
    /// The cached prefix pages it starts with, pinned while it lives (decode core, one row).
    pub(crate) lease: Option<crate::prefix::PrefixLease>,
}

impl Core {
    pub(crate) fn sessions_lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, SessionState>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The scheduler every request is admitted by.
    pub(crate) fn scheduler(&self) -> &Scheduler {
        &self.scheduler
    }

    /// The decode core's model and component names, when the engine has one.
    pub(crate) fn decode_model(&self) -> Option<(&Arc<Model>, &[String; 3])> {
        self.core.as_ref().map(|c| (&c.model, &c.names))
    }

    /// The tokenizer, shared.
    pub(crate) fn tokenizer_arc(&self) -> Option<&Arc<Tokenizer>> {
        self.tokenizer.as_ref()
    }

    /// Element type of the KV caches.
    pub(crate) fn kv_dtype(&self) -> KvDtype {
        self.kv_dtype
    }

    /// Stages 1–3: validate, encode, count.
    ///
    /// # Errors
    /// The funnel's errors before admission.
    pub(crate) fn plan(&self, req: &GenerateRequest) -> Result<Planned, EngineError> {
        // 1. validate
        let plan = self.validate(req)?;
        // 2. encode
        let rows = self.encode(&req.prompt)?;
        // 3. count
        let demand = count(&plan, &rows, req);
        if plan.route == Route::DecodeCore
            && let Some((model, _)) = self.decode_model()
        {
            let context = model.config().context_len;
            let positions = plan.carried + rows[0].len() + req.max_new_tokens;
            if positions > context {
                return Err(BadRequest::ContextOverflow {
                    prompt_tokens: plan.carried + rows[0].len(),
                    max_new_tokens: req.max_new_tokens,
                    context,
                }
                .into());
            }
        }
        Ok(Planned {
            plan,
            rows,
            demand,
            lease: None,
        })
    }

    /// Keep a session's state after a turn ran.
    pub(crate) fn keep_session(&self, id: String, state: SessionState) {
        self.sessions_lock().insert(id, state);
    }

    /// Stage 1: the request's shape, its package declarations, its session and route.
    pub(crate) fn validate(&self, req: &GenerateRequest) -> Result<Plan, EngineError> {
        let vocab = self
            .core
            .as_ref()
            .map(|c| c.model.config().vocab)
            .or_else(|| self.tokenizer.as_ref().map(|t| t.vocab_size()));
        let checked = match vocab {
            Some(v) => req.sampling.validate_for_vocab(v),
            None => req.sampling.validate(),
        };
        checked.map_err(|e| BadRequest::Sampling {
            field: e.field().unwrap_or("sampling"),
            message: e.to_string(),
        })?;
        match &req.prompt {
            Prompt::Text(_) if self.tokenizer.is_none() => {
                return Err(BadRequest::NoTokenizer.into());
            }
            Prompt::Text(_) => {}
            Prompt::Tokens(t) if t.is_empty() => {
                return Err(BadRequest::EmptyPrompt { row: 0 }.into());
            }
            Prompt::Tokens(_) => {}
            Prompt::Rows(rows) => {
                let first = rows.first().ok_or(BadRequest::NoRows)?.len();
                if let Some((row, r)) = rows.iter().enumerate().find(|(_, r)| r.len() != first) {
                    return Err(BadRequest::UnequalRows {
                        first,
                        row,
                        len: r.len(),
                    }
                    .into());
                }
                if first == 0 {
                    return Err(BadRequest::EmptyPrompt { row: 0 }.into());
                }
                if let Some(s) = &req.session_id {
                    return Err(BadRequest::RowsInSession { session: s.clone() }.into());
                }
            }
        }
        let needs_interpreter = !req.inputs.is_empty() || !req.overrides.is_empty();
        let bound = match &self.package {
            Some(p) => Some(p.validate_request(&Request {
                prompt_tokens: Vec::new(),
                max_new_tokens: req.max_new_tokens,
                temperature: req.sampling.temperature,
                seed: req.sampling.seed,
                session_id: req.session_id.clone(),
                inputs: req.inputs.clone(),
                overrides: req.overrides.clone(),
            })?),
            None if needs_interpreter => {
                return Err(BadRequest::NoPackage {
                    inputs: req.inputs.keys().cloned().collect(),
                    overrides: req.overrides.keys().cloned().collect(),
                }
                .into());
            }
            None => None,
        };
        let route = if self.core.is_some() && !needs_interpreter {
            Route::DecodeCore
        } else {
            Route::Interpreter
        };
        if route == Route::Interpreter {
            let d = SamplerConfig::default();
            let unsupported = [
                ("stop", !req.stop.is_empty()),
                ("stop_at_eog", !req.stop_at_eog),
                ("top_k", req.sampling.top_k != d.top_k),
                ("top_p", req.sampling.top_p != d.top_p),
                ("min_p", req.sampling.min_p != d.min_p),
                (
                    "frequency_penalty",
                    req.sampling.frequency_penalty != d.frequency_penalty,
                ),
                (
                    "presence_penalty",
                    req.sampling.presence_penalty != d.presence_penalty,
                ),
                ("logit_bias", !req.sampling.logit_bias.is_empty()),
                ("constraint", req.constraint.is_some()),
                ("logprobs", req.logprobs.is_some()),
            ];
            if let Some((field, _)) = unsupported.iter().find(|(_, set)| *set) {
                return Err(BadRequest::InterpreterUnsupported { field }.into());
            }
        }
        let session = match &req.session_id {
            None => None,
            Some(id) => {
                let state = self.sessions_lock().get(id).cloned();
                let state = match state {
                    Some(s) if s.route != route => {
                        return Err(BadRequest::SessionRoute {
                            session: id.clone(),
                            started: s.route,
                            now: route,
                        }
                        .into());
                    }
                    Some(s) => s,
                    None => SessionState {
                        route,
                        history: Vec::new(),
                        cells: Session::new(Some(id.clone())),
                    },
                };
                Some((id.clone(), state))
            }
        };
        let carried = match (&session, route, &self.package) {
            (None, _, _) => 0,
            (Some((_, s)), Route::DecodeCore, _) => s.history.len(),
            (Some((_, s)), Route::Interpreter, Some(p)) => p.carried_tokens(&s.cells),
            (Some(_), Route::Interpreter, None) => 0,
        };
        Ok(Plan {
            route,
            bound,
            session,
            carried,
        })
    }

    /// Stage 2: token rows of the prompt.
    pub(crate) fn encode(&self, prompt: &Prompt) -> Result<Vec<Vec<u32>>, EngineError> {
        match prompt {
            Prompt::Text(text) => {
                let tok = self.tokenizer.as_ref().ok_or(BadRequest::NoTokenizer)?;
                let ids = tok.encode(text)?;
                if ids.is_empty() {
                    return Err(BadRequest::EmptyPrompt { row: 0 }.into());
                }
                Ok(vec![ids])
            }
            Prompt::Tokens(ids) => Ok(vec![ids.clone()]),
            Prompt::Rows(rows) => Ok(rows.clone()),
        }
    }

    /// Stage 7 on the interpreter: run every row, each token to `on_token`; on success the
    /// session keeps its cells. Returns the completions, the events, and row 0's prefill
    /// and decode seconds.
    #[allow(clippy::type_complexity)]
    pub(crate) fn run_interpreter(
        &self,
        plan: &mut Plan,
        rows: &[Vec<u32>],
        max_new_tokens: usize,
        capped: bool,
        on_token: &mut dyn FnMut(usize, Piece<'_>) -> Flow,
    ) -> Result<(Vec<Completion>, EventLog, (f64, f64)), EngineError> {
        let mut events = EventLog::default();
        let mut completions = Vec::with_capacity(rows.len());
        let t0 = std::time::Instant::now();
        let mut timing = (0.0, 0.0);
        let (Some(package), Some(bound)) = (&self.package, &mut plan.bound) else {
            // Validation routes to the interpreter only an engine serving a package.
            return Err(BadRequest::NoPackage {
                inputs: Vec::new(),
                overrides: Vec::new(),
            }
            .into());
        };
        {
            bound.clamp_max_new_tokens(max_new_tokens);
            let interpreter = Interpreter::new(package);
            for (r, row) in rows.iter().enumerate() {
                bound.prompt_tokens = row.clone();
                let mut scratch = Session::new(None);
                let session = match &mut plan.session {
                    Some((_, s)) => &mut s.cells,
                    None => &mut scratch,
                };
                let mut text = StreamState::default();
                let mut first = None;
                let tok = self.tokenizer.as_deref();
                let out = interpreter
                    .run(bound, session, &mut |t| {
                        first.get_or_insert_with(std::time::Instant::now);
                        let piece = tok
                            .filter(|k| !k.is_eog(t))
                            .and_then(|k| text.push(k, t).ok().flatten())
                            .unwrap_or_default();
                        on_token(
                            r,
                            Piece {
                                id: t,
                                text: &piece,
                                logprobs: None,
                            },
                        )
                    })
                    .map_err(EngineError::Interpreter)?;
                let finish = match (out.events.loop_exits().last(), out.tokens.last()) {
                    (Some(LoopExit::Condition), Some(&token)) => Finish::EndOfGeneration { token },
                    (Some(LoopExit::Callback), _) => Finish::Callback,
                    _ if capped => Finish::BudgetCap,
                    _ => Finish::MaxTokens,
                };
                if r == 0 {
                    timing = match first {
                        Some(f) => ((f - t0).as_secs_f64(), f.elapsed().as_secs_f64()),
                        None => (t0.elapsed().as_secs_f64(), 0.0),
                    };
                }
                events.events.extend(out.events.events);
                let text = match tok {
                    Some(t) => {
                        let shown: Vec<u32> = out
                            .tokens
                            .iter()
                            .copied()
                            .filter(|&id| !t.is_eog(id))
                            .collect();
                        Some(t.decode_continuation(&shown)?)
                    }
                    None => None,
                };
                completions.push(Completion {
                    tokens: out.tokens,
                    text,
                    finish,
                });
            }
        }
        if let Some((id, state)) = plan.session.take() {
            self.keep_session(id, state);
        }
        Ok((completions, events, timing))
    }
}
