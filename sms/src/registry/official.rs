//! The official MCP Registry's `server.json`, the fourth server-file
//! shape (docs/server-files.md): recognised by its `$schema` (the draft of
//! 2025-07 to the schema of 2025-12-11) or, for the pre-release draft, by
//! `version_detail`; both the snake_case and camelCase generations, mixed
//! as real files mix them.
//!
//! Entry point: [`parse_registry`]. It picks what a node can run (the
//! first package of a kind nodes run: npm with `npx`, PyPI with `uvx`, an
//! OCI image with `docker run`; else the first remote), turns it into a
//! native entry (arguments as argv, never a shell; variables as `${NAME}`
//! references the node resolves under its policy), lays Spear's own
//! settings over it from the companion file, and checks the result with
//! the native shape's rules. Versions must be exact: the same bytes on
//! every node.

use serde_json::{json, Map, Value};
use spear_proto::v1::{RegistryOrigin, ServerSpec};

use super::fields::{parse_entry, Problems, Shape};
use super::values::kind;

/// What a `$schema` of the official registry contains.
const SCHEMA_HOSTS: &[&str] = &[
    "modelcontextprotocol.io/schemas/",
    "static.modelcontextprotocol.io/schemas/",
];

/// A companion file is named after its server.json: `github.json` and
/// `github.spear.json`.
pub const COMPANION_SUFFIX: &str = ".spear.json";

/// Keys a companion file may hold: Spear's settings for the server.
pub const COMPANION_KEYS: &[&str] = &[
    "id",
    "description",
    "allowed_tools",
    "denied_tools",
    "timeouts_ms",
    "limits",
    "enabled",
    "elicitation",
    "auth",
    "nodes",
    "pin",
    "approval",
    "package",
    "remote",
    "variables",
    "env",
    "headers",
];

/// Refusals a problem names, one per package or remote; the rest are
/// counted.
const MAX_REASONS: usize = 3;

/// The default pin for a registry server without a companion: nothing it
/// lists is offered until an operator approves the definitions.
pub const DEFAULT_PIN: &str = "approve";

/// Whether `root` is an official registry `server.json`.
pub fn is_registry_file(root: &Map<String, Value>) -> bool {
    let schema = root.get("$schema").and_then(Value::as_str).unwrap_or("");
    SCHEMA_HOSTS.iter().any(|h| schema.contains(h)) || root.contains_key("version_detail")
}

/// A field by its camelCase name, or the snake_case one older files use.
fn field<'a>(obj: &'a Map<String, Value>, camel: &str, snake: &str) -> Option<&'a Value> {
    obj.get(camel).or_else(|| obj.get(snake))
}

fn text<'a>(obj: &'a Map<String, Value>, camel: &str, snake: &str) -> Option<&'a str> {
    field(obj, camel, snake).and_then(Value::as_str)
}

fn flag(obj: &Map<String, Value>, camel: &str, snake: &str) -> bool {
    field(obj, camel, snake)
        .or_else(|| obj.get("required").filter(|_| camel == "isRequired"))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// Text from the file as a literal in a server entry: a `${` in it is not
/// a reference.
fn literal(text: &str) -> String {
    text.replace("${", "$${")
}

/// A placeholder a release tool should have filled in, if `text` holds one.
fn placeholder(text: &str) -> Option<&'static str> {
    [
        ("${", "a ${...} placeholder"),
        ("{{", "a {{...}} placeholder"),
        ("<<", "a <<...>> placeholder"),
        ("<your", "a <your ...> placeholder"),
    ]
    .into_iter()
    .find(|(mark, _)| text.contains(mark))
    .map(|(_, what)| what)
}

/// Why `version` is not one exact version, if it is not.
fn inexact(version: &str) -> Option<String> {
    if version.trim().is_empty() {
        return Some("is empty".into());
    }
    if let Some(what) = placeholder(version) {
        return Some(format!("'{version}' is {what} the release did not fill in"));
    }
    if version.eq_ignore_ascii_case("latest") {
        return Some("is 'latest', which names different bytes over time".into());
    }
    let ranged = version.starts_with(['^', '~', '>', '<', '=', '*'])
        || version.contains("||")
        || version.contains(" - ")
        || version.split('.').any(|p| p == "x" || p == "X" || p == "*");
    ranged.then(|| format!("'{version}' is a range, not one version"))
}

/// The companion's settings, or none.
struct Companion<'a> {
    settings: Option<&'a Map<String, Value>>,
}

