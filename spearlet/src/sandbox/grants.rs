//! What a server may read and write, from what its file says:
//! - its own code: the command's executable as found on `PATH` and as its
//!   links resolve, and a script's interpreter (`#!`), each with its tree
//!   (`<prefix>/bin/x` grants `<prefix>`, `node_modules/.bin/x` grants
//!   `node_modules`, a version manager's `<root>/shims/x` grants `<root>`,
//!   any other file its directory), read and execute;
//! - the directories its arguments name that exist (a filesystem server's
//!   roots, as the operator wrote them), read and write; the directory of
//!   a file an argument names (a script), read;
//! - its file's `sandbox.read` and `sandbox.write`, and its `cwd` (read).
//!
//! `/` itself is never granted.

use spear_sandbox::refusal::Refusal;
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};

use spear_proto::v1::{Sandbox, ServerSpec};
use spear_sandbox::Plan;

use super::SandboxSection;
use super::StdioCommand;

/// The node's own files, hidden in every sandbox: its state dir, its
/// config file, and every file or directory its command line names (TLS
/// keys, token files).
pub fn own_paths(
    state_dir: Option<&Path>,
    config: Option<&Path>,
    args: &[OsString],
) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = state_dir
        .into_iter()
        .chain(config)
        .map(Path::to_path_buf)
        .collect();
    for arg in args.iter().skip(1) {
        let arg = arg.to_string_lossy();
        let value = arg.split_once('=').map_or(arg.as_ref(), |(_, v)| v);
        let path = Path::new(value);
        if path.is_absolute() && path.exists() && path != Path::new("/") {
            paths.push(path.to_path_buf());
        }
    }
    paths
        .into_iter()
        .map(|p| p.canonicalize().unwrap_or(p))
        .collect()
}

/// Finds `program` on the `PATH` the server gets (or the node's).
pub fn resolve_program(command: &StdioCommand) -> Result<PathBuf, Refusal> {
    let program = Path::new(&command.program);
    if program.components().count() > 1 || program.is_absolute() {
        let base = command.cwd.clone().unwrap_or_else(|| PathBuf::from("/"));
        let path = base.join(program);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(Refusal::Cannot(format!(
                "its command {} is not a file on this node",
                path.display()
            )))
        };
    }
    let path_var = command
        .env
        .iter()
        .find(|(n, _)| n == "PATH")
        .map(|(_, v)| OsString::from(v))
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_default();
    std::env::split_paths(&path_var)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            Refusal::Cannot(format!(
                "its command '{}' is not on this node's PATH",
                command.program
            ))
        })
}

/// The tree a program's file belongs to.
fn tree(file: &Path) -> Option<PathBuf> {
    let parent = file.parent()?;
    let up = match parent.file_name().and_then(|n| n.to_str()) {
        // A version manager's shims (pyenv, rbenv, asdf) run the manager
        // from the directory above them.
        Some("bin" | "sbin" | ".bin" | "shims") => parent.parent()?,
        _ => parent,
    };
    (up != Path::new("/")).then(|| up.to_path_buf())
}

/// A script's interpreter (`#!/path` or `#!/usr/bin/env name`).
fn interpreter(file: &Path, command: &StdioCommand) -> Option<PathBuf> {
    let mut head = [0u8; 256];
    let n = std::fs::File::open(file).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = String::from_utf8_lossy(line);
    let line = line.lines().next()?;
    let mut words = line.split_whitespace();
    let first = PathBuf::from(words.next()?);
    if first.ends_with("env") {
        let name = words.find(|w| !w.starts_with('-'))?;
        let lookup = StdioCommand {
            program: name.to_string(),
            ..command.clone()
        };
        return resolve_program(&lookup).ok();
    }
    Some(first)
}

/// Read trees for `program`: its own, its resolved one, its interpreter's.
fn code_trees(program: &Path, command: &StdioCommand) -> Vec<PathBuf> {
    let mut files = vec![program.to_path_buf()];
    if let Ok(real) = program.canonicalize() {
        if let Some(interp) = interpreter(&real, command) {
            files.push(interp.clone());
            files.extend(interp.canonicalize().ok());
        }
        files.push(real);
    }
    files.iter().filter_map(|f| tree(f)).collect()
}

