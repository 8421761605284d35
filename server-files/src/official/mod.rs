//! The official MCP Registry's `server.json`, the fourth server-file
//! shape (docs/server-files.md): recognised by its `$schema` (a URL of the
//! official registry) or, for the pre-release draft, by `version_detail`,
//! and held to the published JSON Schema it declares (`schema.rs`); both
//! the snake_case and camelCase generations are read.
//!
//! Entry point: [`parse_registry`]. It checks the file against its schema
//! (a file that does not follow it, or declares none SMS keeps, is
//! refused), then picks what a node can run (the
//! first package of a kind nodes run: npm with `npx`, PyPI with `uvx`, an
//! OCI image with `docker run`; else the first remote), turns it into a
//! native entry (arguments as argv, never a shell; variables as `${NAME}`
//! references the node resolves under its policy), lays Spear's own
//! settings over it from the companion file, and checks the result with
//! the native shape's rules. Versions must be exact: the same bytes on
//! every node.
//!
//! `values.rs` reads the file's values, `packages.rs` and `remotes.rs`
//! turn what runs into a native entry.

mod argv;
mod packages;
mod remotes;
mod schema;
mod unusable;
mod values;

use serde_json::{json, Map, Value};
use spear_proto::v1::{RegistryOrigin, ServerSpec};

use super::fields::{keys, parse_entry, Problems, Shape};
use packages::package_entry;
use remotes::remote_entry;
use unusable::Unusable;
use values::{text, Companion};

/// What a `$schema` of the official registry contains.
const SCHEMA_HOSTS: &[&str] = &[
    "modelcontextprotocol.io/schemas/",
    "static.modelcontextprotocol.io/schemas/",
];

/// A companion file is named after its server.json: `github.json` and
/// `github.spear.json`.
pub const COMPANION_SUFFIX: &str = ".spear.json";

/// Native keys that say how to run a server: a server.json says that,
/// so a companion may not (its `env` and `headers` only add to them).
const RUN_KEYS: &[&str] = &["transport", "command", "args", "cwd", "url"];
/// Keys only a companion has: which package or remote runs, and values
/// for what the server.json leaves open.
const REGISTRY_KEYS: &[&str] = &["package", "remote", "variables", "env", "headers"];

/// Keys a companion file may hold: the native keys of Spear's settings
/// (every native key but how to run it) and [`REGISTRY_KEYS`].
pub fn companion_keys() -> Vec<&'static str> {
    keys(Shape::Native)
        .into_iter()
        .filter(|k| !RUN_KEYS.contains(k) && !REGISTRY_KEYS.contains(k))
        .chain(REGISTRY_KEYS.iter().copied())
        .collect()
}

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

/// A list of objects at `root[key]`.
fn objects<'a>(root: &'a Map<String, Value>, key: &str) -> Vec<&'a Map<String, Value>> {
    root.get(key)
        .and_then(Value::as_array)
        .map(|l| l.iter().filter_map(Value::as_object).collect())
        .unwrap_or_default()
}

/// Why no package or remote was chosen: the problems of the attempts
/// that came closest, and one reason per refused source.
struct Refusal {
    problems: Vec<super::problem::Problem>,
    reasons: Vec<String>,
}

type Entry = fn(
    &mut Problems,
    &str,
    &Map<String, Value>,
    &Companion<'_>,
) -> Result<(Map<String, Value>, String), Unusable>;

/// The package or remote a node runs: the companion's pick, else the
/// first that can run (packages first; a companion's pick of one kind
/// leaves the other out).
fn choose(
    root: &Map<String, Value>,
    companion: &Companion<'_>,
) -> Result<(Map<String, Value>, String), Refusal> {
    let pick = |key: &str| {
        companion
            .get(key)
            .and_then(Value::as_u64)
            .map(|i| i as usize)
    };
    let (chosen_package, chosen_remote) = (pick("package"), pick("remote"));
    let sources: [(&str, Entry, Option<usize>, bool); 2] = [
        (
            "packages",
            package_entry,
            chosen_package,
            chosen_remote.is_some(),
        ),
        (
            "remotes",
            remote_entry,
            chosen_remote,
            chosen_package.is_some(),
        ),
    ];
    let mut refusal = Refusal {
        problems: Vec::new(),
        reasons: Vec::new(),
    };
    for (kind, entry, pick, other_picked) in sources {
        if other_picked {
            continue;
        }
        for (i, source) in objects(root, kind).into_iter().enumerate() {
            if pick.is_some_and(|c| c != i) {
                continue;
            }
            let mut attempt = Problems::new("");
            match entry(&mut attempt, &format!("$.{kind}[{i}]"), source, companion) {
                Ok(found) if attempt.is_empty() => return Ok(found),
                Ok(_) => refusal.problems.extend(attempt.list),
                Err(why) => refusal.reasons.push(format!("{kind}[{i}]: {why}")),
            }
        }
    }
    Err(refusal)
}

/// The sentence for a file none of whose sources can run.
fn refused_sentence(root: &Map<String, Value>, mut reasons: Vec<String>) -> String {
    if reasons.is_empty()
        && objects(root, "packages").is_empty()
        && objects(root, "remotes").is_empty()
    {
        "it lists no packages and no remotes".to_string()
    } else if reasons.is_empty() {
        "none of its packages and remotes can be used as written".to_string()
    } else if reasons.len() > MAX_REASONS {
        let more = reasons.len() - MAX_REASONS;
        reasons.truncate(MAX_REASONS);
        format!("{}; and {more} more", reasons.join("; "))
    } else {
        reasons.join("; ")
    }
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
        super::values::unknown_keys(problems, "$companion", settings, &companion_keys());
    }
    if let Err(why) = schema::declared(root) {
        problems.push("$.$schema", why.to_string());
        return None;
    }
    let Some(name) = text(root, "name", "name") else {
        problems.push(
            "$.name",
            "a registry server.json names its server (\"name\": \"io.github.owner/repo\")",
        );
        return None;
    };
    let (mut entry, origin) = match choose(root, &companion) {
        Ok(chosen) => chosen,
        Err(Refusal {
            problems: local,
            reasons,
        }) => {
            for problem in local {
                problems.push(&problem.path, problem.message);
            }
            let why = refused_sentence(root, reasons);
            problems.push(
                "$",
                format!("no package or remote of {name} can run on a node: {why}"),
            );
            return None;
        }
    };
    // Checked after choosing, so a package refused for what it would run
    // gets that sentence, which says more than the schema's would.
    if !schema::check(problems, root) {
        return None;
    }
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
            if !REGISTRY_KEYS.contains(&key.as_str()) {
                entry.insert(key.clone(), value.clone());
            }
        }
    }
    let version = text(root, "version", "version")
        .or_else(|| {
            root.get("version_detail")
                .and_then(Value::as_object)
                .and_then(|d| text(d, "version", "version"))
        })
        .unwrap_or("");
    let mut spec = parse_entry(problems, "$", &entry, Shape::Native, None)?;
    spec.registry = Some(RegistryOrigin {
        name: name.to_string(),
        version: version.to_string(),
        package: origin,
    });
    Some(spec)
}
