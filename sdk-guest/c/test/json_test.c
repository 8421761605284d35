/*
 * json_test.c - native tests of spear.h's pure parts: the JSON escaper and
 * reader, buffers, UTF-8 and white space, error names, and what the raw
 * layer does off wasm. Run from sdk-guest/c:
 *
 *     clang -std=c11 -Wall -Wextra -Werror -o /tmp/json_test test/json_test.c && /tmp/json_test
 *     clang -std=c11 -Wall -Wextra -Werror -g -fsanitize=address,undefined \
 *         -fno-sanitize-recover=all -o /tmp/json_test_san test/json_test.c && /tmp/json_test_san
 *
 * Every document a test parses is copied into a heap block of exactly its
 * size first, so that under AddressSanitizer a read one byte past the end
 * is caught rather than landing in a string literal's neighbour.
 */
#define SPEAR_IMPLEMENTATION
#include "../spear.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (cond) {                                                                                \
            passed++;                                                                              \
        } else {                                                                                   \
            failed++;                                                                              \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);              \
        }                                                                                          \
    } while (0)

/* An exact-size heap copy of text[0..len) (see the top comment). */
static char *exact(const char *text, size_t len) {
    char *copy = (char *)malloc(len ? len : 1);
    if (!copy) {
        abort();
    }
    if (len) {
        memcpy(copy, text, len);
    }
    return copy;
}

/* spear_json_get_string on a heap copy of the NUL-terminated json. */
static int get_string(const char *json, const char *key, spear_buf *out) {
    size_t len = strlen(json);
    char *doc = exact(json, len);
    int rc = spear_json_get_string(doc, len, key, out);
    free(doc);
    return rc;
}

static int validate(const char *json, size_t len) {
    char *doc = exact(json, len);
    int rc = spear_json_validate(doc, len);
    free(doc);
    return rc;
}

static int valid(const char *json) { return validate(json, strlen(json)) == 0; }

/* The escaped form of text[0..len), for comparisons. */
static int escapes_to(const char *text, size_t len, const char *want) {
    spear_buf out = SPEAR_BUF_INIT;
    int same = spear_json_escape(&out, text, len) == 0 && strcmp(out.data, want) == 0;
    if (!same) {
        fprintf(stderr, "  escaped: %s\n  wanted:  %s\n", out.data ? out.data : "(null)", want);
    }
    spear_buf_free(&out);
    return same;
}

static void test_escape(void) {
    CHECK(escapes_to("", 0, "\"\""));
    CHECK(escapes_to("plain text", 10, "\"plain text\""));
    CHECK(escapes_to("say \"hi\"", 8, "\"say \\\"hi\\\"\""));
    CHECK(escapes_to("C:\\dir\\", 7, "\"C:\\\\dir\\\\\""));
    CHECK(escapes_to("a\nb\tc\rd\be\ff", 11, "\"a\\nb\\tc\\rd\\be\\ff\""));
    CHECK(escapes_to("\x01\x1f", 2, "\"\\u0001\\u001f\""));
    CHECK(escapes_to("nul:\0!", 6, "\"nul:\\u0000!\""));
    CHECK(escapes_to("\x7f", 1, "\"\x7f\"")); /* DEL needs no escape */
    CHECK(escapes_to("/", 1, "\"/\""));       /* nor does the solidus */
    /* UTF-8 passes through untouched: é, €, 😀. */
    CHECK(escapes_to("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9,
                     "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\""));
}

static void test_string_array(void) {
    static const char *const items[] = {"fs", "a\"b", "read_*"};
    spear_buf out = SPEAR_BUF_INIT;
    CHECK(spear_json_string_array(&out, items, 3) == 0);
    CHECK(strcmp(out.data, "[\"fs\",\"a\\\"b\",\"read_*\"]") == 0);
    spear_buf_clear(&out);
    CHECK(spear_json_string_array(&out, items, 0) == 0 && strcmp(out.data, "[]") == 0);
    CHECK(valid(out.data));
    spear_buf_free(&out);
}

