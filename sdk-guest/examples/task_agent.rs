//! An agent that narrows nothing itself: its session gets the servers and
//! tools its task's config gives by default. Reads the question from stdin
//! (or uses a default) and prints the model's answer.

use std::io::Read;

use spear_guest::Chat;

fn main() {
    let mut question = String::new();
    let _ = std::io::stdin().read_to_string(&mut question);
    if question.trim().is_empty() {
        question = "Use your tools, then answer.".into();
    }
    let result = (|| {
        let chat = Chat::new()?;
        chat.write("user", question.trim())?;
        chat.send()
    })();
    match result {
        Ok(reply) => println!("{}", reply.content),
        Err(error) => {
            eprintln!("task-agent failed: {error}");
            std::process::exit(1);
        }
    }
}
