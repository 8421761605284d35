/*
 * spear.h - the C SDK for Spear core-module guests (wasm32-wasi).
 *
 * A guest is a WebAssembly module the node runs for a task: it reads its
 * input on stdin, talks to the task's model through chat sessions (the
 * `cchat_*` functions of import module "spear", docs/guest-api.md), and
 * prints its answer on stdout. This header declares those imports and a
 * thin layer over them: sessions, params, messages, sends, replies read
 * into growing buffers, guest tools with C callbacks, error sentences, and
 * the small JSON writer and reader that all of it needs.
 *
 * Header-only, stb style: include it anywhere, and in exactly one .c file
 * define SPEAR_IMPLEMENTATION first:
 *
 *     #define SPEAR_IMPLEMENTATION
 *     #include "spear.h"
 *
 * Build (Debian's clang 14 with the wasi-libc, libclang-rt-dev-wasm32 and
 * lld packages, which put the WASI sysroot where clang looks by default,
 * /usr/include/wasm32-wasi and /usr/lib/wasm32-wasi), from sdk-guest/c:
 *
 *     clang --target=wasm32-wasi -O2 -std=c11 -Wall -Wextra -Werror -I. \
 *         -Wl,--strip-debug -o fs_agent.wasm examples/fs_agent.c
 *
 * (--strip-debug drops the DWARF that Debian's libc.a carries: about 50 KB
 * instead of 194; function names stay, for the node's backtraces.) With
 * wasi-sdk, add --sysroot=<wasi-sdk>/share/wasi-sysroot. The module
 * exports `_start` (from WASI's crt1), `memory`, and the two guest-tool
 * exports `spear_alloc` and `spear_tool_call` (see "Guest tools").
 *
 * Off wasm (no __wasm__), every raw import is a stub that returns -ENOSYS,
 * so the pure parts (buffers, JSON, errors) compile and test natively.
 *
 * Conventions:
 *   - Functions return 0 (or a count or id) on success and a negative
 *     errno on failure: -SPEAR_EACCES, -SPEAR_EINVAL, ... The numbers are
 *     Linux's, as the node uses them (sdk-guest/src/errno.rs).
 *   - After a failed call, spear_last_error() is the node's one-sentence
 *     reason ("permission denied: server 'x' is not in the task's
 *     mcp.allowed_server_ids"), or the SDK's own when the SDK refused, or
 *     empty; spear_perror() prints it, or what the errno means.
 *   - Functions that read something into a spear_buf replace its contents;
 *     functions that build JSON append to it.
 *   - Text is UTF-8; the node refuses any other bytes with -EINVAL.
 *   - A guest is single-threaded: the SDK keeps its state in globals.
 */
#ifndef SPEAR_H
#define SPEAR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Errno values (sdk-guest/src/errno.rs) ------------------------------ */

#define SPEAR_ENOENT 2     /* no such param, tool or reply */
#define SPEAR_EIO 5        /* the provider or a loop limit ended the send */
#define SPEAR_EBADF 9      /* the session is closed or unknown */
#define SPEAR_EAGAIN 11    /* a fleet quota is spent until it refills */
#define SPEAR_ENOMEM 12    /* the run's host memory (or the guest's malloc) */
#define SPEAR_EACCES 13    /* the task does not allow this */
#define SPEAR_EFAULT 14    /* a pointer outside guest memory */
#define SPEAR_EBUSY 16     /* a cchat call from inside a guest tool callback */
#define SPEAR_EEXIST 17    /* a guest tool of the session has that name */
#define SPEAR_EINVAL 22    /* a malformed argument */
#define SPEAR_EMFILE 24    /* too many open sessions */
#define SPEAR_ENOSPC 28    /* the session is full (or a buffer too small) */
#define SPEAR_ENOSYS 38    /* not running on a Spear node */
#define SPEAR_EBADMSG 74   /* the answer is not the JSON asked for */
#define SPEAR_ETIMEDOUT 110 /* the session deadline passed */
#define SPEAR_EDQUOT 122   /* a run budget (requests, tokens, tool calls) */

/* ---- cchat_send flags --------------------------------------------------- */

/* One request with the session's tools offered; the calls the model asks
 * for come back in the reply's `tool_calls`, unrun, for the guest. */
#define SPEAR_SEND_ONCE 0u
/* Run the tool loop: every call the model makes (MCP and guest tools) is
 * executed, until it answers. What most agents want. */
#define SPEAR_SEND_AUTO_TOOL_CALLS 1u
/* Offer no tools in this send. */
#define SPEAR_SEND_NO_TOOLS 2u

/* The longest sentence cchat_last_error hands back, in bytes. */
#define SPEAR_SENTENCE_MAX 1024
/* How deeply the JSON reader lets arrays and objects nest (serde_json's
 * default limit too); deeper documents are rejected, never recursed into. */
#define SPEAR_JSON_MAX_DEPTH 128

/* ---- The raw imports of module "spear" (docs/guest-api.md) --------------
 *
 * Pointers and lengths are offsets into the guest's memory. An output is a
 * buffer plus `out_len`: the caller stores the buffer's capacity there, and
 * the host stores the length it wrote, or, with -ENOSPC, the size it needs
 * (nothing is written then; call again with a buffer that large). Prefer
 * the friendly functions below, which do that dance for you.
 */
#ifdef __wasm__
#define SPEAR__IMPORT(name) __attribute__((import_module("spear"), import_name(name)))

SPEAR__IMPORT("cchat_create") int32_t cchat_create(void);
SPEAR__IMPORT("cchat_ctl_set_param")
int32_t cchat_ctl_set_param(int32_t handle, const uint8_t *key, uint32_t key_len,
                            const uint8_t *value, uint32_t value_len);
SPEAR__IMPORT("cchat_ctl_get_param")
int32_t cchat_ctl_get_param(int32_t handle, const uint8_t *key, uint32_t key_len,
                            uint8_t *out, uint32_t *out_len);
SPEAR__IMPORT("cchat_write_msg")
int32_t cchat_write_msg(int32_t handle, const uint8_t *role, uint32_t role_len,
                        const uint8_t *text, uint32_t text_len);
SPEAR__IMPORT("cchat_send") int32_t cchat_send(int32_t handle, uint32_t flags);
SPEAR__IMPORT("cchat_recv") int32_t cchat_recv(int32_t handle, uint8_t *out, uint32_t *out_len);
SPEAR__IMPORT("cchat_close") int32_t cchat_close(int32_t handle);
SPEAR__IMPORT("cchat_last_error") int32_t cchat_last_error(uint8_t *out, uint32_t *out_len);
SPEAR__IMPORT("cchat_write_fn")
int32_t cchat_write_fn(int32_t handle, const uint8_t *spec, uint32_t spec_len);
SPEAR__IMPORT("cchat_call_tool")
int32_t cchat_call_tool(int32_t handle, const uint8_t *call, uint32_t call_len, uint8_t *out,
                        uint32_t *out_len);

