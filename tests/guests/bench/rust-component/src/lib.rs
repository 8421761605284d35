//! The components benchmark's Rust component: `start` (one host call),
//! `chat N` (N model round trips, a session each) or `spin`, as
//! sdk-guest/examples/bench_agent.rs does through the core ABI.

wit_bindgen::generate!({ world: "agent", path: "../../../../wit" });

use spear::agent::cchat::{SendMode, Session};

struct Bench;

impl Guest for Bench {
    fn run(input: String, _facts: Facts) -> Result<String, String> {
        let (what, n) = input.trim().split_once(' ').unwrap_or((input.trim(), "0"));
        let refused = |r: spear::agent::cchat::Refusal| r.sentence;
        match what {
            "start" => Session::create()
                .and_then(|chat| chat.get_param("model"))
                .map_err(refused),
            "chat" => {
                for _ in 0..n.parse::<u32>().unwrap_or(0) {
                    let chat = Session::create().map_err(refused)?;
                    chat.write_msg("user", "hi").map_err(refused)?;
                    chat.send(SendMode::NoTools).map_err(refused)?;
                }
                Ok("done".into())
            }
            _ => loop {
                std::hint::black_box(0);
            },
        }
    }
}

export!(Bench);
