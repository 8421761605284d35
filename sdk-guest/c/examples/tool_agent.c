/*
 * tool_agent.c - an agent with a tool of its own, as
 * sdk-guest/python/examples/tool_agent.py: the model may call
 * `word_count`, which runs here in the guest, beside the filesystem
 * server's tools. Reads the question from stdin (or uses a default) and
 * prints the answer.
 *
 *     clang --target=wasm32-wasi -O2 -std=c11 -Wall -Wextra -Werror -I. \
 *         -Wl,--strip-debug -o tool_agent.wasm examples/tool_agent.c
 *
 * The node calls word_count back in the middle of spear_send, through the
 * spear_alloc and spear_tool_call exports spear.h defines.
 */
#define SPEAR_IMPLEMENTATION
#include "spear.h"

#include <stdio.h>

static const char DEFAULT_QUESTION[] = "How many words does notes.txt have?";

static const char WORD_COUNT_PARAMETERS[] =
    "{\"type\": \"object\", \"properties\": {\"text\": {\"type\": \"string\"}},"
    " \"required\": [\"text\"]}";

/* The guest tool: counts the words (runs of non-white-space) of the
 * argument `text`. Returns 0 with the result text, or 1 with the error the
 * model sees. No cchat call may be made from here (they are -EBUSY). */
static int word_count(void *user, const char *args, size_t args_len, spear_buf *result) {
    spear_buf text = SPEAR_BUF_INIT;
    size_t i = 0, words = 0;
    int in_word = 0;
    (void)user;
    if (spear_json_get_string(args, args_len, "text", &text) < 0) {
        spear_buf_puts(result, "the tool failed: the argument text must be a string");
        spear_buf_free(&text);
        return 1;
    }
    while (i < text.len) {
        size_t space = spear_space_len(text.data + i, text.len - i);
        if (space > 0) {
            in_word = 0;
            i += space;
        } else {
            words += !in_word;
            in_word = 1;
            i++;
        }
    }
    spear_buf_free(&text);
    return spear_buf_printf(result, "%zu words", words) < 0;
}

/* All of stdin into input; unreadable or non-UTF-8 input counts as none. */
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

/* A session with the filesystem server and word_count; asks the question
 * and leaves the reply JSON in reply. 0 or a negative errno. */
static int ask(spear_chat *chat, const char *question, size_t question_len, spear_buf *reply) {
    static const char *const servers[] = {"fs"};
    int rc;
    if ((rc = spear_chat_create(chat)) < 0 || (rc = spear_use_servers(chat, servers, 1)) < 0) {
        return rc;
    }
    rc = spear_tool(chat, "word_count", "Counts the words of a text.", WORD_COUNT_PARAMETERS,
                    word_count, NULL);
    if (rc < 0 || (rc = spear_write_n(chat, "user", question, question_len)) < 0) {
        return rc;
    }
    /* The loop runs MCP calls on the node and word_count here, until the
     * model answers. */
    if ((rc = spear_send(chat, SPEAR_SEND_AUTO_TOOL_CALLS)) < 0) {
        return rc;
    }
    return spear_recv(chat, reply);
}

int main(void) {
    spear_buf input = SPEAR_BUF_INIT, reply = SPEAR_BUF_INIT, content = SPEAR_BUF_INIT;
    spear_chat chat = {0};
    const char *question = DEFAULT_QUESTION;
    size_t start, question_len;
    int rc;

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
    if (rc < 0) {
        spear_perror("tool-agent failed", rc);
    } else {
        fwrite(content.data, 1, content.len, stdout);
        putchar('\n');
    }

    spear_chat_close(&chat);
    spear_buf_free(&input);
    spear_buf_free(&reply);
    spear_buf_free(&content);
    return rc < 0 ? 1 : 0;
}
