//! Packages and their sandboxes in a server.json: runtime arguments that
//! would escape, identifiers and variables, what each package's schema
//! requires, and the sandbox a companion or native file declares.

use super::*;

fn package(registry: &str, identifier: &str, extra: Value) -> Value {
    let mut package = json!({"registryType": registry, "identifier": identifier, "version": "1.0.0",
                             "transport": {"type": "stdio"}});
    if let (Some(package), Value::Object(extra)) = (package.as_object_mut(), extra) {
        package.extend(extra);
    }
    json!({"$schema": SCHEMA_1211, "name": "io.github.example/x", "version": "1", "description": "X.",
           "packages": [package]})
}

fn named(name: &str, value: &str) -> Value {
    json!([{"type": "named", "name": name, "value": value}])
}

#[test]
fn runtime_arguments_that_escape_are_refused_by_name() {
    for (registry, flag) in [
        ("oci", "--privileged"),
        ("oci", "-v"),
        ("oci", "--mount"),
        ("oci", "--network"),
        ("oci", "--pid"),
        ("oci", "--cap-add"),
        ("oci", "--device"),
        ("oci", "--security-opt"),
        ("oci", "--user"),
        ("oci", "--entrypoint"),
        ("npm", "--node-options"),
        ("npm", "--call"),
        ("npm", "-p"),
        ("pypi", "--with"),
        ("pypi", "--index-url"),
        ("pypi", "--extra-index-url"),
        ("pypi", "--from"),
        ("pypi", "--python"),
    ] {
        let file = package(
            registry,
            "example-img",
            json!({"runtimeArguments": named(flag, "x")}),
        );
        let refused = refused(&file);
        assert!(refused.contains("packages[0]"), "{refused}");
        assert!(refused.contains(&format!("'{flag}'")), "{flag}: {refused}");
    }
    // The file is named in the problem.
    let problems = parse_file(
        "evil.json",
        package(
            "oci",
            "img",
            json!({"runtimeArguments": named("--privileged", "true")}),
        )
        .to_string()
        .as_bytes(),
    )
    .unwrap_err();
    assert_eq!(problems[0].file, "evil.json");
}

#[test]
fn identifiers_and_runtime_variables_are_checked() {
    for identifier in [
        "--eval=require('child_process')",
        "../../evil",
        "https://evil.example/x.tgz",
    ] {
        let refused = refused(&package("npm", identifier, json!({})));
        assert!(
            refused.contains("its identifier"),
            "{identifier}: {refused}"
        );
    }
    let env = json!({"environmentVariables": [{"name": "NODE_OPTIONS", "default": "--require /tmp/evil.js"}]});
    let refused = refused(&package("npm", "pkg", env.clone()));
    assert!(
        refused.contains("'NODE_OPTIONS' changes what the runtime loads"),
        "{refused}"
    );
    // The operator may set it, in the companion.
    let spec = with_companion(
        &package("npm", "pkg", env),
        &json!({"env": {"NODE_OPTIONS": "--max-old-space-size=256"}}),
    )
    .unwrap();
    assert_eq!(spec.env["NODE_OPTIONS"], "--max-old-space-size=256");
}

#[test]
fn a_package_missing_what_its_schema_requires_is_refused() {
    let mut file = package("oci", "ghcr.io/example/img", json!({}));
    if let Some(package) = file["packages"][0].as_object_mut() {
        package.remove("transport");
    }
    let problems = parse(&file).unwrap_err();
    assert_eq!(problems[0].path, "$.packages[0]", "{problems:?}");
    assert!(
        problems[0].message.contains(
            "does not follow the 2025-12-11 server.json schema the file declares: \"transport\" is a required property"
        ),
        "{problems:?}"
    );
    // The first published schema required it too.
    file["$schema"] =
        json!("https://static.modelcontextprotocol.io/schemas/2025-07-09/server.schema.json");
    assert!(refused(&file).contains("2025-07-09 server.json schema"));

    // What the registry would not publish is not run either, though what
    // runs is fine: a description over 100 characters, a second package
    // with version "latest". The value is not echoed.
    let mut long = package("npm", "pkg", json!({}));
    long["description"] = json!("d".repeat(101));
    let problems = parse(&long).unwrap_err();
    assert_eq!(problems[0].path, "$.description", "{problems:?}");
    assert!(!problems[0].message.contains("ddd"), "{problems:?}");
    let mut second = package("npm", "pkg", json!({}));
    second["packages"].as_array_mut().unwrap().push(
        json!({"registryType": "oci", "identifier": "example/img", "version": "latest",
                     "transport": {"type": "stdio"}}),
    );
    let problems = parse(&second).unwrap_err();
    assert!(
        problems.iter().any(|p| p.path == "$.packages[1].version"),
        "{problems:?}"
    );
}

#[test]
fn a_companion_sandbox_shapes_docker_and_is_checked() {
    let file = package("oci", "ghcr.io/example/img", json!({}));
    let spec = with_companion(
        &file,
        &json!({"sandbox": {"connect": ["api.example.com:443"], "memory_mb": 256}}),
    )
    .unwrap();
    assert!(
        spec.args.contains(&"--memory=256m".to_string()),
        "{:?}",
        spec.args
    );
    assert!(
        !spec.args.iter().any(|a| a.starts_with("--network")),
        "{:?}",
        spec.args
    );
    let sandbox = spec.sandbox.unwrap();
    assert_eq!(sandbox.connect, ["api.example.com:443"]);
    for (bad, says) in [
        (
            json!({"sandbox": {"connect": ["api.example.com"]}}),
            "is not host:port",
        ),
        (
            json!({"sandbox": {"write": ["/"]}}),
            "grants the whole file system",
        ),
        (
            json!({"sandbox": {"read": ["relative"]}}),
            "must be an absolute path",
        ),
        (json!({"sandbox": {"memory_mb": 4}}), "too little"),
        (json!({"sandbox": {"mount": ["/"]}}), "mount"),
        (json!({"sandbox": "on"}), "expected \"off\" or an object"),
    ] {
        let problems = with_companion(&file, &bad).unwrap_err();
        let text: String = problems
            .iter()
            .map(|p| format!("{} {}\n", p.path, p.message))
            .collect();
        assert!(text.contains(says), "{bad}: {text}");
    }
}

#[test]
fn a_native_file_declares_its_sandbox_in_every_shape() {
    let native = json!({"id": "files", "command": "mcp-fs", "sandbox": {"write": ["/srv/data"], "processes": 8}});
    let spec = parse(&native).unwrap();
    let sandbox = spec.sandbox.unwrap();
    assert_eq!(
        (sandbox.write, sandbox.processes),
        (vec!["/srv/data".to_string()], 8)
    );
    let shared = json!({"mcpServers": {"legacy": {"command": "old-server", "sandbox": "off"}}});
    assert!(parse(&shared).unwrap().sandbox.unwrap().off);
    let remote = json!({"id": "far", "url": "https://mcp.example.com/mcp", "sandbox": {}});
    assert!(refused(&remote).contains("a sandbox is for stdio servers"));
}
