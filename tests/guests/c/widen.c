/*
 * widen.c - a C guest that widens its session past the task's servers and
 * prints how the node refused it: the errno's name and the node's
 * sentence (tests/tests/guest_cli.rs).
 */
#define SPEAR_IMPLEMENTATION
#include "spear.h"

#include <stdio.h>

int main(void) {
    static const char *const servers[] = {"fs", "elsewhere"};
    spear_chat chat = {0};
    int rc = spear_chat_create(&chat);
    if (rc == 0) {
        rc = spear_use_servers(&chat, servers, 2);
    }
    if (rc == 0) {
        printf("the node let the session widen\n");
    } else {
        printf("refused (%s): %s\n", spear_errname(rc), spear_last_error());
    }
    spear_chat_close(&chat);
    return 0;
}
