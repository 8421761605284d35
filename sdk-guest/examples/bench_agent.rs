//! The components benchmark's Rust guest (tests/benches/components.rs), as
//! tests/guests/bench/bench_agent.py: the input on stdin is `start` (one
//! host call), `chat N` (N model round trips, a session each) or `spin`.

use std::io::Read;

use spear_guest::Chat;

fn main() {
    let mut input = String::new();
    let _ = std::io::stdin().read_to_string(&mut input);
    let (what, n) = input.trim().split_once(' ').unwrap_or((input.trim(), "0"));
    let result = match what {
        "start" => Chat::new()
            .and_then(|chat| chat.get_param("model"))
            .map(drop),
        "chat" => (0..n.parse::<u32>().unwrap_or(0)).try_for_each(|_| {
            let chat = Chat::new()?;
            chat.write("user", "hi")?;
            chat.send_without_tools().map(drop)
        }),
        _ => loop {
            std::hint::black_box(0);
        },
    };
    if let Err(error) = result {
        eprintln!("bench-agent failed: {error}");
        std::process::exit(1);
    }
}
