//! The console reads no more than it must: a sign-in body is capped
//! before it is read, other forms are capped, and an upload is read only
//! once the session may write. Raw HTTP, as an attacker sends it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use spear_tests::procs::rss_kib;
use spear_tests::tasks::{cluster_opts, ClusterOptions, CONSOLE_TOKEN, VIEWER_TOKEN};

/// The status code of an HTTP/1.1 answer.
fn status_code(answer: &str) -> Option<u16> {
    answer.split_whitespace().nth(1)?.parse().ok()
}

/// Sends the request head, `body`, then `pad` bytes more (stopping when
/// SMS closes); the status code SMS answered and how many of the `pad`
/// bytes it took before it stopped reading.
fn post(console: &str, path: &str, headers: &str, body: &[u8], pad: usize) -> (u16, usize) {
    let addr = console.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("{addr}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap_or_else(|e| panic!("{e}"));
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nOrigin: {console}\r\nContent-Length: {}\r\n{headers}Connection: close\r\n\r\n",
        body.len() + pad
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body);
    let chunk = vec![b'a'; 64 << 10];
    let mut left = pad;
    while left > 0 {
        let n = left.min(chunk.len());
        if stream.write_all(&chunk[..n]).is_err() {
            break; // SMS answered and closed: it stopped reading.
        }
        left -= n;
    }
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    let code = status_code(&text).unwrap_or_else(|| panic!("no status in {text:?}"));
    (code, pad - left)
}

/// A session cookie for `token`.
fn session(console: &str, token: &str) -> String {
    let addr = console.trim_start_matches("http://").trim_end_matches('/');
    let body = format!("token={token}");
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("{e}"));
    let head = format!(
        "POST /login HTTP/1.1\r\nHost: {addr}\r\nOrigin: {console}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(head.as_bytes())
        .unwrap_or_else(|e| panic!("{e}"));
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
        .lines()
        .find_map(|l| {
            l.strip_prefix("set-cookie: ")
                .or_else(|| l.strip_prefix("Set-Cookie: "))
        })
        .and_then(|c| c.split(';').next())
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no session: {answer}"))
}

#[test]
fn bodies_are_capped_before_they_are_read() {
    let c = cluster_opts(
        "limits",
        ClusterOptions {
            console: true,
            ..Default::default()
        },
    );
    let console = c.sms.console.clone();
    let form = "Content-Type: application/x-www-form-urlencoded\r\n";
    // A sign-in of 62 MB, sixteen at once: each refused past 4 KiB, and
    // SMS does not grow by what they sent.
    let pid = c
        .sms
        .proc
        .pid()
        .unwrap_or_else(|| panic!("SMS is not running"));
    let before = rss_kib(pid);
    let floods: Vec<_> = (0..16)
        .map(|_| {
            let console = console.clone();
            std::thread::spawn(move || post(&console, "/login", form, b"token=", 62 << 20))
        })
        .collect();
    for flood in floods {
        let (code, _) = flood.join().unwrap_or((0, 0));
        assert_eq!(code, 413, "a 62 MB sign-in was read");
    }
    let grown = rss_kib(pid).saturating_sub(before);
    assert!(
        grown < 64 << 10,
        "SMS grew {grown} KiB under 16 sign-in floods"
    );
    // A sign-in of the right size still works.
    assert!(session(&console, CONSOLE_TOKEN).starts_with("spear_console="));

    // A viewer's upload is refused before the module is read: the CSRF
    // field first, then a module of 60 MiB SMS never reads.
    let viewer = session(&console, VIEWER_TOKEN);
    let boundary = "XyZ";
    let start = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\nx\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"module\"; filename=\"m.wasm\"\r\n\r\n"
    );
    let headers =
        format!("Content-Type: multipart/form-data; boundary={boundary}\r\nCookie: {viewer}\r\n");
    let (code, taken) = post(&console, "/tasks", &headers, start.as_bytes(), 60 << 20);
    assert_eq!(code, 403, "a viewer's upload was accepted");
    assert!(
        taken < 16 << 20,
        "SMS read {taken} bytes of a viewer's upload"
    );
    // Any other form is capped at 64 KiB.
    let admin = session(&console, CONSOLE_TOKEN);
    let headers = format!("{form}Cookie: {admin}\r\n");
    let (code, _) = post(&console, "/explain", &headers, b"csrf=x&server=", 1 << 20);
    assert_eq!(code, 413, "a 1 MiB form was read");

    // Wrong tokens from one address: after ten, that address's wrong
    // tokens wait out a minute; the right token still signs in, so a
    // neighbour on the same address cannot keep the operator out.
    let wrong: &[u8] = b"token=not-the-token-0123456789";
    for _ in 0..10 {
        let (code, _) = post(&console, "/login", form, wrong, 0);
        assert_eq!(code, 401);
    }
    let (code, _) = post(&console, "/login", form, wrong, 0);
    assert_eq!(code, 429, "the eleventh sign-in was not throttled");
    let right = format!("token={CONSOLE_TOKEN}");
    let (code, _) = post(&console, "/login", form, right.as_bytes(), 0);
    assert_eq!(code, 303, "the operator was locked out by wrong tokens");
}