/* Escapes text, wraps it as {"k": ...} and reads it back: the same bytes. */
static int round_trips(const char *text, size_t len) {
    spear_buf doc = SPEAR_BUF_INIT, back = SPEAR_BUF_INIT;
    char *heap;
    int ok = spear_buf_puts(&doc, "{\"other\": 1, \"k\": ") == 0 &&
             spear_json_escape(&doc, text, len) == 0 && spear_buf_puts(&doc, "}") == 0;
    heap = exact(doc.data, doc.len);
    ok = ok && spear_json_validate(heap, doc.len) == 0 &&
         spear_json_get_string(heap, doc.len, "k", &back) == 0 && back.len == len &&
         memcmp(back.data, text, len) == 0;
    free(heap);
    spear_buf_free(&doc);
    spear_buf_free(&back);
    return ok;
}

static void test_round_trips(void) {
    char every_ascii[128];
    int i;
    for (i = 0; i < 128; i++) {
        every_ascii[i] = (char)i; /* NUL and every control character included */
    }
    CHECK(round_trips("", 0));
    CHECK(round_trips("hello", 5));
    CHECK(round_trips(every_ascii, sizeof every_ascii));
    CHECK(round_trips("\"\\\"\\\\", 5));
    CHECK(round_trips("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80 \xe4\xb8\xad\xe6\x96\x87", 16));
    CHECK(round_trips("\xef\xbf\xbf\xf4\x8f\xbf\xbf", 7)); /* U+FFFF, U+10FFFF */
}

/* get_string(json, key) gives exactly want[0..want_len). */
static int reads_as(const char *json, const char *key, const char *want, size_t want_len) {
    spear_buf out = SPEAR_BUF_INIT;
    int ok = get_string(json, key, &out) == 0 && out.len == want_len &&
             memcmp(out.data, want, want_len) == 0 && out.data[out.len] == '\0';
    spear_buf_free(&out);
    return ok;
}

static void test_unescape(void) {
    CHECK(reads_as("{\"content\": \"hi\"}", "content", "hi", 2));
    CHECK(reads_as("{\"k\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"}", "k", "\"\\/\b\f\n\r\t", 8));
    CHECK(reads_as("{\"k\":\"\\u00e9\\u20AC\"}", "k", "\xc3\xa9\xe2\x82\xac", 5));
    CHECK(reads_as("{\"k\":\"\\u0041\\u0000z\"}", "k", "A\0z", 3));
    /* Surrogate pairs, lower and upper case hex: U+1F600, U+1D11E. */
    CHECK(reads_as("{\"k\":\"\\ud83d\\ude00\"}", "k", "\xf0\x9f\x98\x80", 4));
    CHECK(reads_as("{\"k\":\"\\uD834\\uDD1E!\"}", "k", "\xf0\x9d\x84\x9e!", 5));
    CHECK(reads_as("{\"k\":\"\\udbff\\udfff\"}", "k", "\xf4\x8f\xbf\xbf", 4)); /* U+10FFFF */
    /* A key spelled with escapes is the same key. */
    CHECK(reads_as("{\"con\\u0074ent\": \"x\"}", "content", "x", 1));
    CHECK(reads_as("{\"caf\\u00e9\": \"y\"}", "caf\xc3\xa9", "y", 1));
}

static void test_bad_strings(void) {
    static const char *const bad[] = {
        "{\"k\":\"\\ud83d\"}",        /* a lone high surrogate */
        "{\"k\":\"\\ud83dx\"}",       /* high surrogate, then no escape */
        "{\"k\":\"\\ud83d\\u0041\"}", /* high surrogate, then no low one */
        "{\"k\":\"\\ud83d\\ud83d\"}", /* two high surrogates */
        "{\"k\":\"\\ude00\"}",        /* a lone low surrogate */
        "{\"k\":\"\\u12g4\"}",        /* bad hex */
        "{\"k\":\"\\u12\"}",          /* short hex */
        "{\"k\":\"\\x41\"}",          /* no such escape */
        "{\"k\":\"\\\"}",             /* the escape eats the closing quote */
        "{\"k\":\"tab\there\"}",      /* raw control character */
        "{\"k\":\"\xc0\x80\"}",       /* overlong NUL */
        "{\"k\":\"\xed\xa0\x80\"}",   /* a surrogate in raw UTF-8 */
        "{\"k\":\"\xf5\x80\x80\x80\"}", /* past U+10FFFF */
        "{\"k\":\"\xe2\x82\"}",       /* cut UTF-8 sequence */
        "{\"k\":\"\x80\"}",           /* stray continuation byte */
        "{\"k\":\"unterminated}",
    };
    size_t i;
    spear_buf out = SPEAR_BUF_INIT;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = get_string(bad[i], "k", &out);
        if (rc != -SPEAR_EINVAL) {
            fprintf(stderr, "  accepted bad string #%zu (rc %d)\n", i, rc);
        }
        CHECK(rc == -SPEAR_EINVAL);
        CHECK(!valid(bad[i]));
    }
    spear_buf_free(&out);
}

