//! A package of a server.json as a native entry: what runs it (`npx`,
//! `uvx`, `docker run`), its arguments as argv and its environment as
//! node-side references; or why a node cannot run it.

use serde_json::{json, Map, Value};

use super::super::values::{kind, Problems};
use super::argv::{check_identifier, interpreted, runtime_args, Runtime};
use super::unusable::Unusable;
use super::values::{field, fill, flag, inexact, literal, placeholder, text, Companion, Filled};

/// A package's or runtime's arguments, as argv.
pub(super) fn arguments(
    problems: &mut Problems,
    path: &str,
    list: Option<&Value>,
    companion: &Companion<'_>,
) -> Vec<String> {
    let Some(list) = list else {
        return Vec::new();
    };
    let Some(list) = list.as_array() else {
        problems.push(
            path,
            format!("expected an array of arguments, found {}", kind(list)),
        );
        return Vec::new();
    };
    let mut argv = Vec::new();
    for (i, arg) in list.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let Some(arg) = arg.as_object() else {
            problems.push(
                &at,
                format!("expected an argument object, found {}", kind(arg)),
            );
            continue;
        };
        let variables = field(arg, "variables", "variables").and_then(Value::as_object);
        let value = text(arg, "value", "value").or_else(|| text(arg, "default", "default"));
        let positional = text(arg, "type", "type") == Some("positional");
        let value = match value {
            Some(value) => match fill(
                problems,
                &format!("{at}.value"),
                value,
                variables,
                companion,
            ) {
                Filled::Value(value) => value,
                // An optional variable without a value: so is the argument.
                Filled::Optional | Filled::Missing => continue,
            },
            // An option the file only documents: left out unless required.
            None if !flag(arg, "isRequired", "is_required") => continue,
            None => {
                problems.push(&at, "a required argument has no value or default; give the server another way (a companion file cannot add arguments)");
                continue;
            }
        };
        match (positional, text(arg, "name", "name")) {
            (false, Some(name)) => {
                argv.push(literal(name));
                argv.push(value);
            }
            _ => argv.push(value),
        }
    }
    argv
}

/// Environment variables as `NAME: value` entries: a required or secret
/// one is a `${NAME}` reference the node resolves (under its policy; a
/// secret never passes through SMS); an optional one takes its default,
/// or is left out. The companion's `env` overrides.
pub(super) fn environment(
    problems: &mut Problems,
    path: &str,
    list: Option<&Value>,
    companion: &Companion<'_>,
) -> Map<String, Value> {
    let mut env = Map::new();
    if let Some(list) = list {
        match list.as_array() {
            Some(list) => {
                for (i, var) in list.iter().enumerate() {
                    let at = format!("{path}[{i}]");
                    let Some(var) = var.as_object() else {
                        problems.push(&at, format!("expected an object {{\"name\": ..., \"isRequired\": ..., \"isSecret\": ...}}, found {}; the file does not follow the registry's schema", kind(var)));
                        continue;
                    };
                    let Some(name) = text(var, "name", "name") else {
                        problems.push(&at, "an environment variable without a \"name\"");
                        continue;
                    };
                    let operator_sets = companion
                        .get("env")
                        .and_then(Value::as_object)
                        .is_some_and(|e| e.contains_key(name));
                    if interpreted(name) && !operator_sets {
                        problems.push(&at, format!("'{}' changes what the runtime loads or runs; a registry file may not set it (the companion's \"env\" may, if you mean it)", name.escape_default()));
                        continue;
                    }
                    let value = if flag(var, "isRequired", "is_required")
                        || flag(var, "isSecret", "is_secret")
                    {
                        Some(format!("${{{name}}}"))
                    } else {
                        text(var, "default", "default").map(literal)
                    };
                    if let Some(value) = value {
                        env.insert(name.to_string(), Value::String(value));
                    }
                }
            }
            None => problems.push(
                path,
                format!("expected an array of variables, found {}", kind(list)),
            ),
        }
    }
    if let Some(given) = companion.get("env").and_then(Value::as_object) {
        env.extend(given.clone());
    }
    env
}

/// How a package runs: the runtime, its command and arguments before the
/// file's, and the package as named in its origin.
struct Launch {
    runtime: Runtime,
    command: &'static str,
    args: Vec<String>,
    name: String,
}

/// Hardening every `docker run` gets: no capabilities, no privilege
/// gain, a read-only root with a private /tmp, bounded memory and
/// processes, a non-root user, and no network unless the companion's
/// sandbox declares destinations.
fn docker_hardening(companion: &Companion<'_>) -> Vec<String> {
    let sandbox = companion.get("sandbox").and_then(Value::as_object);
    let number = |key: &str, default: u64| {
        sandbox
            .and_then(|s| s.get(key))
            .and_then(Value::as_u64)
            .unwrap_or(default)
    };
    let connects = sandbox
        .and_then(|s| s.get("connect"))
        .and_then(Value::as_array)
        .is_some_and(|c| !c.is_empty());
    let mut args: Vec<String> = [
        "--cap-drop=ALL",
        "--security-opt=no-new-privileges",
        "--read-only",
        "--tmpfs=/tmp",
        "--user=65534:65534",
    ]
    .map(String::from)
    .to_vec();
    args.push(format!("--memory={}m", number("memory_mb", 1024)));
    args.push(format!("--pids-limit={}", number("processes", 128)));
    if !connects {
        args.push("--network=none".into());
    }
    args
}

