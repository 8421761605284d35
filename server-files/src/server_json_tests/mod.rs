//! The official registry's server.json: the 22 real files of
//! `../shared/registry-server-json` (read from there, never copied in),
//! and files written here for every shape and variation they show.

use std::path::PathBuf;

use serde_json::{json, Value};
use spear_proto::v1::{ServerSpec, Transport};

use super::{parse_file, parse_file_with, Companion, Problem};

mod packages;

const SCHEMA_1211: &str =
    "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json";

/// `docker run` as a node runs every image of a registry file, before its
/// variables, arguments and image.
const HARDENED_RUN: [&str; 11] = [
    "run",
    "-i",
    "--rm",
    "--cap-drop=ALL",
    "--security-opt=no-new-privileges",
    "--read-only",
    "--tmpfs=/tmp",
    "--user=65534:65534",
    "--memory=1024m",
    "--pids-limit=128",
    "--network=none",
];

fn parse(value: &Value) -> Result<ServerSpec, Vec<Problem>> {
    parse_file("server.json", value.to_string().as_bytes()).map(|mut specs| specs.remove(0))
}

fn with_companion(value: &Value, companion: &Value) -> Result<ServerSpec, Vec<Problem>> {
    let settings = companion.to_string();
    parse_file_with(
        "x.json",
        value.to_string().as_bytes(),
        Some(Companion {
            name: "x.spear.json",
            bytes: settings.as_bytes(),
        }),
    )
    .map(|mut specs| specs.remove(0))
}

fn refused(value: &Value) -> String {
    match parse(value) {
        Ok(spec) => panic!("accepted: {spec:?}"),
        Err(problems) => problems
            .iter()
            .map(|p| format!("{} {}", p.path, p.message))
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

fn npm(version: &str) -> Value {
    json!({"$schema": SCHEMA_1211, "name": "io.github.example/weather-mcp", "version": "1.0.0",
           "description": "Weather.",
           "packages": [{"registryType": "npm", "identifier": "@example/weather-mcp", "version": version,
                         "transport": {"type": "stdio"}}]})
}

/// Where the real files are: `SPEAR_REGISTRY_SAMPLES`, else the shared
/// folder beside the clone.
fn samples() -> Option<PathBuf> {
    let dir = std::env::var("SPEAR_REGISTRY_SAMPLES")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/registry-server-json")
        });
    dir.is_dir().then_some(dir)
}

/// What each real file gives, as docs/server-files.md says: the package
/// that runs, or the words the refusal must hold.
const EXPECTED: &[(&str, Result<&str, &str>)] = &[
    (
        "0-draft__mcp-opa.json",
        Ok("oci ghcr.io/kanywst/mcp-opa-authz:0.2.1"),
    ),
    ("06ketan__medium-ops.json", Ok("pypi medium-ops==0.1.2")),
    ("0pstech__vdb-mcp.json", Ok("pypi vdb-mcp==0.1.1")),
    (
        "0xChron__polymarket-mcp.json",
        Err("its transport is streamable-http"),
    ),
    (
        "123Ergo__unphurl-mcp.json",
        Ok("npm @unphurl/mcp-server@0.2.3"),
    ),
    (
        "Eagor1968__WeatherMcpServer.json",
        Err("is not a published server.json schema this SMS keeps"),
    ),
    ("Toastyice__JellyfinMCP.json", Err("it is a NuGet package")),
    (
        "domdomegg__airtable-mcp-server.json",
        Err("{{...}} placeholder"),
    ),
    (
        "domdomegg__starling-bank-mcp.json",
        Err("{{...}} placeholder"),
    ),
    ("github__github-mcp-server.json", Err("${...} placeholder")),
    (
        "hashicorp__terraform-mcp-server.json",
        Ok("oci docker.io/hashicorp/terraform-mcp-server:0.3.2"),
    ),
    (
        "iunera__druid-mcp-server.json",
        Err("does not follow the 2025-09-16 server.json schema"),
    ),
    ("klarlabs-studio__coverctl.json", Err("MCP bundle (mcpb)")),
    ("microsoft__mcp.json", Err("<<...>> placeholder")),
    (
        "mongodb-js__mongodb-mcp-server.json",
        Ok("npm mongodb-mcp-server@1.7.0"),
    ),
    (
        "neondatabase__mcp-server-neon.json",
        Ok("remote https://mcp.neon.tech/mcp"),
    ),
    (
        "nhilbert__merkraum.json",
        Err("its transport is streamable-http"),
    ),
    (
        "palewire__datawrapper-mcp.json",
        Err("does not follow the 2025-12-11 server.json schema"),
    ),
    ("prisma__mcp.json", Err("header Authorization is required")),
    ("redis__mcp-redis.json", Ok("pypi redis-mcp-server==0.3.6")),
    (
        "upstash__context7.json",
        Ok("npm @upstash/context7-mcp@1.0.26"),
    ),
];