static void test_get(void) {
    spear_buf out = SPEAR_BUF_INIT;
    const char *doc = " {\"a\": {\"content\": \"inner\"}, \"b\": [1, {\"content\": 2}],"
                      " \"content\": \"outer\"} \n";
    const char *value;
    size_t value_len;
    char *heap = exact(doc, strlen(doc));
    CHECK(reads_as(doc, "content", "outer", 5)); /* only the top level counts */
    CHECK(spear_json_get(heap, strlen(doc), "b", &value, &value_len) == 0);
    CHECK(value_len == strlen("[1, {\"content\": 2}]") &&
          memcmp(value, "[1, {\"content\": 2}]", value_len) == 0);
    free(heap);
    CHECK(get_string("{\"a\": 1}", "content", &out) == -SPEAR_ENOENT);
    CHECK(strcmp(spear_last_error(), "the JSON object has no member \"content\"") == 0);
    CHECK(get_string("{}", "content", &out) == -SPEAR_ENOENT);
    CHECK(get_string("{\"content\": null}", "content", &out) == -SPEAR_ENOENT);
    CHECK(get_string("{\"content\": 5}", "content", &out) == -SPEAR_EINVAL);
    CHECK(get_string("[\"content\"]", "content", &out) == -SPEAR_EINVAL);
    CHECK(get_string("\"content\"", "content", &out) == -SPEAR_EINVAL);
    CHECK(reads_as("{\"k\": \"first\", \"k\": \"last\"}", "k", "last", 4)); /* as serde_json */
    CHECK(get_string("{\"k\": \"v\"} x", "k", &out) == -SPEAR_EINVAL);   /* trailing garbage */
    CHECK(get_string("{\"k\": \"v\",}", "k", &out) == -SPEAR_EINVAL);    /* trailing comma */
    CHECK(get_string("{\"k\" \"v\"}", "k", &out) == -SPEAR_EINVAL);      /* no colon */
    CHECK(get_string("{\"k\": \"v\" \"j\": 1}", "k", &out) == -SPEAR_EINVAL);
    CHECK(get_string("{k: \"v\"}", "k", &out) == -SPEAR_EINVAL);
    CHECK(get_string("{\"k\": \"v\"}{}", "k", &out) == -SPEAR_EINVAL);
    CHECK(get_string("{\"k\": 'v'}", "k", &out) == -SPEAR_EINVAL);
    /* A key holding a NUL never equals a C string key. */
    CHECK(get_string("{\"k\\u0000\": \"v\"}", "k", &out) == -SPEAR_ENOENT);
    CHECK(get_string("{\"\": \"empty\"}", "", &out) == 0 && strcmp(out.data, "empty") == 0);
    spear_buf_free(&out);
}

static int number_is(const char *json, double want) {
    size_t len = strlen(json);
    char *doc = exact(json, len);
    double got = -1;
    int ok = spear_json_get_number(doc, len, "n", &got) == 0 && got == want;
    free(doc);
    return ok;
}

static int number_rc(const char *json) {
    size_t len = strlen(json);
    char *doc = exact(json, len);
    double got;
    int rc = spear_json_get_number(doc, len, "n", &got);
    free(doc);
    return rc;
}

