/*
 * log.c — a settable log sink. The default writes warnings and errors to
 * stderr; CORTIQ_LOG=debug|info|warn|error|none changes the default level.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/base.h"

static cq_log_fn g_log_fn;
static void *g_log_user;
static int g_log_level = -1; /* -1: not yet read from the environment */

static int env_level(void) {
    const char *e = getenv("CORTIQ_LOG");
    if (!e) return CQ_LOG_WARN;
    static const char *const names[] = {"debug", "info", "warn", "error", "none"};
    for (int i = 0; i < 5; i++)
        if (strcasecmp(e, names[i]) == 0) return i;
    return CQ_LOG_WARN;
}

void cq_set_log(cq_log_fn fn, void *user, cq_log_level min_level) {
    g_log_fn = fn;
    g_log_user = user;
    g_log_level = (int)min_level;
}

void cq_log(cq_log_level level, const char *fmt, ...) {
    if (g_log_level < 0) g_log_level = env_level();
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
