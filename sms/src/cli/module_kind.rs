//! What `sms tasks register` says of a module it can read: a core module
//! (the `spear` functions of docs/guest-api.md) or a component (the world
//! in wit/spear-agent.wit). A component importing anything outside that
//! world is refused before it is registered, naming the import: the node
//! would refuse it at its first run, far from the operator.

use wasmparser::{Chunk, ComponentTypeRef, Parser, Payload};

/// The interfaces a component may import: the agent world's, and the
/// WASI 0.2 a language's runtime brings (what the task does not grant,
/// the node gives nothing of: no preopened directory, no socket).
const ALLOWED: &[&str] = &[
    "spear:agent/",
    "wasi:io/",
    "wasi:clocks/",
    "wasi:random/",
    "wasi:cli/",
    "wasi:filesystem/",
    "wasi:sockets/",
];

/// Why a module cannot be registered.
#[derive(Debug, thiserror::Error)]
pub enum KindError {
    #[error("the component imports '{0}', which the agent world (wit/spear-agent.wit) does not have: build it against that world (componentize-py -d wit -w agent, componentize-js with wit/spear-agent.wit)")]
    ForeignImport(String),
    #[error("the component does not parse: {0}")]
    Malformed(String),
}

/// "component" or "core module" (text included), once a component's
/// imports are all in the world.
pub fn kind(wasm: &[u8]) -> Result<&'static str, KindError> {
    if !Parser::is_component(wasm) {
        return Ok("core module");
    }
    // The component's own imports only: a nested module or component
    // imports what its parent gives it.
    let mut parser = Parser::new(0);
    let mut offset = 0;
    loop {
        let chunk = parser
            .parse(&wasm[offset..], true)
            .map_err(|e| KindError::Malformed(e.to_string()))?;
        let Chunk::Parsed { consumed, payload } = chunk else {
            return Err(KindError::Malformed("it ends early".into()));
        };
        offset += consumed;
        match payload {
            Payload::ComponentImportSection(imports) => {
                for import in imports {
                    let import = import.map_err(|e| KindError::Malformed(e.to_string()))?;
                    // A type the world uses (its `facts`) is no interface.
                    if matches!(import.ty, ComponentTypeRef::Type(_)) {
                        continue;
                    }
                    let name = import.name.name;
                    if !ALLOWED.iter().any(|allowed| name.starts_with(allowed)) {
                        return Err(KindError::ForeignImport(name.to_string()));
                    }
                }
            }
            Payload::ModuleSection {
                unchecked_range, ..
            }
            | Payload::ComponentSection {
                unchecked_range, ..
            } => offset += unchecked_range.len(),
            Payload::End(_) => break,
            _ => {}
        }
    }
    Ok("component")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_core_module_is_one() {
        let module = b"\0asm\x01\0\0\0";
        assert_eq!(kind(module).unwrap(), "core module");
        assert_eq!(kind(b"(module)").unwrap(), "core module");
    }
}