static void test_numbers_and_words(void) {
    static const char *const good[] = {"0", "-0", "12", "1.5", "-12.25e+3", "1E-2", "0.0e0"};
    static const char *const bad[] = {"01", "1.", ".5", "-", "1e", "+1", "0x1", "NaN",
                                      "Infinity", "1e+", "--1", "tru", "nul", "truex", "nulll"};
    char doc[64];
    size_t i;
    for (i = 0; i < sizeof good / sizeof good[0]; i++) {
        snprintf(doc, sizeof doc, "[%s]", good[i]);
        CHECK(valid(doc));
    }
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(doc, sizeof doc, "[%s]", bad[i]);
        if (valid(doc)) {
            fprintf(stderr, "  accepted %s\n", doc);
        }
        CHECK(!valid(doc));
    }
    CHECK(valid("[true, false, null]") && valid(" 7 ") && valid("\"s\""));
    CHECK(!valid("") && !valid("   ") && !valid("[") && !valid("]") && !valid("{\"a\"}"));
    CHECK(number_is("{\"n\": 42}", 42.0));
    CHECK(number_is("{\"n\": -2.5e2}", -250.0));
    /* 70 characters, past the reader's 64-byte stack copy: the exact
     * decimal value of the double nearest 0.1. */
    CHECK(number_is("{\"n\": 0.1000000000000000055511151231257827021181583404541015625000000000000}",
                    0.1));
    CHECK(number_rc("{\"n\": \"42\"}") == -SPEAR_EINVAL);
    CHECK(number_rc("{\"n\": null}") == -SPEAR_ENOENT);
    CHECK(number_rc("{\"m\": 1}") == -SPEAR_ENOENT);
}

static void test_arrays(void) {
    const char *doc = "[1, \"two\", {\"three\": [3]}, [], null]";
    const char *elem;
    size_t elem_len, len = strlen(doc);
    char *heap = exact(doc, len);
    CHECK(spear_json_array_len(heap, len) == 5);
    CHECK(spear_json_array_at(heap, len, 2, &elem, &elem_len) == 0);
    CHECK(elem_len == 14 && memcmp(elem, "{\"three\": [3]}", 14) == 0);
    CHECK(spear_json_array_at(heap, len, 4, &elem, &elem_len) == 0 && elem_len == 4);
    CHECK(spear_json_array_at(heap, len, 5, &elem, &elem_len) == -SPEAR_ENOENT);
    free(heap);
    heap = exact("[ ]", 3);
    CHECK(spear_json_array_len(heap, 3) == 0);
    free(heap);
    heap = exact("[1,]", 4);
    CHECK(spear_json_array_len(heap, 4) == -SPEAR_EINVAL);
    free(heap);
    heap = exact("{}", 2);
    CHECK(spear_json_array_len(heap, 2) == -SPEAR_EINVAL);
    free(heap);
}

/* Nesting: up to SPEAR_JSON_MAX_DEPTH is fine, one more is refused, and a
 * million open brackets are refused without recursing. */
static void test_depth(void) {
    size_t deep = 1000000, i;
    char *doc = (char *)malloc(deep);
    if (!doc) {
        abort();
    }
    for (i = 0; i < SPEAR_JSON_MAX_DEPTH; i++) {
        doc[i] = '[';
        doc[2 * SPEAR_JSON_MAX_DEPTH - 1 - i] = ']';
    }
    CHECK(spear_json_validate(doc, 2 * SPEAR_JSON_MAX_DEPTH) == 0);
    memset(doc, '[', deep);
    CHECK(spear_json_validate(doc, deep) == -SPEAR_EINVAL);
    for (i = 0; i <= SPEAR_JSON_MAX_DEPTH; i++) {
        doc[i] = '[';
        doc[2 * SPEAR_JSON_MAX_DEPTH + 1 - i] = ']';
    }
    CHECK(spear_json_validate(doc, 2 * SPEAR_JSON_MAX_DEPTH + 2) == -SPEAR_EINVAL);
    /* Objects count too: {"a":{"a":...}} */
    memset(doc, 0, deep);
    for (i = 0; i < 200; i++) {
        memcpy(doc + 5 * i, "{\"a\":", 5);
        doc[5 * 200 + 1 + i] = '}';
    }
    doc[5 * 200] = '1';
    CHECK(spear_json_validate(doc, 5 * 200 + 1 + 200) == -SPEAR_EINVAL);
    free(doc);
}

/* A reply the node could send, cut at every length, must be refused (never
 * read past) at each one; the whole of it reads. */
