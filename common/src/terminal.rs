//! The one way the `sms` and `spearlet` commands write to a terminal.
//!
//! What they print is full of text from peers: a server's tool names,
//! descriptions and results, a node's problem reports, audit records,
//! a guest's output. Any of it may carry escape sequences (`ESC[2J`
//! clears the screen, an OSC sequence retitles the window, BEL rings),
//! bidirectional overrides that make `exe.txt` read `txt.exe`, or a
//! carriage return that overwrites the line it is on. So every line goes
//! through here: [`safe_println!`](crate::safe_println) and its siblings
//! escape each such character of the whole text as `\u{..}` (keeping
//! newlines and tabs), and [`print_json`] writes JSON with them as JSON
//! escapes, so it stays valid JSON that says the same. A caller need not
//! know which of its fields came from a peer; single-line fields still go
//! through [`printable`](crate::text::printable) as well, so a newline in
//! one cannot forge a line of its own (docs/security.md, "Text from
//! peers").
//!
//! The crates that print (`sms`, `spearlet`) refuse `std`'s print macros
//! in their `clippy.toml`, so nothing prints around this module.

use std::fmt;
use std::io::Write;

use crate::text::{printable_json, printable_lines};

/// Which stream a line goes to.
#[derive(Debug, Clone, Copy)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Writes `bytes` whole to `stream`. A failed write panics with the
/// message `std`'s `println!` panics with, so
/// [`quiet_on_closed_stdout`](crate::process::quiet_on_closed_stdout)
/// ends a command whose reader went away as it always has.
fn write_all(stream: Stream, bytes: &[u8]) {
    let (written, name) = match stream {
        Stream::Stdout => {
            let mut out = std::io::stdout().lock();
            (out.write_all(bytes).and_then(|()| out.flush()), "stdout")
        }
        Stream::Stderr => (std::io::stderr().lock().write_all(bytes), "stderr"),
    };
    if let Err(error) = written {
        panic!("failed printing to {name}: {error}");
    }
}

/// Formats `args`, escapes what a terminal would obey (newlines and tabs
/// kept), and writes it, with a newline when `line`. What the macros call.
pub fn print(stream: Stream, line: bool, args: fmt::Arguments<'_>) {
    let mut text = printable_lines(&fmt::format(args)).into_owned();
    if line {
        text.push('\n');
    }
    write_all(stream, text.as_bytes());
}

/// Writes JSON text and a newline to stdout with every character a
/// terminal acts on as a JSON escape ([`printable_json`]).
pub fn print_json(json: &str) {
    let mut text = printable_json(json).into_owned();
    text.push('\n');
    write_all(Stream::Stdout, text.as_bytes());
}

/// `print!` with every character a terminal would obey escaped
/// ([`print`](crate::terminal::print)).
#[macro_export]
macro_rules! safe_print {
    ($($arg:tt)*) => {
        $crate::terminal::print($crate::terminal::Stream::Stdout, false, format_args!($($arg)*))
    };
}

/// `println!` with every character a terminal would obey escaped.
#[macro_export]
macro_rules! safe_println {
    ($($arg:tt)*) => {
        $crate::terminal::print($crate::terminal::Stream::Stdout, true, format_args!($($arg)*))
    };
}

/// `eprint!` with every character a terminal would obey escaped.
#[macro_export]
macro_rules! safe_eprint {
    ($($arg:tt)*) => {
        $crate::terminal::print($crate::terminal::Stream::Stderr, false, format_args!($($arg)*))
    };
}

/// `eprintln!` with every character a terminal would obey escaped.
#[macro_export]
macro_rules! safe_eprintln {
    ($($arg:tt)*) => {
        $crate::terminal::print($crate::terminal::Stream::Stderr, true, format_args!($($arg)*))
    };
}
