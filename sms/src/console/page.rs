//! The frame every console page shares: the head (one stylesheet, one
//! script, both served from the binary), the navigation, the signed-in
//! role and sign-out, and small helpers for tables that page and search.
//!
//! Everything is rendered with maud, which escapes every value it is
//! given: a string from a server file, a node or a guest is text, never
//! markup. No page holds inline script or style (the CSP forbids both).

use maud::{html, Markup, DOCTYPE};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde::Deserialize;

use super::session::Session;

/// Rows per page in every list.
pub const PER_PAGE: usize = 50;

/// The sections, in navigation order: (path, label).
const SECTIONS: &[(&str, &str)] = &[
    ("/", "Registry"),
    ("/nodes", "Nodes"),
    ("/tasks", "Tasks"),
    ("/explain", "Explain"),
    ("/trust", "Trust"),
    ("/audit", "Audit"),
    ("/usage", "Usage"),
    ("/oauth", "OAuth"),
    ("/accounts", "Accounts"),
];

/// Whether `session` sees section `path`: a person, their tasks and
/// accounts; an operator, everything but a person's accounts.
fn shown(session: &Session, path: &str) -> bool {
    match path {
        "/tasks" => true,
        "/accounts" => session.is_person(),
        _ => !session.is_person(),
    }
}

/// A whole page: `section` is the path of the navigation entry to mark,
/// `src` the URL its live regions are re-read from.
pub fn page(title: &str, section: &str, src: &str, session: &Session, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title, true))
            body {
                a class="skip" href="#main" { "Skip to content" }
                header {
                    span class="brand" { "Spear" }
                    nav aria-label="Sections" {
                        ul {
                            @for (path, label) in SECTIONS.iter().filter(|(path, _)| shown(session, path)) {
                                li {
                                    @if *path == section {
                                        a href=(path) aria-current="page" { (label) }
                                    } @else {
                                        a href=(path) { (label) }
                                    }
                                }
                            }
                        }
                    }
                    span class="role" data-role=(session.role.name()) {
                        "Signed in as "
                        @match &session.person {
                            Some(person) => { (person.principal.label()) }
                            None => { (session.role.name()) }
                        }
                    }
                    form method="post" action="/logout" class="inline" {
                        input type="hidden" name="csrf" value=(session.csrf);
                        button type="submit" { "Sign out" }
                    }
                    span id="live" class="live" aria-live="polite" { "" }
                }
                main id="main" data-src=(src) {
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

/// A page for someone not signed in (the sign-in form, or a refusal).
pub fn bare(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title, false))
            body {
                main id="main" class="narrow" {
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

/// The head: the title, the stylesheet and, for signed-in pages, the
/// script of the live parts.
fn head(title: &str, script: bool) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            meta name="viewport" content="width=device-width, initial-scale=1";
            title { (title) " · Spear console" }
            link rel="stylesheet" href="/assets/console.css";
            @if script { script src="/assets/console.js" defer {} }
        }
    }
}

/// The hidden CSRF field every write form carries.
pub fn csrf(session: &Session) -> Markup {
    html! { input type="hidden" name="csrf" value=(session.csrf); }
}

/// A form of one button that posts to `action` (with the CSRF field):
/// `data-action` names it for scripts and tests.
pub fn post_button(session: &Session, action: &str, label: &str, data_action: &str) -> Markup {
    html! {
        form method="post" action=(action) class="inline" {
            (csrf(session))
            button type="submit" class="primary" data-action=(data_action) { (label) }
        }
    }
}

/// A message box: what happened, for the result of a write.
pub fn notice(kind: &str, text: &str) -> Markup {
    html! { p class={"notice " (kind)} role=(if kind == "error" { "alert" } else { "status" }) { (text) } }
}

/// What [`enc`] escapes: all but RFC 3986's unreserved characters.
const ESCAPED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// `segment` safe inside a URL path or query.
pub fn enc(segment: &str) -> String {
    utf8_percent_encode(segment, ESCAPED).to_string()
}