#define SPEAR__EXPORT(name) __attribute__((export_name(name)))
#else
/* Off wasm there is no node: every call says so, like the Rust SDK's. */
static inline int32_t cchat_create(void) { return -SPEAR_ENOSYS; }
static inline int32_t cchat_ctl_set_param(int32_t h, const uint8_t *k, uint32_t kl,
                                          const uint8_t *v, uint32_t vl) {
    (void)h, (void)k, (void)kl, (void)v, (void)vl;
    return -SPEAR_ENOSYS;
}
static inline int32_t cchat_ctl_get_param(int32_t h, const uint8_t *k, uint32_t kl, uint8_t *o,
                                          uint32_t *ol) {
    (void)h, (void)k, (void)kl, (void)o, (void)ol;
    return -SPEAR_ENOSYS;
}
static inline int32_t cchat_write_msg(int32_t h, const uint8_t *r, uint32_t rl, const uint8_t *t,
                                      uint32_t tl) {
    (void)h, (void)r, (void)rl, (void)t, (void)tl;
    return -SPEAR_ENOSYS;
}
static inline int32_t cchat_send(int32_t h, uint32_t flags) {
    (void)h, (void)flags;
    return -SPEAR_ENOSYS;
}
static inline int32_t cchat_recv(int32_t h, uint8_t *o, uint32_t *ol) {
    (void)h, (void)o, (void)ol;
    return -SPEAR_ENOSYS;
}
static inline int32_t cchat_close(int32_t h) {
    (void)h;
    return -SPEAR_ENOSYS;
}
static inline int32_t cchat_last_error(uint8_t *o, uint32_t *ol) {
    (void)o, (void)ol;
    return -SPEAR_ENOSYS;
}
static inline int32_t cchat_write_fn(int32_t h, const uint8_t *s, uint32_t sl) {
    (void)h, (void)s, (void)sl;
    return -SPEAR_ENOSYS;
}
static inline int32_t cchat_call_tool(int32_t h, const uint8_t *c, uint32_t cl, uint8_t *o,
                                      uint32_t *ol) {
    (void)h, (void)c, (void)cl, (void)o, (void)ol;
    return -SPEAR_ENOSYS;
}

#define SPEAR__EXPORT(name)
#endif

/* ---- Growing buffers ---------------------------------------------------- */

/* A heap byte buffer. `data` is NULL until the first write, and then always
 * NUL-terminated (data[len] == 0), so text in it can be printed with %s;
 * decoded JSON may still hold NUL bytes (\u0000), which `len` counts. */
typedef struct spear_buf {
    char *data;
    size_t len;
    size_t cap; /* bytes allocated, the terminating NUL included */
} spear_buf;

#define SPEAR_BUF_INIT {NULL, 0, 0}

/* Makes room for `extra` more bytes (and the NUL). 0, or -SPEAR_ENOMEM. */
int spear_buf_reserve(spear_buf *buf, size_t extra);
/* Appends `len` bytes. 0, or -SPEAR_ENOMEM. */
int spear_buf_append(spear_buf *buf, const char *bytes, size_t len);
/* Appends a NUL-terminated string. */
int spear_buf_puts(spear_buf *buf, const char *text);
/* Appends printf-formatted text. */
int spear_buf_printf(spear_buf *buf, const char *format, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Empties the buffer, keeping its memory. */
void spear_buf_clear(spear_buf *buf);
/* Frees the memory; the buffer is empty and reusable afterwards. */
void spear_buf_free(spear_buf *buf);

/* ---- JSON --------------------------------------------------------------- */

/* Appends `text` as a JSON string, quotes included: `"` and `\` escaped,
 * control characters as \b \f \n \r \t or \u00XX, every other byte (UTF-8
 * included) as it is. 0, or -SPEAR_ENOMEM. */
int spear_json_escape(spear_buf *out, const char *text, size_t len);
/* Appends ["a","b",...]: the n strings, each escaped. */
int spear_json_string_array(spear_buf *out, const char *const *items, size_t n);

/* 0 when json[0..len) is exactly one well-formed JSON value (white space
 * around it allowed, strings valid UTF-8, at most SPEAR_JSON_MAX_DEPTH
 * levels), else -SPEAR_EINVAL. */
int spear_json_validate(const char *json, size_t len);
/* Finds member `key` of the object json[0..len), checking the whole
 * document: *value and *value_len are the member's raw JSON text (a
 * string with its quotes, a number, an object...). With duplicate keys the
 * last one counts, as in serde_json. 0, -SPEAR_ENOENT when the object has
 * no such member, -SPEAR_EINVAL when json is not a well-formed object. */
int spear_json_get(const char *json, size_t len, const char *key, const char **value,
                   size_t *value_len);
/* Decodes the raw JSON string value[0..len) (quotes included) into UTF-8,
 * \uXXXX escapes and surrogate pairs included; a lone surrogate is
 * malformed. Replaces out's contents. 0, -SPEAR_EINVAL or -SPEAR_ENOMEM. */
int spear_json_unescape(const char *value, size_t len, spear_buf *out);
/* spear_json_get + spear_json_unescape: member `key` as text in out.
 * -SPEAR_ENOENT when it is missing or null, -SPEAR_EINVAL when it is not a
 * string (or json is malformed). */
int spear_json_get_string(const char *json, size_t len, const char *key, spear_buf *out);
/* Member `key` as a number. -SPEAR_ENOENT when missing or null,
 * -SPEAR_EINVAL when not a number. */
int spear_json_get_number(const char *json, size_t len, const char *key, double *out);
/* The number of elements of the JSON array value[0..len), or -SPEAR_EINVAL. */
int spear_json_array_len(const char *value, size_t len);
/* Element `index` of the array value[0..len) as raw JSON text. 0,
 * -SPEAR_ENOENT past the end, -SPEAR_EINVAL when not a well-formed array. */
int spear_json_array_at(const char *value, size_t len, size_t index, const char **elem,
                        size_t *elem_len);

/* ---- Text helpers --------------------------------------------------------- */

/* 1 when text[0..len) is valid UTF-8 (what the node accepts), else 0. */
int spear_utf8_valid(const char *text, size_t len);
/* The byte length of the white-space character at text (Unicode
 * White_Space, as Rust's char::is_whitespace), or 0 when there is none. */
size_t spear_space_len(const char *text, size_t len);
/* Trims white space at both ends, as Rust's str::trim: *start and *out_len
 * describe what is left of text[0..len). */
void spear_trim(const char *text, size_t len, size_t *start, size_t *out_len);

/* ---- Errors --------------------------------------------------------------- */

/* The sentence of the last failed SDK call: the node's (what
 * cchat_last_error said right after the failure), the SDK's own when the
 * failure was the guest's (malformed JSON, malloc failing), or "" when
 * neither gave one. A successful call leaves it as it was. */
const char *spear_last_error(void);
/* What an errno means, in the Rust SDK's words ("the task does not allow
 * this"); `code` may be negative, as returned. Unknown codes are formatted
 * into a static buffer. */
const char *spear_strerror(int code);
/* The errno's name ("EACCES"), or "E?" for an unknown one. */
const char *spear_errname(int code);
/* Prints "prefix: sentence" and a newline to stderr: spear_last_error(),
 * or spear_strerror(code) when that is empty (as Rust's Error displays). */
void spear_perror(const char *prefix, int code);

/* ---- Sessions ------------------------------------------------------------- */

/* One chat session on the node. A zeroed spear_chat is "not open", so
 * spear_chat_close on one that failed to open is harmless. */
typedef struct spear_chat {
    int32_t handle;
} spear_chat;

/* Opens a session with the task's defaults (its MCP servers, backend and
 * model). 0, or -SPEAR_EMFILE past the run's open sessions, ... */
int spear_chat_create(spear_chat *chat);
/* Closes the session and forgets its guest tools. 0 for a chat never
 * opened too. */
int spear_chat_close(spear_chat *chat);

/* Sets a session or request param to a JSON value ("null" clears a
 * request param): spear_set_param(&chat, "temperature", "0.2"). Writes can
 * only narrow the task: a widening one is -SPEAR_EACCES and changes
 * nothing. */
int spear_set_param(spear_chat *chat, const char *key, const char *json_value);
/* Reads a param's JSON value into out. */
int spear_get_param(spear_chat *chat, const char *key, spear_buf *out);
/* mcp.server_ids: only these MCP servers (a subset of the task's). */
int spear_use_servers(spear_chat *chat, const char *const *ids, size_t n);
/* mcp.tool_allowlist: only tools matching one of these patterns (`*`, `?`). */
int spear_allow_tools(spear_chat *chat, const char *const *patterns, size_t n);
/* mcp.tool_denylist: never these tools, whatever else allows them. */
int spear_deny_tools(spear_chat *chat, const char *const *patterns, size_t n);
/* mcp.enabled = false: no MCP tools at all in this session. */
int spear_disable_mcp(spear_chat *chat);

/* Adds a message: role "system" or "user" with text (for "tool" use
 * spear_answer; "assistant" takes the JSON of docs/guest-api.md). */
int spear_write(spear_chat *chat, const char *role, const char *text);
/* spear_write with a length, for text that is not NUL-terminated. */
int spear_write_n(spear_chat *chat, const char *role, const char *text, size_t text_len);
/* Answers the open tool call `call_id` with `content` (a "tool" message). */
int spear_answer(spear_chat *chat, const char *call_id, const char *content);

/* Lets the model answer; flags are SPEAR_SEND_*. On failure the sentence
 * is the reply's `error` (which limit, what the provider said), and except
 * for -SPEAR_EINVAL a reply is still there for spear_recv. */
int spear_send(spear_chat *chat, uint32_t flags);
/* The last send's reply JSON, into out (grown as the node asks). */
int spear_recv(spear_chat *chat, spear_buf *out);
/* The reply's `content` (the model's final text) into content. */
int spear_reply_content(const spear_buf *reply, spear_buf *content);
/* Runs a call of the last reply's `tool_calls` (its JSON entry, as
 * spear_json_array_at gives it): the result JSON {"content", "is_error",
 * "server", "tool"} into out. The history is not changed: spear_answer. */
int spear_call_tool(spear_chat *chat, const char *call, size_t call_len, spear_buf *out);

/* ---- Guest tools -----------------------------------------------------------
 *
 * A tool the guest implements, offered to the model next to the MCP tools.
 * The node calls it back during spear_send: `args` is the model's
 * arguments as JSON text (NUL-terminated, checked to be JSON), and the
 * callback appends its result text to `result` (empty on entry) and
 * returns 0, or nonzero when the tool failed (the text is then the error
 * the model sees). `user` is what was given to spear_tool.
 *
 * Inside a callback every cchat call is refused with -SPEAR_EBUSY: compute
 * the result and return it. A crash, an endless loop or a memory blow-up
 * in it ends the whole run, naming the tool.
 *
 * A surprise of the toolchain: wasm-ld wraps each export of a WASI command
 * module (all but _start) so that it calls __wasm_call_dtors on return. So
 * after every tool call wasi-libc flushes stdio and runs the atexit
 * handlers registered so far, in the middle of main. Do not use atexit in
 * a guest with tools, and read stdin before sending.
 */
typedef int (*spear_tool_fn)(void *user, const char *args, size_t args_len, spear_buf *result);

/* Registers a tool: `name` matches ^[A-Za-z0-9_-]{1,64}$ and does not
 * start with "mcp"; `parameters` is a JSON object schema (NULL for one
 * with no properties). -SPEAR_EEXIST for a name the session has. */
int spear_tool(spear_chat *chat, const char *name, const char *description,
               const char *parameters, spear_tool_fn fn, void *user);

/* The exports the node calls for guest tools (docs/guest-api.md, "Guest
 * tools: the dispatcher"); you never call these yourself.
 * spear_alloc(len): a buffer of len bytes, the guest's until the next call.
 * spear_tool_call(fn_id, args, args_len, out): runs tool fn_id, writes the
 * result's (ptr, len) as two little-endian u32 at out, returns 0 or 1. */
uint8_t *spear_alloc(uint32_t len);
int32_t spear_tool_call(int32_t fn_id, const uint8_t *args, uint32_t args_len, uint8_t *out);

#ifdef __cplusplus
}
#endif
#endif /* SPEAR_H */

