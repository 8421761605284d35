/*
 * fs_agent.c - an agent that answers a question with the filesystem MCP
 * server, as sdk-guest/examples/fs_agent.rs does: it reads the question
 * from stdin (or uses a default), prints the answer on stdout and the
 * number of tool calls on stderr.
 *
 *     clang --target=wasm32-wasi -O2 -std=c11 -Wall -Wextra -Werror -I. \
 *         -Wl,--strip-debug -o fs_agent.wasm examples/fs_agent.c
 */
#define SPEAR_IMPLEMENTATION
#include "spear.h"

#include <stdio.h>
#include <stdlib.h>

static const char DEFAULT_QUESTION[] = "What does notes.txt say?";

/* All of stdin into input. Like Rust's read_to_string, input that cannot
 * be read, or is not UTF-8, counts as none. */
static void read_input(spear_buf *input) {
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0) {
        if (spear_buf_append(input, chunk, n) < 0) {
            break;
        }
    }
    if (ferror(stdin) || !feof(stdin) || !spear_utf8_valid(input->data, input->len)) {
        spear_buf_clear(input);
    }
}

/* Opens a session narrowed to reading the filesystem server, asks the
 * question, and leaves the reply JSON in reply. 0 or a negative errno. */
static int ask(spear_chat *chat, const char *question, size_t question_len, spear_buf *reply) {
    static const char *const servers[] = {"fs"};
    static const char *const allowed[] = {"read_*", "list_*"};
    int rc;
    if ((rc = spear_chat_create(chat)) < 0) {
        return rc;
    }
    /* Narrow the session: only the filesystem server, only reading. */
    if ((rc = spear_use_servers(chat, servers, 1)) < 0 ||
        (rc = spear_allow_tools(chat, allowed, 2)) < 0) {
        return rc;
    }
    if ((rc = spear_write(chat, "system", "Answer using the files you can read.")) < 0 ||
        (rc = spear_write_n(chat, "user", question, question_len)) < 0) {
        return rc;
    }
    /* The node runs the model and every tool call it makes, until it answers. */
    if ((rc = spear_send(chat, SPEAR_SEND_AUTO_TOOL_CALLS)) < 0) {
        return rc;
    }
    return spear_recv(chat, reply);
}

/* The reply's `trace` (every tool call of the send) counted; it may be
 * missing, which is none. */
static int count_tool_calls(const spear_buf *reply) {
    const char *trace;
    size_t trace_len;
    int rc = spear_json_get(reply->data, reply->len, "trace", &trace, &trace_len);
    if (rc == -SPEAR_ENOENT) {
        return 0;
    }
    return rc < 0 ? rc : spear_json_array_len(trace, trace_len);
}

int main(void) {
    spear_buf input = SPEAR_BUF_INIT, reply = SPEAR_BUF_INIT, content = SPEAR_BUF_INIT;
    spear_chat chat = {0};
    const char *question = DEFAULT_QUESTION;
    size_t start, question_len = sizeof DEFAULT_QUESTION - 1;
    int rc, tool_calls = 0;

    read_input(&input);
    spear_trim(input.data, input.len, &start, &question_len);
    if (question_len > 0) {
        question = input.data + start;
    } else {
        question_len = sizeof DEFAULT_QUESTION - 1;
    }

    rc = ask(&chat, question, question_len, &reply);
    if (rc == 0) {
        rc = spear_reply_content(&reply, &content);
    }
    if (rc == 0 && (tool_calls = count_tool_calls(&reply)) < 0) {
        rc = tool_calls;
    }
    if (rc < 0) {
        spear_perror("fs-agent failed", rc);
    } else {
        /* fwrite, not %s: the answer may hold a NUL (JSON's \u0000). */
        fwrite(content.data, 1, content.len, stdout);
        putchar('\n');
        fprintf(stderr, "tool calls: %d\n", tool_calls);
    }

    spear_chat_close(&chat);
    spear_buf_free(&input);
    spear_buf_free(&reply);
    spear_buf_free(&content);
    return rc < 0 ? 1 : 0;
}
