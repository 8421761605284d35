//! Fleet quotas as operators write them (docs/quotas.md), checked the same
//! way by SMS and by nodes, and the one sentence a call past a quota gets.
//! Entry points: [`TaskQuota`] (a task config's `"quota"`), [`parse_period`]
//! and [`Spent`].
//!
//! A quota allows `max` units in each window of its period, windows
//! aligned to the Unix epoch: `"per": "1m"` refills on the minute. Fixed
//! windows are what lets every SMS replica and node agree on the window
//! from the clock alone, with nothing to coordinate but one counter.

use serde::{Deserialize, Serialize};

use crate::v1::{QuotaKey, QuotaMeter, Rate};

/// The shortest and longest period a quota may have.
pub const MIN_PERIOD_MS: u64 = 1_000;
pub const MAX_PERIOD_MS: u64 = 31 * 86_400_000;
/// The most dollars a cost quota may allow in one period.
pub const MAX_COST_USD: f64 = 1_000_000_000.0;

/// A task config's `"quota"`: across every run of the task, on every node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskQuota {
    /// Tool calls that reach a server.
    pub tool_calls: Option<RateSpec>,
    /// Model tokens, input and output, as the provider reports them.
    pub model_tokens: Option<RateSpec>,
    /// Model cost by the node's price table, in dollars.
    pub cost_usd: Option<CostSpec>,
    /// Each principal (person or workload) has the quota to themselves.
    #[serde(default)]
    pub per_principal: bool,
    /// What a node that cannot reach SMS does.
    #[serde(default)]
    pub on_unreachable: OnUnreachable,
}

/// `{"max": 3, "per": "1m"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateSpec {
    pub max: u64,
    pub per: String,
}

/// `{"max": 5, "per": "1d"}`, in dollars.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostSpec {
    pub max: f64,
    pub per: String,
}

/// What a node does with a quota'd call while it cannot reach SMS.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnUnreachable {
    /// The call is refused, with why (the safe default: a quota that
    /// cannot be counted is not held).
    #[default]
    Refuse,
    /// The call goes through uncounted.
    Allow,
}

/// Why a quota is refused; one sentence naming the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuotaError {
    #[error("{at}.per is '{per}'; write a number and a unit: s, m, h or d (\"30s\", \"1m\", \"1h\", \"1d\"), from 1s to 31d")]
    Period { at: String, per: String },
    #[error("{at}.max is 0; a quota allows at least 1 (remove it to allow any)")]
    Zero { at: String },
    #[error("{at}.max is {max}; write dollars from 0.000000001 to {MAX_COST_USD}")]
    Cost { at: String, max: String },
    #[error("{at} limits nothing: give a task \"tool_calls\", \"model_tokens\" or \"cost_usd\", a server \"calls\" or \"tools\", each {{\"max\": N, \"per\": \"1m\"}}")]
    Empty { at: String },
}

/// `"30s"`, `"1m"`, `"1h"`, `"7d"` in milliseconds.
pub fn parse_period(per: &str) -> Option<u64> {
    let per = per.trim();
    let split = per.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = per.split_at(split);
    let number: u64 = number.parse().ok()?;
    let unit_ms = match unit {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    let ms = number.checked_mul(unit_ms)?;
    (MIN_PERIOD_MS..=MAX_PERIOD_MS).contains(&ms).then_some(ms)
}

/// A period as operators write it: the largest unit that divides it.
pub fn period_text(per_ms: u64) -> String {
    for (unit, ms) in [("d", 86_400_000), ("h", 3_600_000), ("m", 60_000)] {
        if per_ms >= ms && per_ms.is_multiple_of(ms) {
            return format!("{}{unit}", per_ms / ms);
        }
    }
    format!("{}s", per_ms / 1000)
}

/// `spec` at `at` as a [`Rate`].
pub fn rate(at: &str, spec: &RateSpec) -> Result<Rate, QuotaError> {
    let per_ms = parse_period(&spec.per).ok_or_else(|| QuotaError::Period {
        at: at.to_string(),
        per: spec
            .per
            .chars()
            .take(40)
            .flat_map(char::escape_default)
            .collect(),
    })?;
    if spec.max == 0 {
        return Err(QuotaError::Zero { at: at.to_string() });
    }
    Ok(Rate {
        max: spec.max,
        per_ms,
    })
}

/// A cost quota in nano-dollars.
pub fn cost_rate(at: &str, spec: &CostSpec) -> Result<Rate, QuotaError> {
    let per_ms = rate(
        at,
        &RateSpec {
            max: 1,
            per: spec.per.clone(),
        },
    )?
    .per_ms;
    let nano = (spec.max * 1e9).round();
    if !spec.max.is_finite() || spec.max > MAX_COST_USD || nano < 1.0 {
        return Err(QuotaError::Cost {
            at: at.to_string(),
            max: spec.max.to_string(),
        });
    }
    Ok(Rate {
        max: nano as u64,
        per_ms,
    })
}

impl TaskQuota {
    /// Checks every limit; the error names the key.
    pub fn check(&self) -> Result<(), QuotaError> {
        if self.tool_calls.is_none() && self.model_tokens.is_none() && self.cost_usd.is_none() {
            return Err(QuotaError::Empty { at: "quota".into() });
        }
        for meter in [
            QuotaMeter::TaskToolCalls,
            QuotaMeter::TaskModelTokens,
            QuotaMeter::TaskCost,
        ] {
            self.rate(meter)?;
        }
        Ok(())
    }

    /// The rate of `meter`, if the quota limits it.
    pub fn rate(&self, meter: QuotaMeter) -> Result<Option<Rate>, QuotaError> {
        match meter {
            QuotaMeter::TaskToolCalls => self
                .tool_calls
                .as_ref()
                .map(|spec| rate("quota.tool_calls", spec))
                .transpose(),
            QuotaMeter::TaskModelTokens => self
                .model_tokens
                .as_ref()
                .map(|spec| rate("quota.model_tokens", spec))
                .transpose(),
            QuotaMeter::TaskCost => self
                .cost_usd
                .as_ref()
                .map(|spec| cost_rate("quota.cost_usd", spec))
                .transpose(),
            _ => Ok(None),
        }
    }
}

/// A server file's `"quota"`: calls to the server, or to one of its tools,
/// across the fleet.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerQuotaSpec {
    pub calls: Option<RateSpec>,
    #[serde(default)]
    pub tools: std::collections::BTreeMap<String, RateSpec>,
    #[serde(default)]
    pub on_unreachable: OnUnreachable,
}

