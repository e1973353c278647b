/*
 * cancel.c — the process-wide cancellation flag (see base.h). A lock-free
 * atomic int, so a signal handler may set it.
 */
#include <stdatomic.h>

#include "base/base.h"

static atomic_int g_cancel;

void cq_cancel_request(void) { atomic_store_explicit(&g_cancel, 1, memory_order_relaxed); }

void cq_cancel_clear(void) { atomic_store_explicit(&g_cancel, 0, memory_order_relaxed); }

bool cq_cancel_requested(void) { return atomic_load_explicit(&g_cancel, memory_order_relaxed) != 0; }

cq_status cq_check_cancel(const char *what) {
    if (!cq_cancel_requested()) return CQ_OK;
    return cq_fail(CQ_ERR_INTERRUPTED, "%s interrupted", what && *what ? what : "work");
}