/* ========================================================================== */
/*                               Implementation                               */
/* ========================================================================== */

#ifdef SPEAR_IMPLEMENTATION
#ifndef SPEAR__IMPLEMENTED
#define SPEAR__IMPLEMENTED

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Error sentences -------------------------------------------------------
 *
 * The node keeps one sentence for the run's last refused call, and any
 * later refusal replaces it. That includes the -ENOSPC a too-small output
 * buffer gets, even from cchat_last_error itself. So the SDK copies the
 * sentence right after each failure, into a buffer large enough that the
 * copy can never be refused.
 */

static char spear__sentence[SPEAR_SENTENCE_MAX + 1];

/* Records the node's sentence for the failure `code` and returns `code`. */
static int spear__failed(int32_t code) {
    uint32_t len = SPEAR_SENTENCE_MAX;
    if (cchat_last_error((uint8_t *)spear__sentence, &len) < 0 || len > SPEAR_SENTENCE_MAX) {
        len = 0;
    }
    spear__sentence[len] = '\0';
    return code;
}

/* Records the SDK's own sentence for a failure it found, returns `code`. */
static int spear__refuse(int code, const char *sentence) {
    size_t len = strlen(sentence);
    if (len > SPEAR_SENTENCE_MAX) {
        len = SPEAR_SENTENCE_MAX;
    }
    memcpy(spear__sentence, sentence, len);
    spear__sentence[len] = '\0';
    return code;
}

static int spear__out_of_memory(void) {
    return spear__refuse(-SPEAR_ENOMEM, "the guest ran out of memory (malloc failed)");
}

const char *spear_last_error(void) { return spear__sentence; }

/* Positive errno of a return code; INT_MIN saturates, as in the Rust SDK. */
static int spear__errno_of(int code) {
    if (code == INT_MIN) {
        return INT_MAX;
    }
    return code < 0 ? -code : code;
}

const char *spear_strerror(int code) {
    static char other[48];
    switch (spear__errno_of(code)) {
    case SPEAR_EACCES: return "the task does not allow this";
    case SPEAR_EINVAL:
    case SPEAR_EFAULT: return "an argument is malformed";
    case SPEAR_ENOENT: return "not found";
    case SPEAR_EBADF: return "the session is closed or unknown";
    case SPEAR_EMFILE: return "too many open sessions";
    case SPEAR_ENOSPC: return "the session holds the most messages it may";
    case SPEAR_ETIMEDOUT: return "the session deadline passed";
    case SPEAR_EIO: return "the model provider or the tool loop failed";
    case SPEAR_ENOSYS: return "not running on a Spear node";
    case SPEAR_ENOMEM: return "the run's host memory budget is spent";
    case SPEAR_EDQUOT: return "a run budget is spent";
    case SPEAR_EAGAIN: return "a fleet quota is spent until it refills";
    case SPEAR_EBUSY: return "not allowed inside a guest tool callback";
    case SPEAR_EEXIST: return "a guest tool with that name exists";
    case SPEAR_EBADMSG: return "the model's answer is not the JSON asked for";
    default:
        snprintf(other, sizeof other, "the host returned errno %d", spear__errno_of(code));
        return other;
    }
}