static void test_truncation(void) {
    const char *reply =
        "{\"content\": \"caf\\u00e9 \\ud83d\\ude00 \\\"q\\\"\", \"usage\": {\"prompt_tokens\": 1,"
        " \"completion_tokens\": 2}, \"iterations\": 1, \"trace\": [{\"tool_call_id\": \"c1\","
        " \"name\": \"n\", \"server\": null, \"guest\": true, \"is_error\": false,"
        " \"duration_ms\": 0, \"bytes\": -1.5e3}], \"stop_reason\": \"end_turn\"}";
    size_t len = strlen(reply), cut;
    spear_buf out = SPEAR_BUF_INIT;
    int refused = 1;
    CHECK(reads_as(reply, "content", "caf\xc3\xa9 \xf0\x9f\x98\x80 \"q\"", 14));
    for (cut = 0; cut < len; cut++) {
        char *doc = exact(reply, cut);
        /* Every proper prefix of an object is malformed. */
        refused &= spear_json_get_string(doc, cut, "content", &out) == -SPEAR_EINVAL;
        refused &= spear_json_validate(doc, cut) == -SPEAR_EINVAL;
        free(doc);
    }
    CHECK(refused);
    spear_buf_free(&out);
}

/* A fixed-seed generator, so a failure can be replayed. */
static uint32_t next_random(uint32_t *state) {
    *state = *state * 1664525u + 1013904223u;
    return *state >> 8;
}

/* Random documents from JSON's own alphabet, and single-byte corruptions
 * of a real one: whatever the reader answers, it must not crash or read
 * out of bounds, and it must agree with itself. */
static void test_garbage(void) {
    static const char alphabet[] = "{}[]\":,\\ u0dDeE.-+truefalsn19\x01\x80\xc3\xa9\xed\xf0";
    const char *reply = "{\"content\": \"a\\u00e9\\ud83d\\ude00\", \"trace\": [{\"x\": [1, 2.5e1]}]}";
    size_t reply_len = strlen(reply);
    uint32_t seed = 12345;
    spear_buf out = SPEAR_BUF_INIT;
    int consistent = 1, round;
    for (round = 0; round < 200000; round++) {
        char text[24];
        size_t len = next_random(&seed) % sizeof text, i;
        char *doc;
        int got;
        for (i = 0; i < len; i++) {
            text[i] = alphabet[next_random(&seed) % (sizeof alphabet - 1)];
        }
        doc = exact(text, len);
        got = spear_json_get_string(doc, len, "content", &out);
        /* A string read means the document was valid. */
        consistent &= got != 0 || spear_json_validate(doc, len) == 0;
        spear_json_array_len(doc, len);
        free(doc);
    }
    for (round = 0; round < 20000; round++) {
        char *doc = exact(reply, reply_len);
        doc[next_random(&seed) % reply_len] = alphabet[next_random(&seed) % (sizeof alphabet - 1)];
        if (spear_json_get_string(doc, reply_len, "content", &out) == 0) {
            consistent &= spear_json_validate(doc, reply_len) == 0;
        }
        free(doc);
    }
    CHECK(consistent);
    spear_buf_free(&out);
}

static void test_buffers(void) {
    spear_buf buf = SPEAR_BUF_INIT;
    size_t i;
    int ok = 1;
    spear_buf_clear(&buf); /* on a never-used buffer: nothing to do */
    CHECK(buf.data == NULL && buf.len == 0);
    for (i = 0; i < 10000; i++) {
        ok &= spear_buf_append(&buf, "0123456789", 10) == 0;
    }
    CHECK(ok && buf.len == 100000 && buf.data[buf.len] == '\0' && buf.cap > buf.len);
    spear_buf_clear(&buf);
    CHECK(spear_buf_printf(&buf, "%d %s %zu", -7, "words", (size_t)3) == 0);
    CHECK(strcmp(buf.data, "-7 words 3") == 0);
    CHECK(spear_buf_printf(&buf, "%5000d", 1) == 0 && buf.len == 10 + 5000);
    CHECK(spear_buf_reserve(&buf, SIZE_MAX) == -SPEAR_ENOMEM);
    spear_buf_free(&buf);
    CHECK(buf.data == NULL && buf.cap == 0);
}

static int trims_to(const char *text, const char *want) {
    size_t start, len;
    spear_trim(text, strlen(text), &start, &len);
    return len == strlen(want) && memcmp(text + start, want, len) == 0;
}

