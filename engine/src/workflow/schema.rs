//! The JSON Schema of `package.json`, generated from the manifest types with schemars and committed at `engine/schema/package.schema.json`.
//!
//! The test `workflow_schema` compares the committed file with [`schema_json`]; run it
//! with `GENAI_REGEN_SCHEMA=1 cargo test -p engine --test workflow workflow_schema::committed_schema` to
//! rewrite the file after changing the manifest types.

use super::manifest::Manifest;

/// Path of the committed schema, relative to the `engine` crate directory.
pub const SCHEMA_FILE: &str = "schema/package.schema.json";

/// Environment variable that makes the schema test rewrite the committed file.
pub const REGEN_ENV: &str = "GENAI_REGEN_SCHEMA";

/// The manifest's JSON Schema (draft 2020-12), pretty-printed with a trailing newline.
pub fn schema_json() -> String {
    let schema = schemars::schema_for!(Manifest);
    let mut s = serde_json::to_string_pretty(&schema).expect("a schema serializes");
    s.push('\n');
    s
}