impl<'a> Companion<'a> {
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.settings.and_then(|s| s.get(key))
    }

    /// What the companion says variable `name` is, if anything.
    fn variable(&self, name: &str) -> Option<&'a str> {
        self.get("variables")
            .and_then(Value::as_object)
            .and_then(|v| v.get(name))
            .and_then(Value::as_str)
    }
}

/// What filling a value's `{var}`s gave.
enum Filled {
    Value(String),
    /// A variable the file marks optional has no value: leave the
    /// argument (or header) out.
    Optional,
    /// A required variable has no value; the problem is recorded.
    Missing,
}

/// `value` with each `{var}` filled from `variables` (a map of variable
/// definitions): the companion's value, else the variable's `default`
/// (not for a secret: that comes from the companion, as a reference).
fn fill(
    problems: &mut Problems,
    path: &str,
    value: &str,
    variables: Option<&Map<String, Value>>,
    companion: &Companion<'_>,
) -> Filled {
    let mut out = String::new();
    let mut rest = value;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        let name = &rest[open + 1..open + close];
        let simple = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        out.push_str(&literal(&rest[..open]));
        if !simple {
            out.push_str(&literal(&rest[open..open + close + 1]));
            rest = &rest[open + close + 1..];
            continue;
        }
        let definition = variables
            .and_then(|v| v.get(name))
            .and_then(Value::as_object);
        let default = definition
            .filter(|d| !flag(d, "isSecret", "is_secret"))
            .and_then(|d| text(d, "default", "default"))
            .map(literal);
        // The operator's value may be a ${NAME} reference.
        match companion.variable(name).map(str::to_string).or(default) {
            Some(filled) => out.push_str(&filled),
            None if definition.is_some_and(|d| !flag(d, "isRequired", "is_required")) => {
                return Filled::Optional
            }
            None => {
                problems.push(
                    path,
                    format!("{{{name}}} has no value: give it in the companion file, as \"variables\": {{\"{name}\": \"...\"}} (a secret as a ${{NAME}} reference)"),
                );
                return Filled::Missing;
            }
        }
        rest = &rest[open + close + 1..];
    }
    out.push_str(&literal(rest));
    Filled::Value(out)
}