/// What the arguments name: directories (write) and files (read their
/// directory).
fn argument_paths(command: &StdioCommand) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let base = command.cwd.clone().unwrap_or_else(|| PathBuf::from("/"));
    let (mut write, mut read) = (Vec::new(), Vec::new());
    for arg in &command.args {
        let value = match arg.split_once('=') {
            Some((flag, v)) if flag.starts_with('-') => v,
            _ => arg.as_str(),
        };
        let named = value.starts_with('/') || value.starts_with("./") || value.starts_with("../");
        if !named {
            continue;
        }
        let path = base.join(value);
        let Ok(real) = path.canonicalize() else {
            continue;
        };
        if real == Path::new("/") {
            continue;
        }
        if real.is_dir() {
            write.push(real);
        } else if let Some(dir) = real.parent().filter(|d| *d != Path::new("/")) {
            read.push(dir.to_path_buf());
        }
    }
    (write, read)
}

/// The plan for `spec` running `command`.
pub fn plan(
    spec: &ServerSpec,
    command: &StdioCommand,
    declared: &Sandbox,
    section: &SandboxSection,
    own: &[PathBuf],
) -> Result<Plan, Refusal> {
    let program = resolve_program(command)?;
    let mut read = code_trees(&program, command);
    let (mut write, arg_read) = argument_paths(command);
    read.extend(arg_read);
    read.extend(declared.read.iter().map(PathBuf::from));
    write.extend(declared.write.iter().map(PathBuf::from));
    read.extend(command.cwd.iter().cloned());
    read.sort();
    read.dedup();
    write.sort();
    write.dedup();
    let mut destinations = Vec::with_capacity(declared.connect.len());
    for entry in &declared.connect {
        let (host, port) = entry
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h.to_string(), p.parse::<u16>().ok()?)))
            .ok_or_else(|| {
                Refusal::Cannot(format!("sandbox.connect '{entry}' is not host:port"))
            })?;
        destinations.push((host, port));
    }
    if destinations.len() > spear_sandbox::launch::MAX_FORWARDS {
        return Err(Refusal::Cannot(format!(
            "it declares {} destinations; a server may have at most {}",
            destinations.len(),
            spear_sandbox::launch::MAX_FORWARDS
        )));
    }
    let pick = |declared: u32, default: u64| {
        if declared == 0 {
            default
        } else {
            u64::from(declared)
        }
    };
    Ok(Plan {
        server: spec.id.clone(),
        program,
        args: command.args.clone(),
        cwd: command.cwd.clone(),
        read,
        write,
        mask: own.to_vec(),
        forwards: Plan::assign_listeners(&destinations),
        memory_mb: pick(declared.memory_mb, section.memory_mb),
        processes: pick(declared.processes, section.processes),
        scratch_mb: section.scratch_mb,
        required: section.required(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(program: &str, args: &[&str]) -> StdioCommand {
        StdioCommand::of(program, args)
    }

    #[test]
    fn arguments_grant_their_directories_and_a_scripts_folder() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let script = dir.path().join("server.py");
        std::fs::write(&script, "print()").unwrap();
        let cmd = command(
            "sh",
            &[
                script.to_str().unwrap(),
                &format!("--root={}", data.display()),
                "/",
                "/does/not/exist",
                "plain",
            ],
        );
        let (write, read) = argument_paths(&cmd);
        let real = dir.path().canonicalize().unwrap();
        assert_eq!(write, vec![real.join("data")]);
        assert_eq!(read, vec![real]);
    }

    #[test]
    fn a_program_grants_its_tree_never_the_root() {
        for (program, granted) in [
            ("/opt/venv/bin/python", Some("/opt/venv")),
            (
                "/srv/npm/node_modules/.bin/x",
                Some("/srv/npm/node_modules"),
            ),
            ("/home/u/.pyenv/shims/python3", Some("/home/u/.pyenv")),
            ("/srv/app/server.js", Some("/srv/app")),
            ("/bin/sh", None),
        ] {
            assert_eq!(
                tree(Path::new(program)),
                granted.map(PathBuf::from),
                "{program}"
            );
        }
    }
}