#[test]
#[allow(clippy::disallowed_macros)] // the harness's own line, no peer text in it
fn the_real_files_validate_or_are_refused_with_a_sentence() {
    let Some(dir) = samples() else {
        eprintln!("skipped: no ../shared/registry-server-json beside the clone (set SPEAR_REGISTRY_SAMPLES)");
        return;
    };
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".json") {
            continue;
        }
        seen += 1;
        let bytes = std::fs::read(&path).unwrap();
        let got = parse_file(&name, &bytes);
        let expected = EXPECTED
            .iter()
            .find(|(file, _)| *file == name)
            .unwrap_or_else(|| {
                panic!("{name}: no expectation; add it to EXPECTED and docs/server-files.md")
            })
            .1;
        match (got, expected) {
            (Ok(specs), Ok(package)) => {
                let origin = specs[0].registry.clone().unwrap_or_default();
                assert_eq!(origin.package, package, "{name}: {:?}", specs[0]);
                assert!(!origin.name.is_empty(), "{name}");
                assert_eq!(
                    specs[0].pin, "approve",
                    "{name}: a registry server's tools wait for approval"
                );
            }
            (Err(problems), Err(words)) => {
                let all: Vec<String> = problems.iter().map(|p| p.message.clone()).collect();
                assert!(all.iter().any(|m| m.contains(words)), "{name}: {all:?}");
                for problem in &problems {
                    assert_eq!(problem.file, name);
                    assert!(
                        problem.message.len() < 600,
                        "{name}: one sentence, not an essay: {}",
                        problem.message
                    );
                }
            }
            (got, expected) => panic!("{name}: expected {expected:?}, got {got:?}"),
        }
    }
    assert_eq!(seen, EXPECTED.len(), "every real file read");
}

#[test]
fn npm_pypi_and_oci_packages_become_argv_without_a_shell() {
    let spec = parse(&npm("2.1.0")).unwrap();
    assert_eq!(spec.id, "weather-mcp");
    assert_eq!(spec.transport, Transport::Stdio as i32);
    assert_eq!(spec.command, "npx");
    assert_eq!(spec.args, ["-y", "@example/weather-mcp@2.1.0"]);
    assert_eq!(spec.description, "Weather.");

    let pypi = json!({"$schema": SCHEMA_1211, "name": "io.github.example/py", "version": "1", "description": "Py.",
        "packages": [{"registryType": "pypi", "identifier": "py-mcp", "version": "0.3.0",
            "runtimeArguments": [{"type": "named", "name": "--quiet", "value": "true"}],
            "packageArguments": [
                {"type": "positional", "value": "serve"},
                {"type": "named", "name": "--root", "value": "{root}",
                 "variables": {"root": {"default": "/srv/a; $(touch /tmp/pwned) ${HOME}"}}},
                {"type": "named", "name": "--verbose", "description": "documented only"}
            ],
            "transport": {"type": "stdio"}}]});
    let spec = parse(&pypi).unwrap();
    assert_eq!(spec.command, "uvx");
    // Each value one argv entry, as written; a ${ in the file is no reference.
    assert_eq!(
        spec.args,
        [
            "--quiet",
            "py-mcp==0.3.0",
            "serve",
            "--root",
            "/srv/a; $(touch /tmp/pwned) $${HOME}"
        ]
    );

    let oci = json!({"$schema": SCHEMA_1211, "name": "io.github.example/img", "version": "1", "description": "Img.",
        "packages": [{"registryType": "oci", "identifier": "ghcr.io/example/img", "version": "1.4.2",
            "runtimeArguments": [{"type": "named", "name": "--init", "value": "true"}],
            "environmentVariables": [{"name": "API_KEY", "isSecret": true, "isRequired": true}],
            "transport": {"type": "stdio"}}]});
    let spec = parse(&oci).unwrap();
    assert_eq!(spec.command, "docker");
    // Hardened: no capabilities, no privilege gain, a read-only root, a
    // non-root user, bounds, and no network without declared destinations.
    assert_eq!(
        spec.args,
        [
            &HARDENED_RUN[..],
            &["-e", "API_KEY", "--init", "ghcr.io/example/img:1.4.2"]
        ]
        .concat()
    );
    // The secret is a reference the node resolves; SMS never holds it.
    assert_eq!(
        spec.env.get("API_KEY").map(String::as_str),
        Some("${API_KEY}")
    );
}

#[test]
fn versions_must_be_exact() {
    for (version, words) in [
        ("latest", "'latest'"),
        ("^1.2.0", "a range"),
        ("~1.2", "a range"),
        (">=1.0.0", "a range"),
        ("1.x", "a range"),
        ("", "is empty"),
        ("{{VERSION}}", "placeholder"),
        ("${VERSION}", "placeholder"),
        ("<<Version>>", "placeholder"),
    ] {
        let text = refused(&npm(version));
        assert!(text.contains(words), "{version}: {text}");
        assert!(text.contains("pin one exact version"), "{version}: {text}");
    }
    let mut missing = npm("1.0.0");
    missing["packages"][0]
        .as_object_mut()
        .unwrap()
        .remove("version");
    assert!(refused(&missing).contains("is empty"));
    // An untagged image with neither a tag nor a version.
    let untagged = json!({"$schema": SCHEMA_1211, "name": "io.github.example/img", "version": "1",
        "packages": [{"registryType": "oci", "identifier": "example/img", "transport": {"type": "stdio"}}]});
    assert!(refused(&untagged).contains("is empty"));
    let latest_tag = json!({"$schema": SCHEMA_1211, "name": "io.github.example/img", "version": "1",
        "packages": [{"registryType": "oci", "identifier": "example/img:latest", "transport": {"type": "stdio"}}]});
    assert!(refused(&latest_tag).contains("'latest'"));
}

