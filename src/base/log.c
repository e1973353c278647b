/*
 * log.c — a settable log sink. The default writes warnings and errors to
 * stderr; cq_set_log_level changes the level (the CLI maps CORTIQ_LOG onto
 * it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/base.h"

static cq_log_fn g_log_fn;
static void *g_log_user;
static _Atomic int g_log_level = CQ_LOG_WARN;

void cq_set_log(cq_log_fn fn, void *user, cq_log_level min_level) {
    g_log_fn = fn;
    g_log_user = user;
    g_log_level = (int)min_level;
}

void cq_set_log_level(cq_log_level min_level) { g_log_level = (int)min_level; }

void cq_log(cq_log_level level, const char *fmt, ...) {
    if ((int)level < g_log_level) return;
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (g_log_fn) {
        g_log_fn(level, buf, g_log_user);
        return;
    }
    static const char *const tags[] = {"debug", "info", "warning", "error"};
    fprintf(stderr, "cortiq: %s: %s\n", tags[level < 4 ? level : 3], buf);
}

double cq_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
