/*
 * fallback.h — per-op fallback: an op a device backend does not run (no
 * vtable entry, or supports() false) runs on its host backend (the CPU
 * backend, created at the first such op with the device backend's host
 * options) with its operands copied across: inputs downloaded, the output
 * downloaded (ops may accumulate into it or work in place), the op run on
 * the host, the output uploaded back. Correct and slow; logged once per op
 * kind and backend at info level. Weights are read from the pack's mapping
 * (cq_tensor.wsrc), so the pack stays mapped while its weights are in use.
 *
 * Only ops_front.c calls these, after validating the arguments and asking
 * cq_fallback_route.
 */
#ifndef CQ_OPS_FALLBACK_H
#define CQ_OPS_FALLBACK_H

#include "ops/backend.h"

/* Whether `op` with these dtypes (wdt2: a second weight's codec, else wdt)
 * runs on be's host backend instead: false for host backends, backends
 * opened with no_fallback, and combinations the host does not run either.
 * Creates the host backend on first need and logs the first fallback of
 * each op kind. */
bool cq_fallback_route(cq_backend *be, cq_op op, cq_dtype wdt, cq_dtype xdt, cq_dtype wdt2);

/* cq_status cq_fallback_<name>(cq_backend *be, ...) for every op of ops_list.h */
CQ_OPS_DECLARE(cq_fallback_)

#endif /* CQ_OPS_FALLBACK_H */