/// A section's own page, whose live regions are re-read from the
/// section's path itself.
pub fn section_page(title: &str, section: &str, session: &Session, body: Markup) -> Markup {
    page(title, section, section, session, body)
}

/// A section's list at `paging`'s place: live regions are re-read from
/// that place, so a refresh keeps the page and the search.
pub fn list_page(
    title: &str,
    section: &str,
    paging: &Paging,
    session: &Session,
    body: Markup,
) -> Markup {
    page(title, section, &paging.src(section), session, body)
}

/// A list's place: which page, and what to search for.
#[derive(Debug, Default, Deserialize)]
pub struct Paging {
    #[serde(default)]
    pub q: String,
    #[serde(default)]
    pub page: usize,
}

impl Paging {
    /// This place in the list at `base`, as a URL.
    pub fn src(&self, base: &str) -> String {
        format!("{base}?q={}&page={}", enc(&self.q), self.page)
    }
}

/// Rows `paging` shows of `all` (already filtered), and the pager.
pub fn paged<T>(all: Vec<T>, paging: &Paging, base: &str) -> (Vec<T>, Markup) {
    let total = all.len();
    let pages = total.div_ceil(PER_PAGE).max(1);
    let page = paging.page.min(pages - 1);
    let rows: Vec<T> = all
        .into_iter()
        .skip(page * PER_PAGE)
        .take(PER_PAGE)
        .collect();
    let link = |page: usize| {
        Paging {
            q: paging.q.clone(),
            page,
        }
        .src(base)
    };
    let pager = html! {
        nav class="pager" aria-label="Pages" {
            span { (total) " in all · page " (page + 1) " of " (pages) }
            @if page > 0 { " " a href=(link(page - 1)) rel="prev" { "← previous" } }
            @if page + 1 < pages { " " a href=(link(page + 1)) rel="next" { "next →" } }
        }
    };
    (rows, pager)
}

/// The search box of a list at `base`.
pub fn search(base: &str, paging: &Paging, label: &str) -> Markup {
    html! {
        form method="get" action=(base) class="search" role="search" {
            label { (label) " " input type="search" name="q" value=(paging.q); }
            button type="submit" { "Search" }
        }
    }
}

/// Whether `text` holds `q` (case-insensitive); an empty `q` matches all.
pub fn matches(q: &str, texts: &[&str]) -> bool {
    if q.is_empty() {
        return true;
    }
    let q = q.to_lowercase();
    texts.iter().any(|t| t.to_lowercase().contains(&q))
}

/// Unix milliseconds as UTC (`2026-11-26 14:03:07`); empty for 0.
pub fn time(ms: u64) -> String {
    if ms == 0 {
        return String::new();
    }
    let nanos = i128::from(ms) * 1_000_000;
    match time::OffsetDateTime::from_unix_timestamp_nanos(nanos) {
        Ok(t) => format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        ),
        Err(_) => ms.to_string(),
    }
}

/// A region the script refreshes when an event of one of `topics` comes.
pub fn live(id: &str, topics: &str, body: Markup) -> Markup {
    html! { section id=(id) data-live=(topics) { (body) } }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_page_by_fifty_and_clamp_past_the_end() {
        let all: Vec<usize> = (0..120).collect();
        let paging = Paging {
            q: String::new(),
            page: 2,
        };
        let (rows, pager) = paged(all.clone(), &paging, "/");
        assert_eq!(rows, (100..120).collect::<Vec<_>>());
        assert!(pager.into_string().contains("page 3 of 3"));
        let far = Paging {
            q: "x".into(),
            page: 99,
        };
        let (rows, _) = paged(all, &far, "/");
        assert_eq!(rows.len(), 20);
    }

    #[test]
    fn search_is_case_insensitive_and_segments_are_escaped() {
        assert!(matches("FS", &["fs-agent"]));
        assert!(!matches("gpu", &["fs-agent", "files.json"]));
        assert_eq!(enc("a b/<c>?d-e_f.g~"), "a%20b%2F%3Cc%3E%3Fd-e_f.g~");
    }
}
