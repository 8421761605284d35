//! What a model costs: the operator's price table (`[llm.prices]` in the
//! node's config), in US dollars per million tokens, and the cost of one
//! model request in nano-dollars, an integer, so that a run's cost, the sum
//! of its requests', and `sms usage`'s total, the sum of the records', are
//! the same number however they are added up.
//!
//! ```toml
//! [llm.prices."gpt-4o-mini"]
//! input = 0.15      # USD per million input tokens
//! output = 0.60     # USD per million output tokens
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;

/// The most a price may be, in USD per million tokens: well above any
/// model's, low enough that no request's cost overflows.
const MAX_PRICE: f64 = 10_000.0;

/// One model's prices, as written.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceSection {
    /// USD per million input (prompt) tokens.
    pub input: f64,
    /// USD per million output (completion) tokens.
    pub output: f64,
}

/// A price table entry that cannot be used: one sentence.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("[llm.prices.\"{model}\"] {field} = {value}: a price is USD per million tokens, from 0 to {MAX_PRICE}, with at most three decimals (0.15 is fifteen cents)")]
pub struct BadPrice {
    pub model: String,
    pub field: &'static str,
    pub value: f64,
}

/// Nano-dollars per token, for a price in USD per million tokens.
fn per_token(model: &str, field: &'static str, value: f64) -> Result<u64, BadPrice> {
    let nano = value * 1000.0;
    let whole = nano.round();
    if !value.is_finite() || !(0.0..=MAX_PRICE).contains(&value) || (nano - whole).abs() > 1e-6 {
        return Err(BadPrice {
            model: model.to_string(),
            field,
            value,
        });
    }
    Ok(whole as u64)
}

/// One model's price per token, in nano-dollars.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Price {
    input: u64,
    output: u64,
}

/// The node's price table, by model.
#[derive(Debug, Clone, Default)]
pub struct Prices {
    by_model: BTreeMap<String, Price>,
}

impl Prices {
    /// No prices: nothing is priced.
    pub fn none() -> &'static Prices {
        static NONE: Prices = Prices {
            by_model: BTreeMap::new(),
        };
        &NONE
    }

    /// The table `[llm.prices]` declares, or the first bad entry.
    pub fn from_sections(sections: &BTreeMap<String, PriceSection>) -> Result<Prices, BadPrice> {
        let mut by_model = BTreeMap::new();
        for (model, section) in sections {
            let price = Price {
                input: per_token(model, "input", section.input)?,
                output: per_token(model, "output", section.output)?,
            };
            by_model.insert(model.clone(), price);
        }
        Ok(Prices { by_model })
    }

    /// What `input` and `output` tokens of `model` cost, in nano-dollars;
    /// `None` when the table does not price the model.
    pub fn cost(&self, model: &str, input: u64, output: u64) -> Option<u64> {
        let price = self.by_model.get(model)?;
        Some(
            input
                .saturating_mul(price.input)
                .saturating_add(output.saturating_mul(price.output)),
        )
    }
}

/// Nano-dollars as US dollars, for what people read.
pub fn usd(nano: u64) -> f64 {
    nano as f64 / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(input: f64, output: f64) -> Result<Prices, BadPrice> {
        let mut sections = BTreeMap::new();
        sections.insert("m".to_string(), PriceSection { input, output });
        Prices::from_sections(&sections)
    }

    #[test]
    fn a_request_costs_its_tokens_at_the_model_s_prices() {
        let prices = table(0.15, 0.6).unwrap();
        // 1M input tokens at $0.15 and 1M output at $0.60: 75 cents.
        assert_eq!(prices.cost("m", 1_000_000, 1_000_000), Some(750_000_000));
        assert_eq!(prices.cost("m", 10, 5), Some(10 * 150 + 5 * 600));
        assert_eq!(prices.cost("other", 10, 5), None);
        assert!((usd(750_000_000) - 0.75).abs() < 1e-12);
    }

    #[test]
    fn bad_prices_are_one_sentence_naming_the_entry() {
        for bad in [-1.0, f64::NAN, 20_000.0, 0.0001] {
            let error = table(bad, 1.0).unwrap_err();
            assert_eq!(error.field, "input");
            assert!(
                error.to_string().starts_with("[llm.prices.\"m\"] input = "),
                "{error}"
            );
        }
        assert!(table(0.0, 0.0).is_ok());
    }
}