#[test]
fn the_older_generations_are_read_too() {
    // 2025-07-09: snake_case, no transport, `docker` as a type.
    let snake = json!({"$schema": "https://static.modelcontextprotocol.io/schemas/2025-07-09/server.schema.json",
        "name": "io.github.example/legacy", "version": "1.0.0", "description": "Legacy.",
        "packages": [{"registry_type": "docker", "identifier": "example/legacy", "version": "2.0.0",
            "transport": {"type": "stdio"},
            "runtime_arguments": [{"type": "named", "name": "-w", "value": "/data"}],
            "environment_variables": [{"name": "TOKEN", "is_secret": true}]}]});
    let spec = parse(&snake).unwrap();
    assert_eq!(spec.command, "docker");
    assert_eq!(
        spec.args,
        [
            &HARDENED_RUN[..],
            &["-e", "TOKEN", "-w", "/data", "example/legacy:2.0.0"]
        ]
        .concat()
    );
    assert_eq!(
        spec.registry.unwrap().package,
        "docker example/legacy:2.0.0"
    );

    // The pre-release draft: version_detail, registry_name and name.
    let draft = json!({"$schema": "https://modelcontextprotocol.io/schemas/draft/2025-07-09/server.json",
        "name": "io.github.example/draft", "version_detail": {"version": "0.9.0"},
        "packages": [{"registry_name": "npm", "name": "draft-mcp", "version": "0.9.0"}]});
    // No schema was ever published for it: nothing to hold it to.
    assert!(refused(&draft).contains("is not a published server.json schema"));
    let mut bare = draft.clone();
    bare.as_object_mut().unwrap().remove("$schema");
    assert!(refused(&bare).contains("declares no \"$schema\""));

    // mcpb without its digest, and a bundle at all: nodes do not unpack them.
    let mcpb = json!({"$schema": SCHEMA_1211, "name": "io.github.example/bundle", "version": "1", "description": "B.",
        "packages": [{"registryType": "mcpb", "identifier": "https://example.com/b.mcpb", "version": "1.0.0"}]});
    assert!(refused(&mcpb).contains("MCP bundle (mcpb)"));
}

#[test]
fn remotes_fill_url_variables_and_take_headers_from_the_companion() {
    let file = json!({"$schema": SCHEMA_1211, "name": "io.github.example/hosted", "version": "1", "description": "Hosted.",
    "remotes": [{"type": "streamable-http", "url": "https://{region}.example.com/mcp",
        "variables": {"region": {"default": "eu", "choices": ["eu", "us"]}},
        "headers": [
            {"name": "Authorization", "isRequired": true, "isSecret": true},
            {"name": "X-Mode", "default": "read-only"}
        ]}]});
    // Without the companion the required secret header has no value.
    assert!(refused(&file).contains("header Authorization is required"));
    let spec = with_companion(
        &file,
        &json!({"id": "hosted", "variables": {"region": "us"},
                "headers": {"Authorization": "Bearer ${HOSTED_TOKEN}"},
                "allowed_tools": ["search_*"], "pin": "first-seen"}),
    )
    .unwrap();
    assert_eq!(spec.transport, Transport::StreamableHttp as i32);
    assert_eq!(spec.url, "https://us.example.com/mcp");
    assert_eq!(
        spec.headers.get("Authorization").map(String::as_str),
        Some("Bearer ${HOSTED_TOKEN}")
    );
    assert_eq!(
        spec.headers.get("X-Mode").map(String::as_str),
        Some("read-only")
    );
    assert_eq!(spec.pin, "first-seen");
    assert_eq!(spec.allowed_tools.unwrap().patterns, ["search_*"]);
}

#[test]
fn a_companion_is_checked_like_a_server_file() {
    let bad = with_companion(&npm("1.0.0"), &json!({"allowed_tool": ["x"]})).unwrap_err();
    assert!(
        bad.iter()
            .any(|p| p.message.contains("did you mean 'allowed_tools'")),
        "{bad:?}"
    );
    let pin = with_companion(&npm("1.0.0"), &json!({"pin": "sometimes"})).unwrap_err();
    assert!(pin.iter().any(|p| p.path.contains("pin")), "{pin:?}");
    // A companion beside a file of another shape is refused, naming both.
    let other = parse_file_with(
        "fs.json",
        br#"{"mcpServers": {"fs": {"command": "x"}}}"#,
        Some(Companion {
            name: "fs.spear.json",
            bytes: b"{}",
        }),
    )
    .unwrap_err();
    assert!(
        other[0]
            .message
            .contains("only an official registry server.json takes a companion"),
        "{other:?}"
    );
}
