/*
 * status.c — status names and the per-thread "last error" message.
 *
 * The message is thread-local so concurrent callers (e.g. two pipelines in
 * one process) never see each other's errors; it is not process-global state.
 */
#include <stdio.h>
#include <string.h>

#include "base/base.h"

static const char *const k_status_names[] = {
    "CQ_OK",           "CQ_ERR_IO",          "CQ_ERR_NOMEM",    "CQ_ERR_INVALID_ARG",
    "CQ_ERR_BOUNDS",   "CQ_ERR_PARSE",       "CQ_ERR_MAGIC",    "CQ_ERR_VERSION",
    "CQ_ERR_FEATURE",  "CQ_ERR_DTYPE",       "CQ_ERR_MISSING",  "CQ_ERR_HASH",
    "CQ_ERR_UNSUPPORTED", "CQ_ERR_SHAPE",    "CQ_ERR_NUMERIC",  "CQ_ERR_INTERNAL",
    "CQ_ERR_INTERRUPTED",
    "CQ_ERR_AGAIN",
};
_Static_assert(sizeof(k_status_names) / sizeof(k_status_names[0]) == CQ_STATUS_COUNT,
               "status name table out of step with cq_status");

#define CQ_ERRMSG_LEN 1024
static _Thread_local char t_errmsg[CQ_ERRMSG_LEN];

const char *cq_status_str(cq_status s) {
    if ((unsigned)s >= CQ_STATUS_COUNT) return "CQ_ERR_UNKNOWN";
    return k_status_names[s];
}

const char *cq_last_error(void) { return t_errmsg; }

void cq_clear_error(void) { t_errmsg[0] = '\0'; }

const char *cq_version(void) { return "0.1.0"; }

cq_status cq_failv(cq_status s, const char *fmt, va_list ap) {
    vsnprintf(t_errmsg, sizeof t_errmsg, fmt, ap);
    return s;
}

cq_status cq_fail(cq_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cq_failv(s, fmt, ap);
    va_end(ap);
    return s;
}

cq_status cq_fail_prefix(cq_status s, const char *fmt, ...) {
    char old[CQ_ERRMSG_LEN];
    memcpy(old, t_errmsg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t_errmsg, sizeof t_errmsg, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof t_errmsg)
        snprintf(t_errmsg + n, sizeof t_errmsg - (size_t)n, "%s", old);
    return s;
}
