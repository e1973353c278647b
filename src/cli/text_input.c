/*
 * text_input.c — a prompt from a file or from standard input ("-"), for
 * `imagine --prompt-file` and `run --prompt -`.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

#define CQ_CLI_TEXT_MAX (4u << 20) /* far beyond any model's context */

char *cq_cli_read_text(const char *cmd, const char *path) {
    const bool use_stdin = strcmp(path, "-") == 0;
    FILE *f = use_stdin ? stdin : fopen(path, "rb");
    const char *shown = use_stdin ? "standard input" : path;
    if (!f) {
        fprintf(stderr, "cortiq %s: error: cannot read the prompt from '%s': %s\n", cmd, path, strerror(errno));
        return NULL;
    }
    size_t n = 0, cap = 4096;
    char *b = cq_malloc(cap);
    bool bad = false;
    while (b) {
        const size_t r = fread(b + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0) {
            if (ferror(f)) {
                fprintf(stderr, "cortiq %s: error: reading the prompt from %s: %s\n", cmd, shown, strerror(errno));
                bad = true;
            }
            break;
        }
        if (n > CQ_CLI_TEXT_MAX) {
            fprintf(stderr, "cortiq %s: error: the prompt in %s is larger than %u MiB\n", cmd, shown,
                    CQ_CLI_TEXT_MAX >> 20);
            bad = true;
            break;
        }
        if (n + 1 == cap) {
            char *nb = cq_realloc(b, cap * 2);
            if (!nb) cq_free(b);
            b = nb;
            cap *= 2;
        }
    }
    if (!use_stdin) fclose(f);
    if (!b) {
        fprintf(stderr, "cortiq %s: error: out of memory reading the prompt\n", cmd);
        return NULL;
    }
    b[n] = '\0';
    if (!bad && strlen(b) != n) {
        fprintf(stderr, "cortiq %s: error: the prompt in %s has a NUL byte (at byte %zu)\n", cmd, shown, strlen(b) + 1);
        bad = true;
    }
    if (bad) {
        cq_free(b);
        return NULL;
    }
    /* one final line ending, as editors and `echo` add it */
    if (n && b[n - 1] == '\n') b[--n] = '\0';
    if (n && b[n - 1] == '\r') b[--n] = '\0';
    return b;
}
