/*
 * api_impl.h — what the public runtime API (include/cortiq.h: cq_model,
 * cq_image, cq_session) keeps behind its opaque handles, and the one internal
 * entry the CLI uses beyond the public calls: writing a picture into an output
 * file it opened before the work (so a bad path fails first).
 *
 * The layer is thin on purpose: a model holds the container, the backend and
 * the pipeline of its kind (pipelines/qi21_pipe.h for images,
 * models/qwen3.h + pipelines/chat.h for text); each call maps the public
 * options onto that pipeline's.
 */
#ifndef CQ_API_API_IMPL_H
#define CQ_API_API_IMPL_H

#include "cortiq.h"

struct cq_outfile;
struct cq_backend;
struct cq_qi21_pipe;
struct cq_qwen3;

struct cq_model {
    cq_cmf *owned;          /* the container when cq_model_open opened it */
    const cq_cmf *cmf;
    cq_model_kind kind;
    char *arch, *name;
    char *backend_req;      /* the requested backend name (NULL: the default) */
    int threads;
    struct cq_backend *be;  /* NULL until loaded */
    double load_s;
    struct cq_qi21_pipe *pipe; /* CQ_MODEL_IMAGE: opened at open, weights at load */
    struct cq_qwen3 *lm;       /* CQ_MODEL_TEXT: at load */
    bool session_open;
};

/* The image writer both cq_image_write_png and `cortiq imagine` use: the same
 * pixels and text chunks into an output the caller opened and commits. */
cq_status cq_api_image_png_out(const cq_image *img, struct cq_outfile *f);

#endif /* CQ_API_API_IMPL_H */