static void test_text(void) {
    size_t start = 1, len = 1;
    CHECK(spear_utf8_valid("", 0) && spear_utf8_valid(NULL, 0));
    CHECK(spear_utf8_valid("\xc3\xa9\xf0\x9f\x98\x80", 6));
    CHECK(!spear_utf8_valid("\xc3", 1) && !spear_utf8_valid("\xff", 1));
    CHECK(!spear_utf8_valid("\xe0\x80\xaf", 3)); /* overlong '/' */
    CHECK(trims_to("  question \n", "question"));
    CHECK(trims_to("\t\r\n\v\f", ""));
    CHECK(trims_to("\xc2\xa0 a b \xe3\x80\x80", "a b"));              /* U+00A0, U+3000 */
    CHECK(trims_to("\xe2\x80\xa8x\xe2\x80\xa9", "x"));                /* U+2028, U+2029 */
    CHECK(trims_to("\xe2\x80\x8bx\xe2\x80\x8b", "\xe2\x80\x8bx\xe2\x80\x8b")); /* U+200B is not */
    CHECK(trims_to("caf\xc3\xa9 ", "caf\xc3\xa9"));
    CHECK(trims_to("\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80"));
    spear_trim(NULL, 0, &start, &len);
    CHECK(start == 0 && len == 0);
    CHECK(spear_space_len("\xc2\x85", 2) == 2 && spear_space_len("\xc2", 1) == 0);
}

static void test_errors_off_wasm(void) {
    spear_chat chat = {0};
    spear_buf out = SPEAR_BUF_INIT, content = SPEAR_BUF_INIT;
    CHECK(spear_chat_create(&chat) == -SPEAR_ENOSYS && chat.handle == 0);
    CHECK(strcmp(spear_last_error(), "") == 0);
    CHECK(strcmp(spear_strerror(-SPEAR_ENOSYS), "not running on a Spear node") == 0);
    CHECK(spear_chat_close(&chat) == 0); /* never opened: nothing to close */
    chat.handle = 3;
    CHECK(spear_recv(&chat, &out) == -SPEAR_ENOSYS);
    CHECK(spear_send(&chat, SPEAR_SEND_AUTO_TOOL_CALLS) == -SPEAR_ENOSYS);
    CHECK(spear_tool(&chat, "t", "d", NULL, NULL, NULL) == -SPEAR_EINVAL);
    CHECK(strcmp(spear_last_error(), "a guest tool needs a callback") == 0);
    CHECK(strcmp(spear_strerror(-SPEAR_EACCES), "the task does not allow this") == 0);
    CHECK(strcmp(spear_strerror(SPEAR_EFAULT), "an argument is malformed") == 0);
    CHECK(strcmp(spear_strerror(-99), "the host returned errno 99") == 0);
    CHECK(strcmp(spear_strerror(INT_MIN), "the host returned errno 2147483647") == 0);
    CHECK(strcmp(spear_errname(-SPEAR_EDQUOT), "EDQUOT") == 0);
    CHECK(strcmp(spear_errname(-1), "E?") == 0);
    CHECK(spear_reply_content(&out, &content) == -SPEAR_EINVAL); /* nothing received */
    spear_buf_free(&out);
    spear_buf_free(&content);
}

/* The dispatcher as the node drives it, for an id no tool has: a buffer
 * of 8 + len, the arguments after the slot, and an error result back. */
static void test_dispatcher(void) {
    const char *args = "{\"text\": \"a b\"}";
    uint32_t len = (uint32_t)strlen(args), result_len;
    uint8_t *buffer = spear_alloc(8 + len);
    const char *want = "this guest has no tool with id 7";
    memcpy(buffer + 8, args, len);
    CHECK(buffer[8 + len] == 0);
    CHECK(spear_tool_call(7, buffer + 8, len, buffer) == 1);
    result_len = (uint32_t)buffer[4] | (uint32_t)buffer[5] << 8 | (uint32_t)buffer[6] << 16 |
                 (uint32_t)buffer[7] << 24;
    CHECK(result_len == strlen(want));
    CHECK(strcmp(spear__tools.result.data, want) == 0);
    /* The SDK keeps both until the next call; free them here so that
     * LeakSanitizer sees a clean exit. */
    free(spear__tools.args);
    spear__tools.args = NULL;
    spear_buf_free(&spear__tools.result);
}

int main(void) {
    test_escape();
    test_string_array();
    test_round_trips();
    test_unescape();
    test_bad_strings();
    test_get();
    test_numbers_and_words();
    test_arrays();
    test_depth();
    test_truncation();
    test_garbage();
    test_buffers();
    test_text();
    test_errors_off_wasm();
    test_dispatcher();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