impl ServerQuotaSpec {
    /// The quota as the registry carries it; the error names the key.
    pub fn to_proto(&self) -> Result<crate::v1::ServerQuota, QuotaError> {
        if self.calls.is_none() && self.tools.is_empty() {
            return Err(QuotaError::Empty { at: "quota".into() });
        }
        let calls = self
            .calls
            .as_ref()
            .map(|spec| rate("quota.calls", spec))
            .transpose()?;
        let tools = self
            .tools
            .iter()
            .map(|(tool, spec)| Ok((tool.clone(), rate(&format!("quota.tools.{tool}"), spec)?)))
            .collect::<Result<_, QuotaError>>()?;
        Ok(crate::v1::ServerQuota {
            calls,
            tools,
            allow_unreachable: self.on_unreachable == OnUnreachable::Allow,
        })
    }
}

/// The end of the window `now_ms` is in: when the quota refills.
pub fn refill_at(now_ms: u64, per_ms: u64) -> u64 {
    let per = per_ms.max(1);
    (now_ms / per).saturating_add(1).saturating_mul(per)
}

/// What a meter counts, for sentences.
fn units(meter: QuotaMeter, max: u64) -> String {
    match meter {
        QuotaMeter::TaskToolCalls | QuotaMeter::ServerCalls | QuotaMeter::ServerToolCalls => {
            format!("{max} tool call{}", if max == 1 { "" } else { "s" })
        }
        QuotaMeter::TaskModelTokens => format!("{max} model tokens"),
        QuotaMeter::TaskCost => format!("${}", max as f64 / 1e9),
        QuotaMeter::Unspecified => format!("{max}"),
    }
}

/// Whose quota a key is, and the config key that sets it.
pub fn describe(key: &QuotaKey) -> (String, &'static str) {
    let meter = key.meter();
    let whose = match meter {
        QuotaMeter::ServerCalls => format!("server '{}'", key.id),
        QuotaMeter::ServerToolCalls => format!("tool '{}' of server '{}'", key.tool, key.id),
        _ if key.principal.is_empty() => format!("task '{}'", key.id),
        _ => format!("task '{}' for {}", key.id, key.principal),
    };
    let setting = match meter {
        QuotaMeter::TaskToolCalls => "quota.tool_calls",
        QuotaMeter::TaskModelTokens => "quota.model_tokens",
        QuotaMeter::TaskCost => "quota.cost_usd",
        QuotaMeter::ServerCalls => "the server file's quota.calls",
        QuotaMeter::ServerToolCalls => "the server file's quota.tools",
        QuotaMeter::Unspecified => "quota",
    };
    (whose, setting)
}

/// A quota with nothing left in its window: the sentence a call past it
/// gets, naming the quota, its limit and when it refills.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{whose} has used its quota of {limit} per {per} ({setting}); it refills at {at} UTC, in {wait}")]
pub struct Spent {
    pub whose: String,
    pub limit: String,
    pub per: String,
    pub setting: &'static str,
    pub at: String,
    pub wait: String,
    /// When it refills (Unix ms), for the guest's and the metric's sake.
    pub refill_at_ms: u64,
}

