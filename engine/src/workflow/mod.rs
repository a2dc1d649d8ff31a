//! Declared-workflow packages: the manifest, its load-time validation, request binding, and the interpreter that runs it.
//!
//! A package is a directory with `package.json` (see [`manifest`]) plus a GGUF weights
//! file and optionally a `tokenizer.json`. The flow a runtime follows keeps validation
//! apart from execution:
//!
//! 1. [`Package::load`] parses and validates the manifest (every reference resolves,
//!    types and ranks agree, loops are bounded);
//! 2. [`Package::validate_request`] checks what a request brings and returns a
//!    [`BoundRequest`] whose KV positions ([`BoundRequest::extra_positions`],
//!    [`Package::carried_tokens`]) the scheduler counts before anything runs;
//! 3. after admission, [`Interpreter::run`] executes the steps and returns the emitted
//!    outputs and the [`EventLog`].

pub mod error;
pub mod events;
pub mod fixtures;
pub mod graph;
pub mod interpreter;
pub mod manifest;
pub mod model_blocks;
pub mod native;
pub mod ops;
pub mod request;
pub mod schema;
pub mod validate;
pub mod value;
pub mod weights;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use crate::flow::Flow;
pub use error::{BoxError, PortMismatch, RequestError, RunError, ValidationError, WorkflowError};
pub use events::{Event, EventLog, LoopExit};
pub use interpreter::{Interpreter, Output, Session};
pub use manifest::{Manifest, SCHEMA_VERSION};
pub use native::{KvGeometry, KvState, MemWeights, NativeBlocks, Weights};
pub use request::{BoundRequest, Replacement, Request};
pub use value::{DType, KvHandle, Tensor, Value};

use graph::PreparedGraph;
pub use model_blocks::ModelBlocks;
pub use weights::GgufWeights;

use crate::gguf::GgufFile;
use crate::isa::Isa;
use crate::kernels::matmul::Cpu;
use crate::model::Model;
use manifest::{Component, Implementation, NativeKind, Role};

/// A validated package ready to bind requests.
pub struct Package {
    dir: Option<PathBuf>,
    manifest: Manifest,
    weights: Option<Arc<dyn Weights>>,
    native: Option<Arc<dyn NativeBlocks>>,
    graphs: BTreeMap<String, PreparedGraph>,
    file: Option<Arc<GgufFile>>,
    model: Option<Arc<Model>>,
}

impl fmt::Debug for Package {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Package")
            .field("dir", &self.dir)
            .field("name", &self.manifest.name)
            .field("native", &self.native.is_some())
            .finish()
    }
}

