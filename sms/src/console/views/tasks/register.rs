//! Registering a task from the page: the module uploaded (written into
//! `--module-dir` under its digest) or named by URI, and its config,
//! checked by SMS as `sms tasks register`'s is.

use axum::extract::Multipart;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use maud::{html, Markup};
use sha2::{Digest, Sha256};
use spear_proto::v1::TaskSpec;

use crate::console::guard::{Signed, Visit};
use crate::console::page::{self, enc};
use crate::console::views::Failure;

/// The largest request the console reads: a module upload (only on the
/// register route; other forms are capped at [`crate::console::MAX_FORM`]).
pub const MAX_UPLOAD: usize = 64 << 20;

pub fn form(signed: &Signed, uploads: bool) -> Markup {
    html! {
        h2 { "Register a task" }
        form method="post" action="/tasks" enctype="multipart/form-data" class="stack" {
            (page::csrf(&signed.session))
            label for="task-id" { "Task id" }
            input id="task-id" type="text" name="id" required;
            @if uploads {
                label for="module-file" { "Module (.wasm) to upload" }
                input id="module-file" type="file" name="module" accept=".wasm,application/wasm";
                p class="muted" { "Or give a URI nodes fetch it from:" }
            } @else {
                p class="muted" { "Uploads need SMS's --module-dir (a directory nodes read); give the module's URI." }
            }
            label for="module-uri" { "Module URI (file:///… or https://…)" }
            input id="module-uri" type="text" name="module_uri";
            label for="module-sha" { "Module SHA-256 (computed for an upload)" }
            input id="module-sha" type="text" name="sha256";
            label for="task-config" { "Config (JSON, see docs/tasks.md)" }
            textarea id="task-config" name="config" { "{}" }
            label for="task-description" { "Description" }
            input id="task-description" type="text" name="description";
            p { button type="submit" class="primary" { "Register" } }
        }
    }
}

/// What the register form sent.
#[derive(Default)]
struct Registration {
    csrf: String,
    id: String,
    module: Option<Vec<u8>>,
    module_uri: String,
    sha256: String,
    config: String,
    description: String,
}

/// Reads the form in its order (the CSRF field first, as the page writes
/// it). An upload is read only once the session may write and the CSRF
/// field came before it: a viewer or a forged form never makes SMS read
/// 64 MiB.
async fn read_form(
    mut form: Multipart,
    session: &crate::console::session::Session,
) -> Result<Registration, Failure> {
    let bad = |e: axum::extract::multipart::MultipartError| {
        Failure::new(
            StatusCode::BAD_REQUEST,
            format!("the form could not be read: {e}"),
        )
    };
    let mut out = Registration::default();
    while let Some(field) = form.next_field().await.map_err(bad)? {
        let name = field.name().unwrap_or_default().to_string();
        if name == "module" {
            session.may_write(&out.csrf)?;
            let bytes = field.bytes().await.map_err(bad)?;
            if !bytes.is_empty() {
                out.module = Some(bytes.to_vec());
            }
            continue;
        }
        let text = field.text().await.map_err(bad)?;
        match name.as_str() {
            "csrf" => out.csrf = text,
            "id" => out.id = text.trim().to_string(),
            "module_uri" => out.module_uri = text.trim().to_string(),
            "sha256" => out.sha256 = text.trim().to_lowercase(),
            "config" => out.config = text,
            "description" => out.description = text,
            _ => {}
        }
    }
    Ok(out)
}

/// Writes an uploaded module into the module directory under its digest
/// (write, then rename: a node never reads half a module); its URI.
fn store_module(dir: &std::path::Path, bytes: &[u8], sha: &str) -> Result<String, Failure> {
    let path = dir.join(format!("{sha}.wasm"));
    let tmp = dir.join(format!(".{sha}.wasm.tmp"));
    let failed = |e: std::io::Error| {
        Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "cannot write the module into {}: {e}; check SMS's --module-dir",
                dir.display()
            ),
        )
    };
    std::fs::write(&tmp, bytes).map_err(failed)?;
    std::fs::rename(&tmp, &path).map_err(failed)?;
    Ok(format!("file://{}", path.display()))
}

pub async fn register(
    Visit { state, signed }: Visit,
    form: Multipart,
) -> Result<Response, Failure> {
    let form = read_form(form, &signed.session).await?;
    signed.session.may_write(&form.csrf)?;
    let (module_uri, sha256) = match (&form.module, &state.module_dir) {
        (Some(bytes), Some(dir)) => {
            let sha = hex::encode(Sha256::digest(bytes));
            if !form.sha256.is_empty() && form.sha256 != sha {
                return Err(Failure::new(
                    StatusCode::BAD_REQUEST,
                    format!("the uploaded module's SHA-256 is {sha}, not the {} given; upload the right file or clear the field", form.sha256),
                ));
            }
            (store_module(dir, bytes, &sha)?, sha)
        }
        (Some(_), None) => {
            return Err(Failure::new(
                StatusCode::BAD_REQUEST,
                "this SMS takes no uploads (no --module-dir); give the module's URI and SHA-256",
            ))
        }
        (None, _) => (form.module_uri.clone(), form.sha256.clone()),
    };
    let config = if form.config.trim().is_empty() {
        "{}".to_string()
    } else {
        form.config.clone()
    };
    state
        .api
        .register_task(TaskSpec {
            id: form.id.clone(),
            module_uri,
            module_sha256: sha256,
            config_json: config,
            description: form.description.clone(),
        })
        .await?;
    Ok(Redirect::to(&format!("/tasks/{}?notice=registered", enc(&form.id))).into_response())
}
