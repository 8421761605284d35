//! Tools a guest implements itself (`cchat_write_fn`), offered to the model
//! next to the MCP tools its policy allows, and run by calling back into
//! the guest's exported dispatcher (`spear_tool_call`, see
//! docs/guest-api.md) through [`GuestCallbacks`], which the host API
//! implements on the guest's store.
//!
//! A guest tool's name is offered as the guest wrote it; it must not start
//! with `mcp`, the MCP tools' name space (`mcp__…`, `mcp_h_…`,
//! `mcp.<server>.<tool>`), so the two can never collide.

use async_trait::async_trait;
use serde_json::Value;
use spear_guest::calls::GuestToolSpec;

use crate::llm::ToolSpec;

/// Guest tools per session at most.
pub const MAX_GUEST_TOOLS: usize = 128;
/// Largest `cchat_write_fn` spec (name, description and schema).
pub const MAX_SPEC_BYTES: usize = 64 * 1024;
/// Largest result a guest tool may hand back, and largest arguments it is
/// called with: past it the model is told the size instead.
pub const MAX_RESULT_BYTES: usize = 1024 * 1024;

/// One guest tool of a session.
#[derive(Debug, Clone)]
pub struct GuestTool {
    /// What the dispatcher is called with; unique in the run.
    pub fn_id: i32,
    pub spec: GuestToolSpec,
}

/// Why `cchat_write_fn` refused a tool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuestToolError {
    #[error("the tool spec is not valid: {0}")]
    Invalid(String),
    #[error("this session already has a guest tool named '{0}'")]
    Exists(String),
    #[error("this session already has {MAX_GUEST_TOOLS} guest tools")]
    TooMany,
}

/// A session's guest tools, in the order they were written.
#[derive(Debug, Clone, Default)]
pub struct GuestTools {
    tools: Vec<GuestTool>,
}

impl GuestTools {
    /// Reads and checks a spec (JSON of [`GuestToolSpec`]).
    pub fn parse(spec: &[u8]) -> Result<GuestToolSpec, GuestToolError> {
        let invalid = GuestToolError::Invalid;
        if spec.len() > MAX_SPEC_BYTES {
            return Err(invalid(format!("it is over {MAX_SPEC_BYTES} bytes")));
        }
        let spec: GuestToolSpec = serde_json::from_slice(spec).map_err(|e| {
            invalid(format!(
                "expected {{\"name\", \"description\", \"parameters\"}}: {e}"
            ))
        })?;
        if !crate::tools::valid_name(&spec.name) {
            return Err(invalid("name must match ^[A-Za-z0-9_-]{1,64}$".into()));
        }
        if spec
            .name
            .get(..3)
            .is_some_and(|p| p.eq_ignore_ascii_case("mcp"))
        {
            return Err(invalid(format!(
                "name '{}' starts with 'mcp', the MCP tools' name space; choose another",
                spec.name
            )));
        }
        if spec.parameters.get("type").and_then(Value::as_str) != Some("object") {
            return Err(invalid(
                "parameters must be an object schema ({\"type\": \"object\", ...})".into(),
            ));
        }
        Ok(spec)
    }

    /// Whether a tool named `name` can be added.
    pub fn check_room(&self, name: &str) -> Result<(), GuestToolError> {
        if self.tools.len() >= MAX_GUEST_TOOLS {
            return Err(GuestToolError::TooMany);
        }
        if self.find(name).is_some() {
            return Err(GuestToolError::Exists(name.to_string()));
        }
        Ok(())
    }

    /// Adds a checked tool under `fn_id`.
    pub fn add(&mut self, fn_id: i32, spec: GuestToolSpec) -> Result<(), GuestToolError> {
        self.check_room(&spec.name)?;
        self.tools.push(GuestTool { fn_id, spec });
        Ok(())
    }

    pub fn find(&self, name: &str) -> Option<&GuestTool> {
        self.tools.iter().find(|t| t.spec.name == name)
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The tools as injected into a request.
    pub fn specs(&self) -> impl Iterator<Item = ToolSpec> + '_ {
        self.tools.iter().map(|t| ToolSpec {
            name: t.spec.name.clone(),
            description: t.spec.description.clone(),
            parameters: t.spec.parameters.clone(),
            deferred: false,
        })
    }
}

/// What a guest tool gave back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestResult {
    pub text: String,
    /// The tool said it failed (the text is the error the model sees).
    pub is_error: bool,
}

/// The guest run cannot go on (a trap, a limit, a broken dispatcher); the
/// host API holds the error wasmtime unwinds the guest with.
#[derive(Debug, Clone, thiserror::Error)]
#[error("guest tool '{tool}' stopped the run: {why}")]
pub struct GuestStopped {
    pub tool: String,
    pub why: String,
}

/// Calls a guest tool through the guest's dispatcher.
#[async_trait]
pub trait GuestCallbacks: Send {
    async fn call(
        &mut self,
        tool: &GuestTool,
        arguments: &str,
    ) -> Result<GuestResult, GuestStopped>;
}

/// For sends that cannot reach a guest (benchmarks, in-process tests of
/// the loop): a guest tool call is an error result.
pub struct NoCallbacks;

#[async_trait]
impl GuestCallbacks for NoCallbacks {
    async fn call(&mut self, tool: &GuestTool, _: &str) -> Result<GuestResult, GuestStopped> {
        Ok(GuestResult {
            text: format!("guest tool '{}' cannot be called here", tool.spec.name),
            is_error: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_stay_out_of_the_mcp_name_space() {
        let spec =
            |name: &str| format!(r#"{{"name": "{name}", "parameters": {{"type": "object"}}}}"#);
        assert!(GuestTools::parse(spec("convert_units").as_bytes()).is_ok());
        for bad in ["mcp__Zg__eA", "MCP_tool", "mcp.fs.read", "has space", ""] {
            assert!(GuestTools::parse(spec(bad).as_bytes()).is_err(), "{bad}");
        }
        let no_schema = br#"{"name": "x", "parameters": {"type": "string"}}"#;
        assert!(GuestTools::parse(no_schema).is_err());
        let mut tools = GuestTools::default();
        let parsed = GuestTools::parse(spec("x").as_bytes()).unwrap();
        tools.add(1, parsed.clone()).unwrap();
        assert_eq!(
            tools.add(2, parsed),
            Err(GuestToolError::Exists("x".into()))
        );
    }
}
