//! The committed JSON Schema of `package.json` agrees with the manifest types (regenerate with `GENAI_REGEN_SCHEMA=1`).

use std::path::Path;

use engine::workflow::schema::{REGEN_ENV, SCHEMA_FILE, schema_json};

#[test]
fn committed_schema_matches_manifest_types() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(SCHEMA_FILE);
    let generated = schema_json();
    if std::env::var_os(REGEN_ENV).is_some() {
        std::fs::write(&path, &generated).expect("write schema");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run with {REGEN_ENV}=1 to generate it",
            path.display()
        )
    });
    assert!(
        committed == generated,
        "{} is out of date with the manifest types; run `{REGEN_ENV}=1 cargo test -p engine --test workflow workflow_schema::committed_schema` and commit it",
        path.display()
    );
}

#[test]
fn schema_rejects_unknown_fields_and_names_the_version() {
    // Facts about the schema read from the committed text, not from the generator.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(SCHEMA_FILE);
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(schema["additionalProperties"], serde_json::json!(false));
    let required = schema["required"].as_array().unwrap();
    for key in ["schema_version", "name", "components", "outputs", "steps"] {
        assert!(
            required.contains(&serde_json::json!(key)),
            "{key} not required"
        );
    }
    let defs = schema["$defs"].as_object().unwrap();
    for def in ["Component", "Cell", "Step", "Op", "Loop", "AppInput"] {
        assert!(defs.contains_key(def), "schema lacks {def}");
    }
}
