//! Structured output: the agent asks for JSON matching a schema, with its
//! own model params, and reads the answer straight into a Rust type.

use serde::Deserialize;
use spear_guest::{json, Chat, RequestParams};

#[derive(Debug, Deserialize)]
struct Forecast {
    city: String,
    temperature_c: f64,
    conditions: String,
}

fn main() {
    let result = (|| {
        let chat = Chat::new()?;
        chat.disable_mcp()?;
        chat.set(
            &RequestParams::new()
                .temperature(0.2)
                .max_tokens(300)
                .stop(&["\n\n\n"])
                .json_schema(
                    "forecast",
                    json!({"type": "object", "additionalProperties": false,
                        "properties": {"city": {"type": "string"}, "temperature_c": {"type": "number"},
                                       "conditions": {"type": "string"}},
                        "required": ["city", "temperature_c", "conditions"]}),
                ),
        )?;
        chat.write("user", "Give tomorrow's forecast for Paris.")?;
        chat.send_json::<Forecast>()
    })();
    match result {
        Ok(forecast) => println!(
            "city={} temperature_c={} conditions={}",
            forecast.city, forecast.temperature_c, forecast.conditions
        ),
        Err(error) => {
            eprintln!("structured-agent failed: {error}");
            std::process::exit(1);
        }
    }
}
