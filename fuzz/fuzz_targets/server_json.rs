//! The official registry's server.json, built from fuzz input in both
//! field generations: it gives servers or problems, never a panic; a
//! server it gives runs `npx`, `uvx` or `docker` (or is a remote), is held
//! for approval, pins an exact version, and none of the file's text ever
//! becomes a `${NAME}` reference the node would resolve: only the
//! environment variables it declares are references.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map, Value};
use spear_proto::refs::{pieces, Piece};

#[derive(Debug, Arbitrary)]
struct Argument {
    positional: bool,
    name: String,
    value: Option<String>,
    variable: Option<(String, Option<String>, bool)>,
}

#[derive(Debug, Arbitrary)]
struct Input {
    snake: bool,
    kind: u8,
    identifier: String,
    version: String,
    stdio: bool,
    arguments: Vec<Argument>,
    env: Vec<(String, bool, bool, Option<String>)>,
    remote: Option<(String, Vec<(String, Option<String>, bool)>)>,
}

const KINDS: &[&str] = &["npm", "pypi", "oci", "docker", "mcpb", "nuget", "other"];

fn key(snake: bool, camel: &'static str, snake_name: &'static str) -> &'static str {
    if snake {
        snake_name
    } else {
        camel
    }
}

fn build(input: &Input) -> Value {
    let s = input.snake;
    let arguments: Vec<Value> = input
        .arguments
        .iter()
        .map(|a| {
            let mut arg = Map::new();
            arg.insert("type".into(), json!(if a.positional { "positional" } else { "named" }));
            arg.insert("name".into(), json!(a.name));
            if let Some(value) = &a.value {
                arg.insert("value".into(), json!(value));
            }
            if let Some((name, default, secret)) = &a.variable {
                let mut def = Map::new();
                if let Some(default) = default {
                    def.insert("default".into(), json!(default));
                }
                def.insert(key(s, "isSecret", "is_secret").into(), json!(secret));
                arg.insert("variables".into(), json!({ name.clone(): def }));
            }
            Value::Object(arg)
        })
        .collect();
    let env: Vec<Value> = input
        .env
        .iter()
        .map(|(name, required, secret, default)| {
            json!({"name": name, key(s, "isRequired", "is_required"): required,
                   key(s, "isSecret", "is_secret"): secret, "default": default})
        })
        .collect();
    let mut package = Map::new();
    package.insert(
        key(s, "registryType", "registry_type").into(),
        json!(KINDS[input.kind as usize % KINDS.len()]),
    );
    package.insert("identifier".into(), json!(input.identifier));
    package.insert("version".into(), json!(input.version));
    if input.stdio {
        package.insert("transport".into(), json!({"type": "stdio"}));
    }
    package.insert(key(s, "packageArguments", "package_arguments").into(), json!(arguments));
    package.insert(key(s, "environmentVariables", "environment_variables").into(), json!(env));
    // Each generation under the schema that describes it, so files get
    // past the schema check and reach what builds argv.
    let schema = if s { "2025-07-09" } else { "2025-12-11" };
    let mut root = json!({
        "$schema": format!("https://static.modelcontextprotocol.io/schemas/{schema}/server.schema.json"),
        "name": "io.github.fuzz/server", "version": "1.0.0", "description": "Fuzzed.",
        "packages": [package],
    });
    if let Some((url, headers)) = &input.remote {
        let headers: Vec<Value> = headers
            .iter()
            .map(|(name, value, required)| json!({"name": name, "value": value, "isRequired": required}))
            .collect();
        root["remotes"] = json!([{"type": "streamable-http", "url": url, "headers": headers}]);
    }
    root
}

fn no_reference(text: &str) -> bool {
    pieces(text).all(|piece| !matches!(piece, Ok(Piece::Ref { .. })))
}

fuzz_target!(|input: Input| {
    let bytes = build(&input).to_string();
    let Ok(specs) = spear_sms::registry::parse_file("f.json", bytes.as_bytes()) else {
        return;
    };
    for spec in specs {
        assert!(spec.registry.is_some());
        assert_eq!(spec.pin, "approve", "held for approval without a companion");
        assert!(
            matches!(spec.command.as_str(), "npx" | "uvx" | "docker") || !spec.url.is_empty(),
            "runs something else: {spec:?}"
        );
        assert!(!input.version.eq_ignore_ascii_case("latest") || !spec.url.is_empty() || spec.command == "docker");
        for text in spec.args.iter().chain([&spec.command, &spec.url]).chain(spec.headers.values()) {
            assert!(no_reference(text), "the file's text became a reference: {text:?}");
        }
        for (name, value) in &spec.env {
            // A declared variable is a reference to itself, or the file's literal default.
            assert!(no_reference(value) || value == &format!("${{{name}}}"), "{name}={value}");
        }
    }
});
