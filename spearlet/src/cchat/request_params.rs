//! A guest's writes to its session's request params (`model`,
//! `temperature`, `response_format`, the loop limits, ...): each value is
//! read into [`RequestParams`]' typed field and checked, or refused with
//! one sentence and nothing changed. The loop limits can only narrow the
//! task's (`EACCES` when wider); `backend` and `model` are checked against
//! the task and the node by the session ([`super::Models`]), and every
//! param against what the chosen backend can honour.

use std::time::Duration;

use serde_json::Value;
use spear_guest::request::{Param, RequestParams, ResponseFormat, ToolChoice};

use crate::tool_policy::ParamError;

/// The run's own limits, which a session's loop limits may only narrow.
#[derive(Debug, Clone, Copy)]
pub struct Ceilings {
    pub max_iterations: u32,
    pub max_total_tool_calls: u32,
    pub wall: Duration,
}

/// Largest `response_format` schema, serialized.
const MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// Longest name in `backend`, `model`, a stop sequence or `tool_choice`.
const MAX_NAME: usize = 256;

fn invalid(param: Param, reason: impl Into<String>) -> ParamError {
    ParamError::Invalid {
        key: param.key().to_string(),
        reason: reason.into(),
    }
}

/// Writes `value` (JSON; `null` clears) to `param` of `params`, or refuses
/// and leaves `params` as it was (each value is checked whole before it is
/// assigned).
pub fn set(
    params: &mut RequestParams,
    param: Param,
    value: &Value,
    ceilings: &Ceilings,
) -> Result<(), ParamError> {
    if value.is_null() {
        clear(params, param);
        Ok(())
    } else {
        write(params, param, value, ceilings)
    }
}

fn clear(p: &mut RequestParams, param: Param) {
    match param {
        Param::Backend => p.backend = None,
        Param::Model => p.model = None,
        Param::Temperature => p.temperature = None,
        Param::TopP => p.top_p = None,
        Param::MaxTokens => p.max_tokens = None,
        Param::Stop => p.stop = None,
        Param::Seed => p.seed = None,
        Param::ToolChoice => p.tool_choice = None,
        Param::ParallelToolCalls => p.parallel_tool_calls = None,
        Param::ResponseFormat => p.response_format = None,
        Param::MaxIterations => p.max_iterations = None,
        Param::MaxTotalToolCalls => p.max_total_tool_calls = None,
        Param::TimeoutMs => p.timeout_ms = None,
    }
}

fn write(
    p: &mut RequestParams,
    param: Param,
    value: &Value,
    ceilings: &Ceilings,
) -> Result<(), ParamError> {
    match param {
        Param::Backend => p.backend = Some(name(param, value)?),
        Param::Model => p.model = Some(name(param, value)?),
        Param::Temperature => p.temperature = Some(number(param, value, 0.0, 2.0, true)?),
        Param::TopP => p.top_p = Some(number(param, value, 0.0, 1.0, false)?),
        Param::MaxTokens => {
            p.max_tokens = Some(integer(param, value, 1, 1_000_000)? as u32);
        }
        Param::Stop => p.stop = Some(stop(value)?),
        Param::Seed => {
            p.seed = Some(
                value
                    .as_i64()
                    .ok_or_else(|| invalid(param, "expected an integer"))?,
            )
        }
        Param::ToolChoice => {
            let choice: ToolChoice = serde_json::from_value(value.clone()).map_err(|_| {
                invalid(
                    param,
                    "expected \"auto\", \"none\", \"required\" or {\"name\": TOOL}",
                )
            })?;
            if let ToolChoice::Named { name } = &choice {
                if name.is_empty() || name.len() > MAX_NAME {
                    return Err(invalid(param, "a tool name of 1 to 256 bytes is required"));
                }
            }
            p.tool_choice = Some(choice);
        }
        Param::ParallelToolCalls => {
            p.parallel_tool_calls = Some(
                value
                    .as_bool()
                    .ok_or_else(|| invalid(param, "expected true or false"))?,
            )
        }
        Param::ResponseFormat => p.response_format = Some(response_format(value)?),
        Param::MaxIterations => {
            p.max_iterations =
                Some(narrowed(param, value, 1, ceilings.max_iterations.into())? as u32)
        }
        Param::MaxTotalToolCalls => {
            p.max_total_tool_calls =
                Some(narrowed(param, value, 0, ceilings.max_total_tool_calls.into())? as u32)
        }
        Param::TimeoutMs => {
            let wall = ceilings.wall.as_millis().min(u128::from(u64::MAX)) as u64;
            p.timeout_ms = Some(narrowed(param, value, 1, wall)?);
        }
    }
    Ok(())
}

fn name(param: Param, value: &Value) -> Result<String, ParamError> {
    match value.as_str() {
        Some(s) if !s.is_empty() && s.len() <= MAX_NAME => Ok(s.to_string()),
        _ => Err(invalid(param, "expected a name of 1 to 256 bytes")),
    }
}

fn number(
    param: Param,
    value: &Value,
    low: f64,
    high: f64,
    low_ok: bool,
) -> Result<f64, ParamError> {
    let n = value.as_f64().filter(|n| n.is_finite());
    match n {
        Some(n) if (n > low || (low_ok && n == low)) && n <= high => Ok(n),
        _ => {
            let from = if low_ok { "from" } else { "above" };
            Err(invalid(
                param,
                format!("expected a number {from} {low} to {high}"),
            ))
        }
    }
}