/// A package's or runtime's arguments, as argv.
fn arguments(
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
fn environment(
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

/// What a node can run of one package, as native entry fields and the
/// package's name for its origin; or why not.
fn package_entry(
    problems: &mut Problems,
    path: &str,
    package: &Map<String, Value>,
    companion: &Companion<'_>,
) -> Result<(Map<String, Value>, String), String> {
    let kind_name = text(package, "registryType", "registry_type")
        .or_else(|| text(package, "registry_name", "registry_name"))
        .unwrap_or("");
    let identifier = text(package, "identifier", "identifier")
        .or_else(|| text(package, "name", "name"))
        .unwrap_or("");
    if identifier.is_empty() {
        return Err("it names no identifier".into());
    }
    if let Some(what) = placeholder(identifier) {
        return Err(format!(
            "its identifier '{identifier}' is {what} the release did not fill in"
        ));
    }
    let version = text(package, "version", "version");
    let transport = field(package, "transport", "transport")
        .and_then(Value::as_object)
        .and_then(|t| text(t, "type", "type"))
        .unwrap_or("stdio");
    if transport != "stdio" {
        return Err(format!("its transport is {transport}: a node runs packages over stdio; use the file's remote, or a stdio package"));
    }
    let exact = |version: Option<&str>| -> Result<String, String> {
        let version = version.unwrap_or("");
        match inexact(version) {
            Some(why) => Err(format!(
                "its version {why}; pin one exact version (the same bytes on every node)"
            )),
            None => Ok(version.to_string()),
        }
    };
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
    let (command, mut args, name) = match kind_name {
        "npm" => {
            let version = exact(version)?;
            let spec = format!("{identifier}@{version}");
            ("npx", vec!["-y".to_string(), literal(&spec)], spec)
        }
        "pypi" => {
            let version = exact(version)?;
            let spec = format!("{identifier}=={version}");
            ("uvx", vec![literal(&spec)], spec)
        }
        "oci" | "docker" => {
            let tagged = identifier.contains('@') || identifier.rsplit('/').next().is_some_and(|last| last.contains(':'));
            let image = if tagged {
                if let Some(tag) = identifier.rsplit(':').next().filter(|_| !identifier.contains('@')) {
                    if let Some(why) = inexact(tag) {
                        return Err(format!("its image tag {why}; pin a tag or a digest"));
                    }
                }
                identifier.to_string()
            } else {
                format!("{identifier}:{}", exact(version)?)
            };
            let mut args = vec!["run".to_string(), "-i".to_string(), "--rm".to_string()];
            // The container sees only the variables named here; docker
            // takes their values from its own environment.
            for name in env.keys() {
                args.push("-e".into());
                args.push(literal(name));
            }
            ("docker", args, image)
        }
        "mcpb" => return Err("it is an MCP bundle (mcpb): nodes do not download and unpack bundles; use another package or a remote".into()),
        "nuget" => return Err("it is a NuGet package: nodes run npm, PyPI and OCI packages".into()),
        "" => return Err("it names no registryType".into()),
        other => return Err(format!("its registryType '{other}' is not one nodes run (npm, pypi, oci)")),
    };
    if command == "docker" {
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

/// A remote as native entry fields, or why not.
fn remote_entry(
    problems: &mut Problems,
    path: &str,
    remote: &Map<String, Value>,
    companion: &Companion<'_>,
) -> Result<(Map<String, Value>, String), String> {
    let transport = match text(remote, "type", "transport_type") {
        Some("streamable-http") | Some("streamable") | Some("http") => "streamable_http",
        Some("sse") => "sse",
        Some(other) => {
            return Err(format!(
                "its type '{other}' is neither streamable-http nor sse"
            ))
        }
        None => return Err("it names no type".into()),
    };
    let Some(url) = text(remote, "url", "url") else {
        return Err("it has no url".into());
    };
    let variables = field(remote, "variables", "variables").and_then(Value::as_object);
    let Filled::Value(url) = fill(problems, &format!("{path}.url"), url, variables, companion)
    else {
        return Err(
            "its url has a variable without a value; give it in the companion file's \"variables\""
                .into(),
        );
    };
    let mut headers = Map::new();
    if let Some(list) = field(remote, "headers", "headers").and_then(Value::as_array) {
        for (i, header) in list.iter().enumerate() {
            let at = format!("{path}.headers[{i}]");
            let Some(header) = header.as_object() else {
                problems.push(
                    &at,
                    format!("expected a header object, found {}", kind(header)),
                );
                continue;
            };
            let Some(name) = text(header, "name", "name") else {
                problems.push(&at, "a header without a \"name\"");
                continue;
            };
            let given = companion
                .get("headers")
                .and_then(Value::as_object)
                .and_then(|h| h.get(name))
                .and_then(Value::as_str);
            let secret = flag(header, "isSecret", "is_secret");
            let value = match (
                given,
                text(header, "value", "value"),
                text(header, "default", "default"),
            ) {
                (Some(given), _, _) => Some(given.to_string()),
                (None, Some(value), _) => {
                    let vars = field(header, "variables", "variables").and_then(Value::as_object);
                    match fill(problems, &format!("{at}.value"), value, vars, companion) {
                        Filled::Value(value) => Some(value),
                        Filled::Optional | Filled::Missing => None,
                    }
                }
                (None, None, Some(default)) if !secret => Some(literal(default)),
                _ if flag(header, "isRequired", "is_required") => {
                    problems.push(&at, format!("header {name} is required and has no value; give it in the companion file, as \"headers\": {{\"{name}\": \"${{NAME}}\"}}"));
                    None
                }
                _ => None,
            };
            if let Some(value) = value {
                headers.insert(name.to_string(), Value::String(value));
            }
        }
    }
    let mut entry = Map::new();
    entry.insert("transport".into(), json!(transport));
    entry.insert("url".into(), json!(url));
    if !headers.is_empty() {
        entry.insert("headers".into(), Value::Object(headers));
    }
    Ok((entry, format!("remote {url}")))
}

/// A valid server id from the registry name (`io.github.owner/repo-mcp` →
/// `repo-mcp`): its last segment, lowercased, other characters as `-`.
pub fn id_from_name(name: &str) -> String {
    let last = name.rsplit('/').next().unwrap_or(name);
    let mut id: String = last
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    while id.starts_with(['-', '_']) {
        id.remove(0);
    }
    id.truncate(super::ids::MAX_ID_LEN);
    id
}

/// Parses a registry `server.json` (`root`) with its companion's settings
/// (`companion`, from `<name>.spear.json` beside it) into one server.
pub fn parse_registry(
    problems: &mut Problems,
    root: &Map<String, Value>,
    companion: Option<&Map<String, Value>>,
) -> Option<ServerSpec> {
    let companion = Companion {
        settings: companion,
    };
    if let Some(settings) = companion.settings {
        super::values::unknown_keys(problems, "$companion", settings, COMPANION_KEYS);
    }
    let Some(name) = text(root, "name", "name") else {
        problems.push(
            "$.name",
            "a registry server.json names its server (\"name\": \"io.github.owner/repo\")",
        );
        return None;
    };
    let version = text(root, "version", "version")
        .or_else(|| {
            root.get("version_detail")
                .and_then(Value::as_object)
                .and_then(|d| text(d, "version", "version"))
        })
        .unwrap_or("");
    let packages: Vec<&Map<String, Value>> = root
        .get("packages")
        .and_then(Value::as_array)
        .map(|l| l.iter().filter_map(Value::as_object).collect())
        .unwrap_or_default();
    let remotes: Vec<&Map<String, Value>> = root
        .get("remotes")
        .and_then(Value::as_array)
        .map(|l| l.iter().filter_map(Value::as_object).collect())
        .unwrap_or_default();

    // The companion may pick; otherwise the first that can run.
    let chosen_package = companion
        .get("package")
        .and_then(Value::as_u64)
        .map(|i| i as usize);
    let chosen_remote = companion
        .get("remote")
        .and_then(Value::as_u64)
        .map(|i| i as usize);
    let mut refused = Vec::new();
    let mut chosen = None;
    let mut local = Problems::new("");
    for (i, package) in packages.iter().enumerate() {
        if chosen_remote.is_some() || chosen_package.is_some_and(|c| c != i) {
            continue;
        }
        let path = format!("$.packages[{i}]");
        let mut attempt = Problems::new("");
        match package_entry(&mut attempt, &path, package, &companion) {
            Ok(found) if attempt.is_empty() => {
                chosen = Some(found);
                break;
            }
            Ok(_) => local.list.extend(attempt.list),
            Err(why) => refused.push(format!("packages[{i}]: {why}")),
        }
    }
    if chosen.is_none() {
        for (i, remote) in remotes.iter().enumerate() {
            if chosen_package.is_some() || chosen_remote.is_some_and(|c| c != i) {
                continue;
            }
            let path = format!("$.remotes[{i}]");
            let mut attempt = Problems::new("");
            match remote_entry(&mut attempt, &path, remote, &companion) {
                Ok(found) if attempt.is_empty() => {
                    chosen = Some(found);
                    break;
                }
                Ok(_) => local.list.extend(attempt.list),
                Err(why) => refused.push(format!("remotes[{i}]: {why}")),
            }
        }
    }
    let Some((mut entry, origin)) = chosen else {
        for problem in local.list {
            problems.push(&problem.path, problem.message);
        }
        let why = if refused.is_empty() && packages.is_empty() && remotes.is_empty() {
            "it lists no packages and no remotes".to_string()
        } else if refused.is_empty() {
            "none of its packages and remotes can be used as written".to_string()
        } else if refused.len() > MAX_REASONS {
            let more = refused.len() - MAX_REASONS;
            refused.truncate(MAX_REASONS);
            format!("{}; and {more} more", refused.join("; "))
        } else {
            refused.join("; ")
        };
        problems.push(
            "$",
            format!("no package or remote of {name} can run on a node: {why}"),
        );
        return None;
    };
    let id = companion
        .get("id")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| id_from_name(name));
    entry.insert("id".into(), json!(id));
    let description = text(root, "description", "description").unwrap_or("");
    let description: String = description
        .chars()
        .take(super::fields::MAX_DESCRIPTION)
        .collect();
    entry.insert("description".into(), json!(description));
    entry.insert("pin".into(), json!(DEFAULT_PIN));
    if let Some(settings) = companion.settings {
        for (key, value) in settings {
            if !matches!(
                key.as_str(),
                "package" | "remote" | "variables" | "env" | "headers"
            ) {
                entry.insert(key.clone(), value.clone());
            }
        }
    }
    let mut spec = parse_entry(problems, "$", &entry, Shape::Native, None)?;
    spec.registry = Some(RegistryOrigin {
        name: name.to_string(),
        version: version.to_string(),
        package: origin,
    });
    Some(spec)
}