impl Package {
    /// Parse `package.json` text: `schema_version` is checked first, then the typed
    /// manifest (unknown fields rejected). `path` is only used in error messages.
    pub fn parse_manifest(text: &str, path: &Path) -> Result<Manifest, WorkflowError> {
        let raw: serde_json::Value =
            serde_json::from_str(text).map_err(|source| WorkflowError::Json {
                path: path.to_path_buf(),
                source,
            })?;
        if let Some(v) = raw
            .get("schema_version")
            .and_then(serde_json::Value::as_u64)
            && v != u64::from(SCHEMA_VERSION)
        {
            return Err(WorkflowError::SchemaVersion {
                path: path.to_path_buf(),
                found: u32::try_from(v).unwrap_or(u32::MAX),
                supported: SCHEMA_VERSION,
            });
        }
        let m: Manifest = serde_json::from_value(raw).map_err(|source| WorkflowError::Json {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(m)
    }

    /// Load a package directory: parse and validate `package.json`, open its GGUF weights
    /// (memory-mapped) and bind the native blocks to the decode core's [`Model`] on a
    /// CPU context with one thread per core and the best SIMD path.
    ///
    /// Errors: [`WorkflowError::Io`], [`WorkflowError::Json`],
    /// [`WorkflowError::SchemaVersion`], [`WorkflowError::Weights`] (naming the weights
    /// path), [`WorkflowError::Invalid`].
    pub fn load(dir: impl AsRef<Path>) -> Result<Package, WorkflowError> {
        Package::load_with_cpu(dir, Cpu::new(0, Isa::best()))
    }

    /// [`Package::load`] with the CPU context the native blocks run on.
    pub fn load_with_cpu(dir: impl AsRef<Path>, cpu: Cpu) -> Result<Package, WorkflowError> {
        let dir = dir.as_ref();
        let path = dir.join("package.json");
        let text = std::fs::read_to_string(&path).map_err(|source| WorkflowError::Io {
            path: path.clone(),
            source,
        })?;
        let m = Package::parse_manifest(&text, &path)?;
        let (mut weights, mut native, mut file, mut model) = (None, None, None, None);
        if let Some(w) = &m.weights {
            let wpath = dir.join(w);
            let werr = |source: BoxError| WorkflowError::Weights {
                package: m.name.clone(),
                path: wpath.clone(),
                source,
            };
            let f = Arc::new(GgufFile::open(&wpath).map_err(|e| werr(e.into()))?);
            let gw: Arc<dyn Weights> = Arc::new(GgufWeights::new(f.clone()).map_err(werr)?);
            weights = Some(gw);
            let has_native = m
                .components
                .iter()
                .any(|c| matches!(c.implementation, Implementation::Native(_)));
            if has_native {
                let mo = Arc::new(Model::from_file(f.clone(), cpu).map_err(|e| werr(e.into()))?);
                let blocks: Arc<dyn NativeBlocks> = Arc::new(ModelBlocks::from_model(mo.clone()));
                native = Some(blocks);
                model = Some(mo);
            }
            file = Some(f);
        }
        let mut p = Package::from_parts(m, weights, native)?;
        p.dir = Some(dir.to_path_buf());
        p.file = file;
        p.model = model;
        Ok(p)
    }

    /// Build a package from a manifest, its weights (tensor index and f32 loader for
    /// graphs) and its native blocks; validates everything.
    ///
    /// Errors: [`WorkflowError::Invalid`] naming the component, port, value or cell at
    /// fault.
    pub fn from_parts(
        manifest: Manifest,
        weights: Option<Arc<dyn Weights>>,
        native: Option<Arc<dyn NativeBlocks>>,
    ) -> Result<Package, WorkflowError> {
        let invalid = |source| WorkflowError::Invalid {
            package: manifest.name.clone(),
            source: Box::new(source),
        };
        validate::validate(&manifest, weights.as_deref().map(Weights::index)).map_err(invalid)?;
        let mut graphs = BTreeMap::new();
        for c in &manifest.components {
            match &c.implementation {
                Implementation::Graph(g) => {
                    let pg = PreparedGraph::new(c, g, weights.as_deref()).map_err(invalid)?;
                    graphs.insert(c.name.clone(), pg);
                }
                Implementation::Native(_) if native.is_none() => {
                    return Err(invalid(ValidationError::Component {
                        component: c.name.clone(),
                        reason: "is a native block, but no model is bound to the package".into(),
                    }));
                }
                Implementation::Native(_) => {}
            }
        }
        Ok(Package {
            dir: None,
            manifest,
            weights,
            native,
            graphs,
            file: None,
            model: None,
        })
    }

    /// The package directory, when loaded from one.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The opened weights file, when loaded with [`Package::load`] (e.g. for its
    /// tokenizer metadata).
    pub fn weights_file(&self) -> Option<&Arc<GgufFile>> {
        self.file.as_ref()
    }

    /// The decode core's model behind the native blocks, when loaded with
    /// [`Package::load`]: a runtime can run prompt-only requests on it directly.
    pub fn model(&self) -> Option<&Arc<Model>> {
        self.model.as_ref()
    }

    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The package name.
    pub fn name(&self) -> &str {
        &self.manifest.name
    }

    /// The bound native blocks, if any.
    pub fn native(&self) -> Option<&dyn NativeBlocks> {
        self.native.as_deref()
    }

    /// A component by name.
    pub fn component(&self, name: &str) -> Option<&Component> {
        self.manifest.components.iter().find(|c| c.name == name)
    }

    pub(crate) fn prepared_graph(&self, name: &str) -> Option<&PreparedGraph> {
        self.graphs.get(name)
    }

    /// Whether the package has a `llama_decoder` block (and so a KV geometry).
    pub fn has_decoder(&self) -> bool {
        self.manifest.components.iter().any(|c| {
            matches!(&c.implementation, Implementation::Native(n) if n.block == NativeKind::LlamaDecoder)
        })
    }

    /// KV geometry from the package's `llama_decoder` block; `None` without one.
    pub fn kv_geometry(&self) -> Option<KvGeometry> {
        if self.has_decoder() {
            self.native.as_ref().map(|n| n.kv_geometry())
        } else {
            None
        }
    }

    /// Bytes of KV cache per position (`None` without a `llama_decoder` block, or when
    /// the geometry is degenerate or overflows).
    pub fn bytes_per_token(&self) -> Option<u64> {
        self.kv_geometry().and_then(|g| g.bytes_per_token().ok())
    }

    /// KV positions the given application tensors contribute, from their declared
    /// shapes (also checks them like [`Package::validate_request`]).
    pub fn kv_positions(&self, inputs: &BTreeMap<String, Tensor>) -> Result<usize, RequestError> {
        request::bind_inputs(&self.manifest, inputs)
    }

    /// Tokens a session carries into its next turn (the length of the package's
    /// `prompt_continuation` cell; 0 without one or before the first turn).
    pub fn carried_tokens(&self, session: &Session) -> usize {
        interpreter::continuation_cell(&self.manifest.cells)
            .and_then(|c| session.cell(&c.name))
            .map_or(0, Tensor::len)
    }

    /// Check a request against the package's declarations, before admission.
    ///
    /// Errors: undeclared tensors (listing them), dtype/shape mismatches (expected and
    /// got), an override of an unknown or non-replaceable component (by name), a
    /// replacement with another contract, an invalid replacement graph, a session id
    /// without a declared `session_id` role.
    pub fn validate_request(&self, req: &Request) -> Result<BoundRequest, RequestError> {
        let extra_positions = request::bind_inputs(&self.manifest, &req.inputs)?;
        if req.session_id.is_some()
            && !self
                .manifest
                .inputs
                .request
                .iter()
                .any(|r| r.role == Role::SessionId)
        {
            return Err(RequestError::SessionUnsupported {
                package: self.manifest.name.clone(),
            });
        }
        let mut overrides = BTreeMap::new();
        for (name, rep) in &req.overrides {
            let c = self
                .component(name)
                .ok_or_else(|| RequestError::UnknownComponent {
                    component: name.clone(),
                })?;
            let Some(contract) = &c.replaceable else {
                return Err(RequestError::NotReplaceable {
                    component: name.clone(),
                });
            };
            if &rep.contract != contract {
                return Err(RequestError::ContractMismatch {
                    component: name.clone(),
                    expected: contract.clone(),
                    got: rep.contract.clone(),
                });
            }
            let invalid = |source| RequestError::InvalidReplacement {
                component: name.clone(),
                source: Box::new(source),
            };
            validate::validate_graph(c, &rep.graph, self.weights.as_deref().map(Weights::index))
                .map_err(invalid)?;
            let pg = PreparedGraph::new(c, &rep.graph, self.weights.as_deref()).map_err(invalid)?;
            overrides.insert(name.clone(), (contract.clone(), pg));
        }
        Ok(BoundRequest {
            prompt_tokens: req.prompt_tokens.clone(),
            max_new_tokens: req.max_new_tokens,
            temperature: req.temperature,
            seed: req.seed,
            session_id: req.session_id.clone(),
            inputs: req.inputs.clone(),
            overrides,
            extra_positions,
        })
    }
}
