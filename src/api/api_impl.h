/*
 * api_impl.h — what the public runtime API (include/cortiq.h: cq_model,
 * cq_image, cq_session) keeps behind its opaque handles, and the two internal
 * entries the CLI uses beyond the public calls: writing a picture into an
 * output file it opened before the work (so a bad path fails first), and
 * handing over a backend made from its environment mapping.
 *
 * The layer is thin on purpose: a model holds the container, the backend and
 * the implementation the model registry (pipelines/registry.h) gives for the
 * pack's arch: an image pipeline, or a causal LM for chat (pipelines/chat.h);
 * each call maps the public options onto the registry's.
 */
#ifndef CQ_API_API_IMPL_H
#define CQ_API_API_IMPL_H

#include "cortiq.h"

#include "format/gen_defaults.h"
#include "models/component.h"
#include "pipelines/residency.h"

struct cq_outfile;
struct cq_backend;
struct cq_arch_entry;

struct cq_model {
    cq_cmf *owned;          /* the container when cq_model_open opened it */
    const cq_cmf *cmf;
    cq_model_kind kind;
    const struct cq_arch_entry *entry; /* the registry's implementation of the pack's arch */
    char *arch, *name;
    char *backend_req;      /* the requested backend name (NULL: cpu) */
    int threads;
    uint64_t gpu_memory;    /* cq_model_opts.gpu_memory: the device-memory budget in bytes (0: the default) */
    struct cq_backend *given; /* a backend handed over by cq_api_model_use_backend, used by the load */
    struct cq_backend *be;  /* NULL until loaded */
    double load_s;
    void *pipe;             /* CQ_MODEL_IMAGE: the architecture's pipeline, opened at open, weights at load */
    cq_gen_defaults defaults; /* the pack's generation defaults (CQ_MODEL_IMAGE) */
    void *lm_model;         /* CQ_MODEL_TEXT: the architecture's model, at load */
    cq_resid_plan lm_plan;  /* CQ_MODEL_TEXT: how its weights are kept (residency.h) */
    cq_causal_lm lm;        /* and its causal-LM interface */
    bool session_open;
};

/* The image writer both cq_image_write_png and `cortiq imagine` use: the same
 * pixels and text chunks into an output the caller opened and commits. */
cq_status cq_api_image_png_out(const cq_image *img, struct cq_outfile *f);

/* Load on `be` (created by the caller with options the public API does not
 * carry, such as the CLI's CORTIQ_CUDA_* mapping) instead of creating one by
 * name; the model owns it from here, also when the call fails. */
cq_status cq_api_model_use_backend(cq_model *m, struct cq_backend *be);

#endif /* CQ_API_API_IMPL_H */