impl Spent {
    pub fn new(key: &QuotaKey, rate: &Rate, refill_at_ms: u64, now_ms: u64) -> Spent {
        let (whose, setting) = describe(key);
        Spent {
            whose,
            limit: units(key.meter(), rate.max),
            per: period_text(rate.per_ms),
            setting,
            at: clock_text(refill_at_ms),
            wait: wait_text(refill_at_ms.saturating_sub(now_ms)),
            refill_at_ms,
        }
    }
}

/// `2026-11-28 08:31:00` for Unix ms (the civil calendar, UTC).
pub fn clock_text(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, day_secs) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        day_secs / 3600,
        day_secs % 3600 / 60,
        day_secs % 60
    )
}

/// `42 s`, `5 min`, `3 h`, `2 d`, rounded up.
pub fn wait_text(ms: u64) -> String {
    let secs = ms.div_ceil(1000).max(1);
    match secs {
        s if s < 120 => format!("{s} s"),
        s if s < 7_200 => format!("{} min", s.div_ceil(60)),
        s if s < 172_800 => format!("{} h", s.div_ceil(3_600)),
        s => format!("{} d", s.div_ceil(86_400)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_are_a_number_and_a_unit() {
        assert_eq!(parse_period("1m"), Some(60_000));
        assert_eq!(parse_period("30s"), Some(30_000));
        assert_eq!(parse_period("7d"), Some(7 * 86_400_000));
        for bad in [
            "",
            "m",
            "1",
            "1w",
            "0s",
            "-1m",
            "1.5h",
            "32d",
            "99999999999999999999d",
        ] {
            assert_eq!(parse_period(bad), None, "{bad:?}");
        }
        assert_eq!(period_text(60_000), "1m");
        assert_eq!(period_text(90_000), "90s");
        assert_eq!(period_text(86_400_000), "1d");
    }

    #[test]
    fn each_mistake_is_one_sentence_naming_the_key() {
        let parse = |json: &str| {
            serde_json::from_str::<TaskQuota>(json)
                .map_err(|e| e.to_string())
                .and_then(|q| q.check().map_err(|e| e.to_string()))
        };
        let zero = parse(r#"{"tool_calls": {"max": 0, "per": "1m"}}"#).unwrap_err();
        assert!(zero.contains("quota.tool_calls.max is 0"), "{zero}");
        let per = parse(r#"{"model_tokens": {"max": 5, "per": "1 week"}}"#).unwrap_err();
        assert!(per.contains("quota.model_tokens.per is '1 week'"), "{per}");
        let cost = parse(r#"{"cost_usd": {"max": -1, "per": "1d"}}"#).unwrap_err();
        assert!(cost.contains("quota.cost_usd.max is -1"), "{cost}");
        let empty = parse(r#"{"per_principal": true}"#).unwrap_err();
        assert!(empty.contains("quota limits nothing"), "{empty}");
        let typo = parse(r#"{"tool_call": {"max": 1, "per": "1m"}}"#).unwrap_err();
        assert!(typo.contains("unknown field `tool_call`"), "{typo}");
        let ok = parse(r#"{"cost_usd": {"max": 5, "per": "1d"}, "on_unreachable": "allow"}"#);
        assert!(ok.is_ok(), "{ok:?}");
    }

    #[test]
    fn cost_is_counted_in_nano_dollars() {
        let quota: TaskQuota =
            serde_json::from_str(r#"{"cost_usd": {"max": 5, "per": "1d"}}"#).unwrap();
        let rate = quota.rate(QuotaMeter::TaskCost).unwrap().unwrap();
        assert_eq!(rate.max, 5_000_000_000);
        assert_eq!(rate.per_ms, 86_400_000);
    }

    #[test]
    fn the_sentence_names_the_quota_its_limit_and_when_it_refills() {
        let key = QuotaKey {
            meter: QuotaMeter::TaskToolCalls as i32,
            id: "notes".into(),
            ..QuotaKey::default()
        };
        let rate = Rate {
            max: 3,
            per_ms: 60_000,
        };
        // 2026-11-28 08:30:18 UTC.
        let now = 1_795_854_618_000;
        let refill = refill_at(now, rate.per_ms);
        assert_eq!(refill % 60_000, 0);
        let text = Spent::new(&key, &rate, refill, now).to_string();
        assert_eq!(
            text,
            "task 'notes' has used its quota of 3 tool calls per 1m (quota.tool_calls); it refills at 2026-11-28 08:31:00 UTC, in 42 s"
        );
    }
}