const char *spear_errname(int code) {
    switch (spear__errno_of(code)) {
    case SPEAR_ENOENT: return "ENOENT";
    case SPEAR_EIO: return "EIO";
    case SPEAR_EBADF: return "EBADF";
    case SPEAR_EAGAIN: return "EAGAIN";
    case SPEAR_ENOMEM: return "ENOMEM";
    case SPEAR_EACCES: return "EACCES";
    case SPEAR_EFAULT: return "EFAULT";
    case SPEAR_EBUSY: return "EBUSY";
    case SPEAR_EEXIST: return "EEXIST";
    case SPEAR_EINVAL: return "EINVAL";
    case SPEAR_EMFILE: return "EMFILE";
    case SPEAR_ENOSPC: return "ENOSPC";
    case SPEAR_ENOSYS: return "ENOSYS";
    case SPEAR_EBADMSG: return "EBADMSG";
    case SPEAR_ETIMEDOUT: return "ETIMEDOUT";
    case SPEAR_EDQUOT: return "EDQUOT";
    default: return "E?";
    }
}

void spear_perror(const char *prefix, int code) {
    const char *sentence = spear__sentence[0] ? spear__sentence : spear_strerror(code);
    if (prefix && prefix[0]) {
        fprintf(stderr, "%s: %s\n", prefix, sentence);
    } else {
        fprintf(stderr, "%s\n", sentence);
    }
}

/* ---- Growing buffers ------------------------------------------------------ */

int spear_buf_reserve(spear_buf *buf, size_t extra) {
    size_t need, cap;
    char *data;
    if (extra > SIZE_MAX - 1 - buf->len) {
        return spear__out_of_memory();
    }
    need = buf->len + extra + 1;
    if (need <= buf->cap) {
        return 0;
    }
    /* Doubling keeps a run of appends linear; the first block is small. */
    cap = buf->cap ? buf->cap : 64;
    while (cap < need) {
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    }
    data = (char *)realloc(buf->data, cap);
    if (!data) {
        return spear__out_of_memory();
    }
    buf->data = data;
    buf->cap = cap;
    buf->data[buf->len] = '\0';
    return 0;
}

int spear_buf_append(spear_buf *buf, const char *bytes, size_t len) {
    int rc = spear_buf_reserve(buf, len);
    if (rc < 0) {
        return rc;
    }
    if (len > 0) {
        memcpy(buf->data + buf->len, bytes, len);
    }
    buf->len += len;
    buf->data[buf->len] = '\0';
    return 0;
}

int spear_buf_puts(spear_buf *buf, const char *text) {
    return spear_buf_append(buf, text, strlen(text));
}

int spear_buf_printf(spear_buf *buf, const char *format, ...) {
    va_list args;
    int needed;
    va_start(args, format);
    needed = vsnprintf(NULL, 0, format, args);
    va_end(args);
    if (needed < 0) {
        return spear__refuse(-SPEAR_EINVAL, "a format string could not be printed");
    }
    if (spear_buf_reserve(buf, (size_t)needed) < 0) {
        return -SPEAR_ENOMEM;
    }
    va_start(args, format);
    vsnprintf(buf->data + buf->len, (size_t)needed + 1, format, args);
    va_end(args);
    buf->len += (size_t)needed;
    return 0;
}

void spear_buf_clear(spear_buf *buf) {
    buf->len = 0;
    if (buf->data) {
        buf->data[0] = '\0';
    }
}

void spear_buf_free(spear_buf *buf) {
    free(buf->data);
    buf->data = NULL;
    buf->len = 0;
    buf->cap = 0;
}

/* ---- UTF-8 ---------------------------------------------------------------- */

/* The length (1 to 4) of the valid UTF-8 sequence at p, 0 when it is
 * invalid or cut short by `end`. Overlong forms, surrogates (ED A0..BF)
 * and code points past U+10FFFF are invalid, as in Rust's str. p < end. */
static size_t spear__utf8_len(const unsigned char *p, const unsigned char *end) {
    unsigned char lead = p[0], low = 0x80, high = 0xBF;
    size_t n, i;
    if (lead < 0x80) {
        return 1;
    } else if (lead >= 0xC2 && lead <= 0xDF) {
        n = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        n = 3;
        low = lead == 0xE0 ? 0xA0 : 0x80;  /* E0 80..9F would be overlong */
        high = lead == 0xED ? 0x9F : 0xBF; /* ED A0..BF are surrogates */
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        n = 4;
        low = lead == 0xF0 ? 0x90 : 0x80;  /* F0 80..8F would be overlong */
        high = lead == 0xF4 ? 0x8F : 0xBF; /* past F4 8F is past U+10FFFF */
    } else {
        return 0;
    }
    if ((size_t)(end - p) < n || p[1] < low || p[1] > high) {
        return 0;
    }
    for (i = 2; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80) {
            return 0;
        }
    }
    return n;
}

/* Writes code point cp (at most U+10FFFF, not a surrogate) as UTF-8;
 * returns the byte count. */
