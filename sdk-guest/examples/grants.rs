//! Prints what its task granted it through WASI: its arguments, its
//! environment, and the files under `/data`; then tries to write there.
//! Without grants it sees only its own name (argv[0], the task id).

fn main() {
    let args: Vec<String> = std::env::args().collect();
    println!("args: {args:?}");
    let mut env: Vec<(String, String)> = std::env::vars().collect();
    env.sort();
    println!("env: {env:?}");
    match std::fs::read_dir("/data") {
        Ok(entries) => {
            for entry in entries.flatten() {
                let path = entry.path();
                match std::fs::read_to_string(&path) {
                    Ok(text) => println!("{}: {}", path.display(), text.trim()),
                    Err(error) => println!("{}: {error}", path.display()),
                }
            }
        }
        Err(error) => println!("/data: {error}"),
    }
    match std::fs::write("/data/written.txt", "from the guest") {
        Ok(()) => println!("write: ok"),
        Err(error) => println!("write: refused ({error})"),
    }
}
