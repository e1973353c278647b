/*
 * cli_common.c — what both programs, `cortiq` and `cortiq-bench`, share:
 * error and usage messages, option value parsing, and the mapping of the
 * environment onto the library's settings (the library reads none itself).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/env.h"
#include "ops/ops.h"

int cq_cli_fail(const char *cmd, cq_status s, const char *what) {
    if (s == CQ_ERR_INTERRUPTED && cq_cli_signal()) return cq_cli_interrupted(cmd, cq_last_error());
    const char *msg = cq_last_error();
    if (what && *what && *msg && strstr(msg, what)) what = NULL; /* the message names it already (a path, say) */
    fprintf(stderr, "cortiq %s: error: %s%s%s (%s)\n", cmd, what ? what : "", (what && *what && *msg) ? ": " : "", msg,
            cq_status_str(s));
    return 1;
}

int cq_cli_usage_error(const char *cmd, const char *fmt, ...) {
    fprintf(stderr, "cortiq %s: ", cmd);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see `cortiq %s --help`)\n", cmd);
    return 2;
}

bool cq_cli_is_help(const char *arg) { return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0; }

bool cq_cli_parse_int(const char *cmd, const char *opt, const char *val, long lo, long hi, long *out) {
    if (!val) {
        cq_cli_usage_error(cmd, "%s needs a value", opt);
        return false;
    }
    char *end;
    long v = strtol(val, &end, 10);
    if (*val == '\0' || *end != '\0' || v < lo || v > hi) {
        cq_cli_usage_error(cmd, "%s wants an integer in [%ld, %ld], got '%s'", opt, lo, hi, val);
        return false;
    }
    *out = v;
    return true;
}

int cq_cli_backend_pick(const char *cmd, const char *given, const char *dflt, const char *gpu_memory,
                        cq_cli_backend *out) {
    memset(out, 0, sizeof *out);
    const char *from;
    const char *name = cq_env_backend_or(given, dflt, &from);
    if (cq_env_gpu_memory(gpu_memory, &out->mem_budget) != CQ_OK)
        return cq_cli_usage_error(cmd, "%s%s", gpu_memory ? "--gpu-memory: " : "", cq_last_error());
    char why[256] = "";
    if (cq_env_backend_resolve(name, out->name, sizeof out->name, why, sizeof why) != CQ_OK)
        return cq_cli_usage_error(cmd, "%s%s", strcmp(from, "CORTIQ_BACKEND") ? "" : "CORTIQ_BACKEND: ",
                                  cq_last_error());
    const bool dflt_used = !strcmp(from, "default");
    if (cq_backend_is_auto(name))
        snprintf(out->why, sizeof out->why, "auto%s%s: %s", dflt_used ? "" : " from ", dflt_used ? "" : from, why);
    else
        snprintf(out->why, sizeof out->why, "%s%s", dflt_used ? "the default" : "from ", dflt_used ? "" : from);
    return 0;
}

void cq_cli_backend_say(const cq_cli_backend *b) {
    char budget[32] = "";
    const cq_backend_desc *d = NULL;
    /* the budget is a device backend's; the name is concrete here, so the lookup probes nothing */
    const bool device = cq_backend_lookup(b->name, &d, NULL) == CQ_OK && d->has_devices;
    if (b->mem_budget) cq_fmt_bytes(b->mem_budget, budget, sizeof budget);
    fprintf(stderr, "backend: %s (%s)%s%s%s\n", b->name, b->why, b->mem_budget ? (device ? "; device-memory budget " :
                                                                                  "; --gpu-memory ") : "",
            budget, b->mem_budget && !device ? " does not apply to it" : "");
}