static int spear__utf8_put(uint32_t cp, unsigned char out[4]) {
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

int spear_utf8_valid(const char *text, size_t len) {
    const unsigned char *p = (const unsigned char *)text, *end = len > 0 ? p + len : p;
    while (p < end) {
        size_t n = spear__utf8_len(p, end);
        if (n == 0) {
            return 0;
        }
        p += n;
    }
    return 1;
}

size_t spear_space_len(const char *text, size_t len) {
    const unsigned char *p = (const unsigned char *)text;
    uint32_t cp;
    size_t n;
    if (len == 0) {
        return 0;
    }
    n = spear__utf8_len(p, p + len);
    switch (n) {
    case 1: cp = p[0]; break;
    case 2: cp = ((uint32_t)(p[0] & 0x1F) << 6) | (p[1] & 0x3F); break;
    case 3: cp = ((uint32_t)(p[0] & 0x0F) << 12) | ((uint32_t)(p[1] & 0x3F) << 6) | (p[2] & 0x3F); break;
    default: return 0; /* invalid, or 4 bytes: no white space up there */
    }
    /* Unicode's White_Space property, the set Rust's str::trim uses. */
    if ((cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
        (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
        cp == 0x205F || cp == 0x3000) {
        return n;
    }
    return 0;
}

void spear_trim(const char *text, size_t len, size_t *start, size_t *out_len) {
    size_t from = 0, to = len, n;
    while (from < to && (n = spear_space_len(text + from, to - from)) > 0) {
        from += n;
    }
    /* From the end: step back over one character (a white-space one is at
     * most 3 bytes) and see whether it is white space ending at `to`. */
    while (to > from) {
        size_t back = 1;
        while (back < 3 && to - back > from && ((unsigned char)text[to - back] & 0xC0) == 0x80) {
            back++;
        }
        n = spear_space_len(text + to - back, back);
        if (n != back) {
            break;
        }
        to -= back;
    }
    *start = from;
    *out_len = to - from;
}

/* ---- JSON writing --------------------------------------------------------- */

int spear_json_escape(spear_buf *out, const char *text, size_t len) {
    static const char hex[] = "0123456789abcdef";
    size_t i, run = 0;
    /* Reserved up front, so text with nothing to escape (the common case)
     * costs one allocation at most. */
    int rc = spear_buf_reserve(out, len + 2);
    if (rc == 0) {
        rc = spear_buf_append(out, "\"", 1);
    }
    for (i = 0; i < len && rc == 0; i++) {
        unsigned char b = (unsigned char)text[i];
        char esc[7] = {'\\', 0, 0, 0, 0, 0, 0};
        size_t esc_len = 2;
        if (b >= 0x20 && b != '"' && b != '\\') {
            continue; /* copied later with the rest of its run */
        }
        switch (b) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            memcpy(esc + 1, "u00", 3);
            esc[4] = hex[b >> 4];
            esc[5] = hex[b & 0xF];
            esc_len = 6;
        }
        rc = spear_buf_append(out, text + run, i - run);
        if (rc == 0) {
            rc = spear_buf_append(out, esc, esc_len);
        }
        run = i + 1;
    }
    if (rc == 0) {
        rc = spear_buf_append(out, text + run, len - run);
    }
    return rc == 0 ? spear_buf_append(out, "\"", 1) : rc;
}

int spear_json_string_array(spear_buf *out, const char *const *items, size_t n) {
    size_t i;
    int rc = spear_buf_append(out, "[", 1);
    for (i = 0; i < n && rc == 0; i++) {
        if (i > 0) {
            rc = spear_buf_append(out, ",", 1);
        }
        if (rc == 0) {
            rc = spear_json_escape(out, items[i], strlen(items[i]));
        }
    }
    return rc == 0 ? spear_buf_append(out, "]", 1) : rc;
}

/* ---- JSON reading ----------------------------------------------------------
 *
 * A cursor over bytes; every read checks it against `end`, so a document
 * cut anywhere is malformed, never read past. Scanning functions return 0
 * when they consumed a well-formed piece and -1 when it is malformed.
 */

typedef struct spear__cursor {
    const unsigned char *p;
    const unsigned char *end;
} spear__cursor;

static spear__cursor spear__cursor_of(const char *text, size_t len) {
    spear__cursor c;
    c.p = (const unsigned char *)text;
    c.end = len > 0 ? c.p + len : c.p; /* NULL + 0 is undefined in C */
    return c;
}

static void spear__ws(spear__cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) {
        c->p++;
    }
}

/* Consumes `ch` when it is next; 1 if it did. */
static int spear__eat(spear__cursor *c, unsigned char ch) {
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

static int spear__hex4(spear__cursor *c, uint32_t *out) {
    uint32_t value = 0;
    int i;
    if (c->end - c->p < 4) {
        return -1;
    }
    for (i = 0; i < 4; i++) {
        unsigned char h = *c->p++;
        uint32_t digit;
        if (h >= '0' && h <= '9') {
            digit = (uint32_t)(h - '0');
        } else if (h >= 'a' && h <= 'f') {
            digit = (uint32_t)(h - 'a' + 10);
        } else if (h >= 'A' && h <= 'F') {
            digit = (uint32_t)(h - 'A' + 10);
        } else {
            return -1;
        }
        value = value << 4 | digit;
    }
    *out = value;
    return 0;
}

/* After "\u": one code point, a surrogate pair joined, as UTF-8 in out.
 * Returns its byte count, or -1 (bad hex, a lone surrogate). */
static int spear__string_unicode(spear__cursor *c, unsigned char out[4]) {
    uint32_t cp, low;
    if (spear__hex4(c, &cp) < 0 || (cp >= 0xDC00 && cp <= 0xDFFF)) {
        return -1;
    }
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        /* A high surrogate is only half a character: the low half must
         * follow at once, as another \u escape. */
        if (!spear__eat(c, '\\') || !spear__eat(c, 'u') || spear__hex4(c, &low) < 0 ||
            low < 0xDC00 || low > 0xDFFF) {
            return -1;
        }
        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    return spear__utf8_put(cp, out);
}

/* After a backslash: the escaped character as UTF-8 in out; its byte
 * count, or -1. */
static int spear__string_escape(spear__cursor *c, unsigned char out[4]) {
    if (c->p >= c->end) {
        return -1;
    }
    switch (*c->p++) {
    case '"': out[0] = '"'; return 1;
    case '\\': out[0] = '\\'; return 1;
    case '/': out[0] = '/'; return 1;
    case 'b': out[0] = '\b'; return 1;
    case 'f': out[0] = '\f'; return 1;
    case 'n': out[0] = '\n'; return 1;
    case 'r': out[0] = '\r'; return 1;
    case 't': out[0] = '\t'; return 1;
    case 'u': return spear__string_unicode(c, out);
    default: return -1;
    }
}

/* Inside a string: decodes the next character into out. Returns its byte
 * count (1 to 4), 0 at the closing quote (consumed), -1 when malformed. */
static int spear__string_next(spear__cursor *c, unsigned char out[4]) {
    size_t n;
    if (c->p >= c->end) {
        return -1; /* the document ends inside the string */
    }
    if (*c->p == '"') {
        c->p++;
        return 0;
    }
    if (*c->p == '\\') {
        c->p++;
        return spear__string_escape(c, out);
    }
    if (*c->p < 0x20) {
        return -1; /* JSON wants control characters escaped */
    }
    n = spear__utf8_len(c->p, c->end);
    if (n == 0) {
        return -1;
    }
    memcpy(out, c->p, n);
    c->p += n;
    return (int)n;
}

static int spear__skip_string(spear__cursor *c) {
    unsigned char ch[4];
    int n;
    if (!spear__eat(c, '"')) {
        return -1;
    }
    while ((n = spear__string_next(c, ch)) > 0) {
    }
    return n;
}

/* Skips the string at c; 1 when it decodes to exactly `key`, 0 when it
 * does not, -1 when it is malformed. Escaped keys compare decoded. */
static int spear__key_is(spear__cursor *c, const char *key) {
    const unsigned char *k = (const unsigned char *)key;
    unsigned char ch[4];
    int n, same = 1;
    if (!spear__eat(c, '"')) {
        return -1;
    }
    while ((n = spear__string_next(c, ch)) > 0) {
        int i;
        for (i = 0; same && i < n; i++) {
            /* k stops at its NUL, which never matches (a decoded \u0000
             * included), so k is never read past its end. */
            same = ch[i] != 0 && k[i] == ch[i];
        }
        if (same) {
            k += n;
        }
    }
    return n < 0 ? -1 : (same && *k == '\0');
}

static int spear__digits(spear__cursor *c) {
    const unsigned char *start = c->p;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        c->p++;
    }
    return c->p > start ? 0 : -1;
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int spear__skip_number(spear__cursor *c) {
    spear__eat(c, '-');
    if (!spear__eat(c, '0')) {
        if (c->p >= c->end || *c->p < '1' || *c->p > '9' || spear__digits(c) < 0) {
            return -1;
        }
    }
    if (spear__eat(c, '.') && spear__digits(c) < 0) {
        return -1;
    }
    if (spear__eat(c, 'e') || spear__eat(c, 'E')) {
        if (!spear__eat(c, '+')) {
            spear__eat(c, '-');
        }
        return spear__digits(c);
    }
    return 0;
}

static int spear__skip_word(spear__cursor *c, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0) {
        return -1;
    }
    c->p += n;
    return 0;
}

/* A string, number, true, false or null. */
static int spear__skip_scalar(spear__cursor *c) {
    if (c->p >= c->end) {
        return -1;
    }
    switch (*c->p) {
    case '"': return spear__skip_string(c);
    case 't': return spear__skip_word(c, "true");
    case 'f': return spear__skip_word(c, "false");
    case 'n': return spear__skip_word(c, "null");
    default:
        if (*c->p == '-' || (*c->p >= '0' && *c->p <= '9')) {
            return spear__skip_number(c);
        }
        return -1;
    }
}

/* An object member's `"key" :`. */
static int spear__skip_key(spear__cursor *c) {
    spear__ws(c);
    if (spear__skip_string(c) < 0) {
        return -1;
    }
    spear__ws(c);
    return spear__eat(c, ':') ? 0 : -1;
}

/* The containers open around the cursor while a value is skipped. */
typedef struct spear__stack {
    unsigned char open[SPEAR_JSON_MAX_DEPTH]; /* '{' or '[' */
    size_t depth;
} spear__stack;

/* Where a value starts: a scalar is consumed whole (returns 0); a container
 * is opened (returns 1: its first value comes next), or consumed when it is
 * empty (returns 0). -1 when malformed or nested too deeply. */
static int spear__value_start(spear__cursor *c, spear__stack *s) {
    unsigned char open;
    spear__ws(c);
    if (c->p >= c->end || (*c->p != '{' && *c->p != '[')) {
        return spear__skip_scalar(c);
    }
    if (s->depth == SPEAR_JSON_MAX_DEPTH) {
        return -1;
    }
    open = *c->p++;
    spear__ws(c);
    if (spear__eat(c, open == '{' ? '}' : ']')) {
        return 0;
    }
    s->open[s->depth++] = open;
    if (open == '{' && spear__skip_key(c) < 0) {
        return -1;
    }
    return 1;
}

/* After a value: closes the containers it ends, or passes the comma (and
 * a member's key) before the next value. Returns 0 when the outermost
 * value is complete, 1 when another value comes next, -1 when malformed. */
static int spear__value_end(spear__cursor *c, spear__stack *s) {
    while (s->depth > 0) {
        unsigned char open = s->open[s->depth - 1];
        spear__ws(c);
        if (spear__eat(c, ',')) {
            return open == '{' && spear__skip_key(c) < 0 ? -1 : 1;
        }
        if (!spear__eat(c, open == '{' ? '}' : ']')) {
            return -1;
        }
        s->depth--;
    }
    return 0;
}

/* Skips one value of any kind, checking it. Nesting is tracked on an
 * explicit, bounded stack rather than by recursion, so a hostile document
 * of a million '[' is refused instead of overflowing the guest's stack. */
static int spear__skip_value(spear__cursor *c) {
    spear__stack stack;
    stack.depth = 0;
    for (;;) {
        int r = spear__value_start(c, &stack);
        if (r < 0) {
            return -1;
        }
        if (r == 1) {
            continue;
        }
        r = spear__value_end(c, &stack);
        if (r <= 0) {
            return r;
        }
    }
}

/* Only white space may follow the value. */
static int spear__at_end(spear__cursor *c) {
    spear__ws(c);
    return c->p == c->end ? 0 : -1;
}

/* The reader's failures get sentences too, so that spear_perror after one
 * says what went wrong instead of repeating an older failure's. */
static int spear__no_member(const char *key) {
    snprintf(spear__sentence, sizeof spear__sentence, "the JSON object has no member \"%s\"", key);
    return -SPEAR_ENOENT;
}

static int spear__not_object(void) {
    return spear__refuse(-SPEAR_EINVAL, "the JSON is not a well-formed object");
}

static int spear__not_array(void) {
    return spear__refuse(-SPEAR_EINVAL, "the JSON value is not a well-formed array");
}

int spear_json_validate(const char *json, size_t len) {
    spear__cursor c = spear__cursor_of(json, len);
    if (spear__skip_value(&c) < 0 || spear__at_end(&c) < 0) {
        return spear__refuse(-SPEAR_EINVAL, "the text is not well-formed JSON");
    }
    return 0;
}

int spear_json_get(const char *json, size_t len, const char *key, const char **value,
                   size_t *value_len) {
    spear__cursor c = spear__cursor_of(json, len);
    const unsigned char *found = NULL, *found_end = NULL;
    spear__ws(&c);
    if (!spear__eat(&c, '{')) {
        return spear__not_object();
    }
    spear__ws(&c);
    if (!spear__eat(&c, '}')) {
        for (;;) {
            const unsigned char *start;
            int same = spear__key_is(&c, key);
            spear__ws(&c);
            if (same < 0 || !spear__eat(&c, ':')) {
                return spear__not_object();
            }
            spear__ws(&c);
            start = c.p;
            if (spear__skip_value(&c) < 0) {
                return spear__not_object();
            }
            if (same) {
                found = start; /* a later duplicate replaces it */
                found_end = c.p;
            }
            spear__ws(&c);
            if (spear__eat(&c, '}')) {
                break;
            }
            if (!spear__eat(&c, ',')) {
                return spear__not_object();
            }
            spear__ws(&c);
        }
    }
    if (spear__at_end(&c) < 0) {
        return spear__not_object();
    }
    if (!found) {
        return spear__no_member(key);
    }
    *value = (const char *)found;
    *value_len = (size_t)(found_end - found);
    return 0;
}

int spear_json_unescape(const char *value, size_t len, spear_buf *out) {
    spear__cursor c = spear__cursor_of(value, len);
    int n, rc;
    /* Decoding never lengthens a string (\uXXXX is six bytes for at most
     * three, a pair twelve for four), so one reservation is enough. */
    spear_buf_clear(out);
    rc = spear_buf_reserve(out, len);
    if (rc < 0) {
        return rc;
    }
    spear__ws(&c);
    if (!spear__eat(&c, '"')) {
        return spear__refuse(-SPEAR_EINVAL, "the JSON value is not a well-formed string");
    }
    while ((n = spear__string_next(&c, (unsigned char *)out->data + out->len)) > 0) {
        out->len += (size_t)n;
    }
    out->data[out->len] = '\0';
    if (n < 0 || spear__at_end(&c) < 0) {
        spear_buf_clear(out);
        return spear__refuse(-SPEAR_EINVAL, "the JSON value is not a well-formed string");
    }
    return 0;
}

int spear_json_get_string(const char *json, size_t len, const char *key, spear_buf *out) {
    const char *value;
    size_t value_len;
    int rc = spear_json_get(json, len, key, &value, &value_len);
    if (rc < 0) {
        return rc;
    }
    if (value_len == 4 && memcmp(value, "null", 4) == 0) {
        return spear__no_member(key);
    }
    return spear_json_unescape(value, value_len, out);
}

int spear_json_get_number(const char *json, size_t len, const char *key, double *out) {
    char small[64], *text = small;
    const char *value;
    size_t value_len;
    spear__cursor c;
    int rc = spear_json_get(json, len, key, &value, &value_len);
    if (rc < 0) {
        return rc;
    }
    if (value_len == 4 && memcmp(value, "null", 4) == 0) {
        return spear__no_member(key);
    }
    c = spear__cursor_of(value, value_len);
    if (spear__skip_number(&c) < 0 || c.p != c.end) {
        return spear__refuse(-SPEAR_EINVAL, "the JSON value is not a number");
    }
    /* strtod needs a NUL-terminated copy; JSON's number grammar is a
     * subset of strtod's, so it reads exactly the token. */
    if (value_len >= sizeof small && !(text = (char *)malloc(value_len + 1))) {
        return spear__out_of_memory();
    }
    memcpy(text, value, value_len);
    text[value_len] = '\0';
    *out = strtod(text, NULL);
    if (text != small) {
        free(text);
    }
    return 0;
}

/* Walks the array value[0..len): returns its element count, and when
 * element `want` exists, its raw text in *elem. -1 when malformed. */
static long spear__array_walk(const char *value, size_t len, size_t want, const char **elem,
                              size_t *elem_len) {
    spear__cursor c = spear__cursor_of(value, len);
    long count = 0;
    spear__ws(&c);
    if (!spear__eat(&c, '[')) {
        return -1;
    }
    spear__ws(&c);
    if (!spear__eat(&c, ']')) {
        for (;;) {
            const unsigned char *start;
            spear__ws(&c);
            start = c.p;
            if (spear__skip_value(&c) < 0 || count == INT_MAX) {
                return -1;
            }
            if ((size_t)count == want) {
                *elem = (const char *)start;
                *elem_len = (size_t)(c.p - start);
            }
            count++;
            spear__ws(&c);
            if (spear__eat(&c, ']')) {
                break;
            }
            if (!spear__eat(&c, ',')) {
                return -1;
            }
        }
    }
    return spear__at_end(&c) < 0 ? -1 : count;
}

int spear_json_array_len(const char *value, size_t len) {
    const char *elem;
    size_t elem_len;
    long count = spear__array_walk(value, len, SIZE_MAX, &elem, &elem_len);
    return count < 0 ? spear__not_array() : (int)count;
}

int spear_json_array_at(const char *value, size_t len, size_t index, const char **elem,
                        size_t *elem_len) {
    long count = spear__array_walk(value, len, index, elem, elem_len);
    if (count < 0) {
        return spear__not_array();
    }
    return index < (size_t)count ? 0 : spear__refuse(-SPEAR_ENOENT, "the JSON array has no element there");
}

/* ---- Host calls that fill a buffer -----------------------------------------
 *
 * cchat_recv, cchat_ctl_get_param and cchat_call_tool write into a buffer
 * whose capacity the guest passes in *out_len. When it is too small the
 * host writes nothing, stores the size it needs and returns -ENOSPC; the
 * guest grows the buffer and calls again. (For cchat_call_tool the node
 * keeps the result, so the retry does not run the tool twice.)
 */

typedef int32_t (*spear__host_read)(const void *ctx, uint8_t *out, uint32_t *out_len);

#define SPEAR__FIRST_READ 4096
#define SPEAR__READ_TRIES 4

static int spear__read_grown(spear__host_read call, const void *ctx, spear_buf *out) {
    size_t want = SPEAR__FIRST_READ;
    int tries;
    spear_buf_clear(out);
    for (tries = 0; tries < SPEAR__READ_TRIES; tries++) {
        uint32_t len;
        size_t room;
        int32_t rc;
        if (spear_buf_reserve(out, want) < 0) {
            return -SPEAR_ENOMEM;
        }
        room = out->cap - 1; /* keep a byte for the NUL */
        len = room > UINT32_MAX ? UINT32_MAX : (uint32_t)room;
        rc = call(ctx, (uint8_t *)out->data, &len);
        if (rc == -SPEAR_ENOSPC && len > room) {
            want = len; /* a short buffer is no failure: grow, ask again */
            continue;
        }
        if (rc < 0) {
            return spear__failed(rc);
        }
        out->len = len;
        out->data[len] = '\0';
        return 0;
    }
    return spear__refuse(-SPEAR_ENOSPC, "the node kept asking for a larger buffer");
}

typedef struct spear__param_read {
    int32_t handle;
    const char *key;
} spear__param_read;

static int32_t spear__read_param(const void *ctx, uint8_t *out, uint32_t *out_len) {
    const spear__param_read *r = (const spear__param_read *)ctx;
    return cchat_ctl_get_param(r->handle, (const uint8_t *)r->key, (uint32_t)strlen(r->key), out,
                               out_len);
}

static int32_t spear__read_reply(const void *ctx, uint8_t *out, uint32_t *out_len) {
    return cchat_recv(((const spear_chat *)ctx)->handle, out, out_len);
}

typedef struct spear__tool_read {
    int32_t handle;
    const char *call;
    uint32_t call_len;
} spear__tool_read;

static int32_t spear__read_tool_result(const void *ctx, uint8_t *out, uint32_t *out_len) {
    const spear__tool_read *r = (const spear__tool_read *)ctx;
    return cchat_call_tool(r->handle, (const uint8_t *)r->call, r->call_len, out, out_len);
}

/* Host lengths are u32: always true on wasm32, checked for native builds. */
static int spear__fits_u32(size_t len) { return len <= UINT32_MAX; }

static int spear__too_long(void) {
    return spear__refuse(-SPEAR_EINVAL, "an argument is longer than 4 GiB");
}

/* ---- Sessions, params and messages ---------------------------------------- */

static void spear__tools_forget(int32_t handle);

int spear_chat_create(spear_chat *chat) {
    int32_t handle = cchat_create();
    chat->handle = 0;
    if (handle < 0) {
        return spear__failed(handle);
    }
    chat->handle = handle;
    return 0;
}

int spear_chat_close(spear_chat *chat) {
    int32_t rc;
    if (chat->handle <= 0) {
        return 0;
    }
    rc = cchat_close(chat->handle);
    /* Forget the tools only once the session is gone: a close refused
     * (from inside a callback, say) leaves it open, tools and all. */
    if (rc == 0 || rc == -SPEAR_EBADF) {
        spear__tools_forget(chat->handle);
        chat->handle = 0;
    }
    return rc < 0 ? spear__failed(rc) : 0;
}

int spear_set_param(spear_chat *chat, const char *key, const char *json_value) {
    size_t key_len = strlen(key), value_len = strlen(json_value);
    int32_t rc;
    if (!spear__fits_u32(key_len) || !spear__fits_u32(value_len)) {
        return spear__too_long();
    }
    rc = cchat_ctl_set_param(chat->handle, (const uint8_t *)key, (uint32_t)key_len,
                             (const uint8_t *)json_value, (uint32_t)value_len);
    return rc < 0 ? spear__failed(rc) : 0;
}

int spear_get_param(spear_chat *chat, const char *key, spear_buf *out) {
    spear__param_read r;
    if (!spear__fits_u32(strlen(key))) {
        return spear__too_long();
    }
    r.handle = chat->handle;
    r.key = key;
    return spear__read_grown(spear__read_param, &r, out);
}

/* Sets `key` to the JSON array of the n strings. */
static int spear__set_strings(spear_chat *chat, const char *key, const char *const *items,
                              size_t n) {
    spear_buf value = SPEAR_BUF_INIT;
    int rc = spear_json_string_array(&value, items, n);
    if (rc == 0) {
        rc = spear_set_param(chat, key, value.data);
    }
    spear_buf_free(&value);
    return rc;
}

int spear_use_servers(spear_chat *chat, const char *const *ids, size_t n) {
    return spear__set_strings(chat, "mcp.server_ids", ids, n);
}

int spear_allow_tools(spear_chat *chat, const char *const *patterns, size_t n) {
    return spear__set_strings(chat, "mcp.tool_allowlist", patterns, n);
}

int spear_deny_tools(spear_chat *chat, const char *const *patterns, size_t n) {
    return spear__set_strings(chat, "mcp.tool_denylist", patterns, n);
}

int spear_disable_mcp(spear_chat *chat) { return spear_set_param(chat, "mcp.enabled", "false"); }

int spear_write_n(spear_chat *chat, const char *role, const char *text, size_t text_len) {
    size_t role_len = strlen(role);
    int32_t rc;
    if (!spear__fits_u32(role_len) || !spear__fits_u32(text_len)) {
        return spear__too_long();
    }
    rc = cchat_write_msg(chat->handle, (const uint8_t *)role, (uint32_t)role_len,
                         (const uint8_t *)text, (uint32_t)text_len);
    return rc < 0 ? spear__failed(rc) : 0;
}

int spear_write(spear_chat *chat, const char *role, const char *text) {
    return spear_write_n(chat, role, text, strlen(text));
}

int spear_answer(spear_chat *chat, const char *call_id, const char *content) {
    spear_buf message = SPEAR_BUF_INIT;
    int rc = spear_buf_puts(&message, "{\"tool_call_id\":");
    if (rc == 0) {
        rc = spear_json_escape(&message, call_id, strlen(call_id));
    }
    if (rc == 0) {
        rc = spear_buf_puts(&message, ",\"content\":");
    }
    if (rc == 0) {
        rc = spear_json_escape(&message, content, strlen(content));
    }
    if (rc == 0) {
        rc = spear_buf_puts(&message, "}");
    }
    if (rc == 0) {
        rc = spear_write_n(chat, "tool", message.data, message.len);
    }
    spear_buf_free(&message);
    return rc;
}

/* ---- Sends and replies ---------------------------------------------------- */

int spear_send(spear_chat *chat, uint32_t flags) {
    int32_t rc = cchat_send(chat->handle, flags);
    return rc < 0 ? spear__failed(rc) : 0;
}

int spear_recv(spear_chat *chat, spear_buf *out) {
    return spear__read_grown(spear__read_reply, chat, out);
}

int spear_reply_content(const spear_buf *reply, spear_buf *content) {
    int rc;
    if (!reply->data) {
        return spear__refuse(-SPEAR_EINVAL, "the reply is empty; call spear_recv first");
    }
    rc = spear_json_get_string(reply->data, reply->len, "content", content);
    if (rc == -SPEAR_ENOENT) {
        return spear__refuse(-SPEAR_EINVAL, "the node's reply is not a reply: it has no content");
    }
    if (rc == -SPEAR_EINVAL) {
        return spear__refuse(rc, "the node's reply is not a reply: its content is not a string");
    }
    return rc;
}

int spear_call_tool(spear_chat *chat, const char *call, size_t call_len, spear_buf *out) {
    spear__tool_read r;
    if (!spear__fits_u32(call_len)) {
        return spear__too_long();
    }
    r.handle = chat->handle;
    r.call = call;
    r.call_len = (uint32_t)call_len;
    return spear__read_grown(spear__read_tool_result, &r, out);
}

/* ---- Guest tools -----------------------------------------------------------
 *
 * The node gives each registered tool an id (unique in the run) and calls
 * back into the two exports with it. The registry maps ids to callbacks;
 * `args` is the buffer spear_alloc last handed out and `result` the last
 * result, each kept alive until the next call as the node expects.
 */

typedef struct spear__tool {
    int32_t fn_id;
    int32_t handle; /* the session the tool belongs to */
    spear_tool_fn fn;
    void *user;
} spear__tool;

static struct {
    spear__tool *items;
    size_t len, cap;
    uint8_t *args;
    spear_buf result;
} spear__tools;

/* Room for one more tool, made before the node is asked, so a tool the
 * node accepted always gets its callback. */
static int spear__tools_reserve(void) {
    spear__tool *items;
    size_t cap;
    if (spear__tools.len < spear__tools.cap) {
        return 0;
    }
    cap = spear__tools.cap ? spear__tools.cap * 2 : 8;
    items = (spear__tool *)realloc(spear__tools.items, cap * sizeof *items);
    if (!items) {
        return spear__out_of_memory();
    }
    spear__tools.items = items;
    spear__tools.cap = cap;
    return 0;
}

static void spear__tools_forget(int32_t handle) {
    size_t from, to = 0;
    for (from = 0; from < spear__tools.len; from++) {
        if (spear__tools.items[from].handle != handle) {
            spear__tools.items[to++] = spear__tools.items[from];
        }
    }
    spear__tools.len = to;
}

/* {"name": ..., "description": ..., "parameters": ...} for cchat_write_fn. */
static int spear__tool_spec(spear_buf *spec, const char *name, const char *description,
                            const char *parameters) {
    int rc = spear_buf_puts(spec, "{\"name\":");
    if (rc == 0) {
        rc = spear_json_escape(spec, name, strlen(name));
    }
    if (rc == 0) {
        rc = spear_buf_puts(spec, ",\"description\":");
    }
    if (rc == 0) {
        rc = spear_json_escape(spec, description ? description : "",
                               description ? strlen(description) : 0);
    }
    if (rc == 0) {
        rc = spear_buf_puts(spec, ",\"parameters\":");
    }
    if (rc == 0) {
        rc = spear_buf_puts(spec, parameters ? parameters : "{\"type\":\"object\",\"properties\":{}}");
    }
    return rc == 0 ? spear_buf_puts(spec, "}") : rc;
}

int spear_tool(spear_chat *chat, const char *name, const char *description,
               const char *parameters, spear_tool_fn fn, void *user) {
    spear_buf spec = SPEAR_BUF_INIT;
    int rc;
    if (!fn) {
        return spear__refuse(-SPEAR_EINVAL, "a guest tool needs a callback");
    }
    rc = spear__tool_spec(&spec, name, description, parameters);
    if (rc == 0) {
        rc = spear__tools_reserve();
    }
    if (rc == 0 && !spear__fits_u32(spec.len)) {
        rc = spear__too_long();
    }
    if (rc == 0) {
        int32_t fn_id = cchat_write_fn(chat->handle, (const uint8_t *)spec.data, (uint32_t)spec.len);
        if (fn_id < 0) {
            rc = spear__failed(fn_id);
        } else {
            spear__tool *tool = &spear__tools.items[spear__tools.len++];
            tool->fn_id = fn_id;
            tool->handle = chat->handle;
            tool->fn = fn;
            tool->user = user;
        }
    }
    spear_buf_free(&spec);
    return rc;
}

SPEAR__EXPORT("spear_alloc")
uint8_t *spear_alloc(uint32_t len) {
    /* One byte more, zeroed: the arguments end in a NUL. When memory is
     * spent there is no way to say so (returning 0 would have the node
     * write over address 0), so stop with a trap, which ends the run with
     * the tool's name. */
    size_t size = (size_t)len + 1; /* 0 when it wrapped, on wasm32 */
    free(spear__tools.args);
    spear__tools.args = size != 0 ? (uint8_t *)malloc(size) : NULL;
    if (!spear__tools.args) {
        __builtin_trap();
    }
    spear__tools.args[len] = 0;
    return spear__tools.args;
}

/* Runs tool fn_id; returns 1 when it failed. The result text is in result. */
static int spear__run_tool(int32_t fn_id, const char *args, size_t args_len, spear_buf *result) {
    spear_tool_fn fn = NULL;
    void *user = NULL;
    char *copy;
    size_t i;
    int failed;
    for (i = 0; i < spear__tools.len; i++) {
        if (spear__tools.items[i].fn_id == fn_id) {
            /* Copied out: the callback may register tools, moving items. */
            fn = spear__tools.items[i].fn;
            user = spear__tools.items[i].user;
        }
    }
    if (!fn) {
        spear_buf_printf(result, "this guest has no tool with id %d", (int)fn_id);
        return 1;
    }
    if (spear_json_validate(args, args_len) < 0) {
        spear_buf_puts(result, "the arguments are not JSON");
        return 1;
    }
    /* A private, NUL-terminated copy, whatever buffer the node used. */
    copy = (char *)malloc(args_len + 1);
    if (!copy) {
        spear_buf_puts(result, "the guest ran out of memory for the arguments");
        return 1;
    }
    memcpy(copy, args, args_len);
    copy[args_len] = '\0';
    failed = fn(user, copy, args_len, result) != 0;
    free(copy);
    return failed;
}

static void spear__put_u32le(uint8_t *out, uint32_t value) {
    out[0] = (uint8_t)value;
    out[1] = (uint8_t)(value >> 8);
    out[2] = (uint8_t)(value >> 16);
    out[3] = (uint8_t)(value >> 24);
}

SPEAR__EXPORT("spear_tool_call")
int32_t spear_tool_call(int32_t fn_id, const uint8_t *args, uint32_t args_len, uint8_t *out) {
    spear_buf *result = &spear__tools.result;
    int failed;
    spear_buf_clear(result);
    failed = spear__run_tool(fn_id, (const char *)args, args_len, result);
    /* The node reads the result from our memory: its address and length,
     * little-endian, in the 8-byte slot it gave us. Off wasm the address
     * does not fit, and nothing reads it. */
    spear__put_u32le(out, (uint32_t)(uintptr_t)result->data);
    spear__put_u32le(out + 4, (uint32_t)result->len);
    return failed ? 1 : 0;
}

#endif /* SPEAR__IMPLEMENTED */
#endif /* SPEAR_IMPLEMENTATION */