fn integer(param: Param, value: &Value, low: u64, high: u64) -> Result<u64, ParamError> {
    match value.as_u64() {
        Some(n) if (low..=high).contains(&n) => Ok(n),
        _ => Err(invalid(
            param,
            format!("expected an integer from {low} to {high}"),
        )),
    }
}

/// A loop limit: at most the run's own (`EACCES` above it: a session may
/// narrow the task's limits, never widen them).
fn narrowed(param: Param, value: &Value, low: u64, ceiling: u64) -> Result<u64, ParamError> {
    let n = value
        .as_u64()
        .filter(|n| *n >= low)
        .ok_or_else(|| invalid(param, format!("expected an integer of at least {low}")))?;
    if n > ceiling {
        let task_key = match param {
            Param::TimeoutMs => "limits.wall_ms",
            Param::MaxIterations => "limits.max_iterations",
            _ => "limits.max_total_tool_calls",
        };
        return Err(ParamError::Denied(format!(
            "{} {n} is wider than this run's {ceiling} ({task_key}); a session may only narrow it",
            param.key()
        )));
    }
    Ok(n)
}

fn stop(value: &Value) -> Result<Vec<String>, ParamError> {
    let list: Vec<String> = match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<_>>()
            .ok_or_else(|| invalid(Param::Stop, "expected a string or an array of strings"))?,
        _ => {
            return Err(invalid(
                Param::Stop,
                "expected a string or an array of strings",
            ))
        }
    };
    if list.is_empty() || list.len() > 4 || list.iter().any(|s| s.is_empty() || s.len() > MAX_NAME)
    {
        return Err(invalid(
            Param::Stop,
            "expected 1 to 4 sequences of 1 to 256 bytes each",
        ));
    }
    Ok(list)
}

fn response_format(value: &Value) -> Result<ResponseFormat, ParamError> {
    let param = Param::ResponseFormat;
    if value.to_string().len() > MAX_SCHEMA_BYTES {
        return Err(invalid(param, "the schema is over 64 KiB"));
    }
    let format: ResponseFormat = serde_json::from_value(value.clone()).map_err(|e| {
        invalid(param, format!("expected {{\"type\": \"text\"}}, {{\"type\": \"json_object\"}} or {{\"type\": \"json_schema\", \"json_schema\": {{\"name\", \"schema\"}}}} ({e})"))
    })?;
    if let ResponseFormat::JsonSchema { json_schema } = &format {
        if !crate::tools::valid_name(&json_schema.name) {
            return Err(invalid(
                param,
                "json_schema.name must match ^[a-zA-Z0-9_-]{1,64}$",
            ));
        }
        if json_schema.schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(invalid(
                param,
                "json_schema.schema must be an object schema ({\"type\": \"object\", ...})",
            ));
        }
    }
    Ok(format)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ceilings() -> Ceilings {
        Ceilings {
            max_iterations: 8,
            max_total_tool_calls: 32,
            wall: Duration::from_secs(60),
        }
    }

    #[test]
    fn each_param_is_checked_and_a_refusal_changes_nothing() {
        let mut p = RequestParams::default();
        let c = ceilings();
        set(&mut p, Param::Temperature, &json!(0.2), &c).unwrap();
        assert!(set(&mut p, Param::Temperature, &json!(3), &c).is_err());
        assert_eq!(p.temperature, Some(0.2), "a refused write changes nothing");
        set(&mut p, Param::Stop, &json!("END"), &c).unwrap();
        assert_eq!(p.stop, Some(vec!["END".to_string()]));
        assert!(set(&mut p, Param::Stop, &json!(["a", "b", "c", "d", "e"]), &c).is_err());
        assert!(set(&mut p, Param::TopP, &json!(0), &c).is_err());
        assert!(set(&mut p, Param::ToolChoice, &json!("sometimes"), &c).is_err());
        set(&mut p, Param::ToolChoice, &json!({"name": "convert"}), &c).unwrap();
        assert!(set(&mut p, Param::ResponseFormat, &json!({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "array"}}}), &c).is_err());
        set(&mut p, Param::Temperature, &Value::Null, &c).unwrap();
        assert_eq!(p.temperature, None, "null clears");
    }

    #[test]
    fn loop_limits_only_narrow() {
        let mut p = RequestParams::default();
        let c = ceilings();
        set(&mut p, Param::MaxIterations, &json!(3), &c).unwrap();
        let wider = set(&mut p, Param::MaxIterations, &json!(9), &c).unwrap_err();
        assert!(matches!(wider, ParamError::Denied(_)), "{wider}");
        assert!(
            wider.to_string().contains("limits.max_iterations"),
            "{wider}"
        );
        assert_eq!(p.max_iterations, Some(3));
        assert!(matches!(
            set(&mut p, Param::TimeoutMs, &json!(61_000), &c),
            Err(ParamError::Denied(_))
        ));
        set(&mut p, Param::MaxTotalToolCalls, &json!(0), &c).unwrap();
    }
}