/// The runtime for a package of `kind_name`, with its exact version.
fn launch(
    kind_name: &str,
    identifier: &str,
    version: Option<&str>,
    env: &Map<String, Value>,
    companion: &Companion<'_>,
) -> Result<Launch, Unusable> {
    let exact = |version: Option<&str>| -> Result<String, Unusable> {
        let version = version.unwrap_or("");
        match inexact(version) {
            Some(why) => Err(Unusable::Version(why)),
            None => Ok(version.to_string()),
        }
    };
    let launch = match kind_name {
        "npm" => {
            let spec = format!("{identifier}@{}", exact(version)?);
            Launch {
                runtime: Runtime::Npx,
                command: "npx",
                args: vec!["-y".into(), literal(&spec)],
                name: spec,
            }
        }
        "pypi" => {
            let spec = format!("{identifier}=={}", exact(version)?);
            Launch {
                runtime: Runtime::Uvx,
                command: "uvx",
                args: vec![literal(&spec)],
                name: spec,
            }
        }
        "oci" | "docker" => {
            let tagged = identifier.contains('@')
                || identifier
                    .rsplit('/')
                    .next()
                    .is_some_and(|last| last.contains(':'));
            let image = if tagged {
                if let Some(tag) = identifier
                    .rsplit(':')
                    .next()
                    .filter(|_| !identifier.contains('@'))
                {
                    if let Some(why) = inexact(tag) {
                        return Err(Unusable::ImageTag(why));
                    }
                }
                identifier.to_string()
            } else {
                format!("{identifier}:{}", exact(version)?)
            };
            let mut args = vec!["run".to_string(), "-i".to_string(), "--rm".to_string()];
            args.extend(docker_hardening(companion));
            // The container sees only the variables named here; docker
            // takes their values from its own environment.
            for name in env.keys() {
                args.push("-e".into());
                args.push(literal(name));
            }
            Launch {
                runtime: Runtime::Docker,
                command: "docker",
                args,
                name: image,
            }
        }
        "mcpb" => return Err(Unusable::Bundle),
        "nuget" => return Err(Unusable::NuGet),
        "" => return Err(Unusable::Unnamed("registryType")),
        other => return Err(Unusable::Registry(other.to_string())),
    };
    check_identifier(kind_name, identifier)?;
    Ok(launch)
}

/// What a node can run of one package, as native entry fields and the
/// package's name for its origin; or why not.
pub(super) fn package_entry(
    problems: &mut Problems,
    path: &str,
    package: &Map<String, Value>,
    companion: &Companion<'_>,
) -> Result<(Map<String, Value>, String), Unusable> {
    let kind_name = text(package, "registryType", "registry_type")
        .or_else(|| text(package, "registry_name", "registry_name"))
        .unwrap_or("");
    let identifier = text(package, "identifier", "identifier")
        .or_else(|| text(package, "name", "name"))
        .unwrap_or("");
    if identifier.is_empty() {
        return Err(Unusable::Unnamed("identifier"));
    }
    if let Some(what) = placeholder(identifier) {
        return Err(Unusable::Placeholder {
            identifier: identifier.to_string(),
            what,
        });
    }
    let transport = field(package, "transport", "transport")
        .and_then(Value::as_object)
        .and_then(|t| text(t, "type", "type"))
        .unwrap_or("stdio");
    if transport != "stdio" {
        return Err(Unusable::NotStdio(transport.to_string()));
    }
    let runtime = arguments(
        problems,
        &format!("{path}.runtimeArguments"),
        field(package, "runtimeArguments", "runtime_arguments"),
        companion,
    );
    let after = arguments(
        problems,
        &format!("{path}.packageArguments"),
        field(package, "packageArguments", "package_arguments"),
        companion,
    );
    let env = environment(
        problems,
        &format!("{path}.environmentVariables"),
        field(package, "environmentVariables", "environment_variables"),
        companion,
    );
    let version = text(package, "version", "version");
    let Launch {
        runtime: kind,
        command,
        mut args,
        name,
    } = launch(kind_name, identifier, version, &env, companion)?;
    let runtime = runtime_args(kind, runtime, &name)?;
    if kind == Runtime::Docker {
        // Runtime arguments go to `docker run`, before the image.
        args.extend(runtime);
        args.push(literal(&name));
        args.extend(after);
    } else {
        let mut all = runtime;
        all.extend(args);
        all.extend(after);
        args = all;
    }
    let mut entry = Map::new();
    entry.insert("transport".into(), json!("stdio"));
    entry.insert("command".into(), json!(command));
    entry.insert("args".into(), json!(args));
    if !env.is_empty() {
        entry.insert("env".into(), Value::Object(env));
    }
    Ok((entry, format!("{kind_name} {name}")))
}
