/*
 * The components benchmark's core-module guest (tests/benches/components.rs),
 * as bench_agent.py, the input on stdin: "start", "chat N" or "spin".
 */
#define SPEAR_IMPLEMENTATION
#include "spear.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
    char input[64] = {0};
    size_t got = fread(input, 1, sizeof input - 1, stdin);
    input[got] = '\0';
    spear_chat chat = {0};
    if (strncmp(input, "start", 5) == 0) {
        spear_buf model = SPEAR_BUF_INIT;
        int rc = spear_chat_create(&chat);
        if (rc == 0) rc = spear_get_param(&chat, "model", &model);
        spear_chat_close(&chat);
        return rc < 0 ? 1 : 0;
    }
    if (strncmp(input, "chat ", 5) == 0) {
        long n = strtol(input + 5, NULL, 10);
        spear_buf reply = SPEAR_BUF_INIT;
        for (long i = 0; i < n; i++) {
            int rc = spear_chat_create(&chat);
            if (rc == 0) rc = spear_write(&chat, "user", "hi");
            if (rc == 0) rc = spear_send(&chat, SPEAR_SEND_NO_TOOLS);
            if (rc == 0) rc = spear_recv(&chat, &reply);
            spear_chat_close(&chat);
            if (rc < 0) {
                spear_perror("chat", rc);
                return 1;
            }
        }
        return 0;
    }
    for (volatile unsigned long i = 0;; i++) {
    }
}