/// Opens `/events` for the session `cookie`; the status and the open
/// connection (the stream stays open while it is held).
fn live_view(console: &str, cookie: &str) -> (u16, TcpStream) {
    let addr = console.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("{e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap_or_else(|e| panic!("{e}"));
    let head = format!(
        "GET /events?topics=trust HTTP/1.1\r\nHost: {addr}\r\nCookie: {cookie}\r\nAccept: text/event-stream\r\n\r\n"
    );
    stream
        .write_all(head.as_bytes())
        .unwrap_or_else(|e| panic!("{e}"));
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !seen.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
        seen.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&seen);
    let code = status_code(&text).unwrap_or_else(|| panic!("no status in {text:?}"));
    (code, stream)
}

/// One session's live views are capped, so a viewer's script cannot take
/// every place: its 17th is refused (429) while an admin's still opens.
#[test]
fn one_session_cannot_hold_every_live_view() {
    let c = cluster_opts(
        "live-views",
        ClusterOptions {
            console: true,
            ..Default::default()
        },
    );
    let console = c.sms.console.clone();
    let viewer = session(&console, VIEWER_TOKEN);
    let held: Vec<TcpStream> = (0..16)
        .map(|i| {
            let (code, stream) = live_view(&console, &viewer);
            assert_eq!(code, 200, "live view {i}");
            stream
        })
        .collect();
    let (code, _) = live_view(&console, &viewer);
    assert_eq!(code, 429, "a session's 17th live view opened");
    let admin = session(&console, CONSOLE_TOKEN);
    let (code, _admin_view) = live_view(&console, &admin);
    assert_eq!(code, 200, "the admin's live view was refused");
    drop(held);
}

/// The status of `GET path` with the session `cookie`.
fn get_status(console: &str, path: &str, cookie: &str) -> u16 {
    let addr = console.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("{e}"));
    let head = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nCookie: {cookie}\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(head.as_bytes())
        .unwrap_or_else(|e| panic!("{e}"));
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    status_code(&String::from_utf8_lossy(&answer)).unwrap_or(0)
}

/// 1,030 viewer sign-ins (more than the 1,024 sessions a role keeps) sign
/// out the oldest viewer, never an admin: the admin's session still
/// reads an admin page.
#[test]
fn viewer_sign_ins_never_sign_an_admin_out() {
    let c = cluster_opts(
        "sessions",
        ClusterOptions {
            console: true,
            ..Default::default()
        },
    );
    let console = c.sms.console.clone();
    let admin = session(&console, CONSOLE_TOKEN);
    assert_eq!(get_status(&console, "/trust", &admin), 200);
    let first_viewer = session(&console, VIEWER_TOKEN);
    for _ in 0..1030 {
        session(&console, VIEWER_TOKEN);
    }
    assert_eq!(
        get_status(&console, "/trust", &admin),
        200,
        "the admin was signed out"
    );
    assert_ne!(
        get_status(&console, "/trust", &first_viewer),
        200,
        "the oldest viewer session outlived the cap"
    );
}
