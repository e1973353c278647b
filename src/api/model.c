/*
 * model.c — cq_model: a pack opened for running (include/cortiq.h). Opening
 * maps the pack, decides what it is from its tensors and arch and opens that
 * kind's pipeline without weights; loading creates the backend and binds the
 * weights on it.
 */
#include <stdio.h>
#include <string.h>

#include "api/api_impl.h"
#include "base/base.h"
#include "format/cmf.h"
#include "models/qwen3.h"
#include "ops/ops.h"
#include "pipelines/qi21_pipe.h"

/* The image architectures cq_image_generate draws with and the text ones
 * cq_session_open chats with. */
#define CQ_IMAGE_ARCHS "qwen_image21"
#define CQ_TEXT_ARCHS "qwen3"

static bool has(const cq_cmf *c, const char *name) { return cq_cmf_find(c, name) != NULL; }

static cq_status classify(const cq_cmf *cmf, const char *arch, const char *what, cq_model_kind *kind) {
    if (has(cmf, "dit.config_json") && has(cmf, "te.config_json") && has(cmf, "vae.config_json")) {
        if (strcmp(arch, "qwen_image21") != 0)
            return cq_fail(CQ_ERR_UNSUPPORTED, "%s is an image pipeline of arch '%s'; supported: " CQ_IMAGE_ARCHS,
                           what, arch);
        *kind = CQ_MODEL_IMAGE;
        return CQ_OK;
    }
    if (has(cmf, "config_json") &&
        (has(cmf, "model.embed_tokens.weight") || has(cmf, "model.language_model.embed_tokens.weight"))) {
        *kind = CQ_MODEL_TEXT;
        return CQ_OK;
    }
    return cq_fail(CQ_ERR_UNSUPPORTED,
                   "%s (arch '%s') is neither a text-to-image pipeline (dit.*, te.*, vae.* with their configs; "
                   "arch " CQ_IMAGE_ARCHS ") nor a language model (config_json and its tensors; arch " CQ_TEXT_ARCHS ")",
                   what, arch);
}

static cq_status open_on(const cq_cmf *cmf, cq_cmf *owned, const char *path, const cq_model_opts *opts,
                         cq_model **out) {
    static const cq_model_opts none = {0};
    if (!opts) opts = &none;
    cq_cmf_info info;
    cq_status s = cq_cmf_get_info(cmf, &info);
    if (s != CQ_OK) {
        cq_cmf_close(owned);
        return s;
    }
    const char *arch = info.arch_name ? info.arch_name : "";
    cq_model *m = cq_calloc(1, sizeof *m);
    if (!m) {
        cq_cmf_close(owned);
        return CQ_ERR_NOMEM;
    }
    m->owned = owned;
    m->cmf = cmf;
    m->threads = opts->threads;
    const char *base = path ? strrchr(path, '/') : NULL;
    base = base ? base + 1 : path;
    const char *name = opts->name ? opts->name : base ? base : arch;
    m->arch = cq_strdup(arch);
    m->name = cq_strdup(name);
    m->backend_req = opts->backend ? cq_strdup(opts->backend) : NULL;
    if (!m->arch || !m->name || (opts->backend && !m->backend_req)) s = CQ_ERR_NOMEM;
    char what[64 + 512];
    if (path)
        snprintf(what, sizeof what, "'%.512s'", path);
    else
        snprintf(what, sizeof what, "the pack");
    if (s == CQ_OK) s = classify(cmf, arch, what, &m->kind);
    if (s == CQ_OK && m->kind == CQ_MODEL_IMAGE) {
        s = cq_qi21_pipe_open(cmf, &m->pipe);
        if (s != CQ_OK && path) cq_fail_prefix(s, "%s: ", path);
    }
    if (s != CQ_OK) {
        cq_model_free(m);
        return s;
    }
    *out = m;
    return CQ_OK;
}

cq_status cq_model_open(const char *path, const cq_model_opts *opts, cq_model **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_model_open: out is NULL");
    *out = NULL;
    if (!path || !*path) return cq_fail(CQ_ERR_INVALID_ARG, "cq_model_open: no path");
    const cq_cmf_open_opts co = {.no_verify = opts && opts->no_verify, .threads = opts ? opts->threads : 0};
    cq_cmf *cmf = NULL;
    CQ_TRY(cq_cmf_open_ex(path, &co, &cmf));
    return open_on(cmf, cmf, path, opts, out);
}

cq_status cq_model_open_cmf(const cq_cmf *cmf, const cq_model_opts *opts, cq_model **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_model_open_cmf: out is NULL");
    *out = NULL;
    if (!cmf) return cq_fail(CQ_ERR_INVALID_ARG, "cq_model_open_cmf: no container");
    return open_on(cmf, NULL, NULL, opts, out);
}

cq_status cq_model_load(cq_model *m) {
    if (!m) return cq_fail(CQ_ERR_INVALID_ARG, "cq_model_load: no model");
    if (m->be) return CQ_OK;
    double t = cq_now();
    cq_backend *be = NULL;
    CQ_TRY(cq_backend_create(m->backend_req, m->threads, &be));
    cq_status s;
    if (m->kind == CQ_MODEL_IMAGE) {
        s = cq_qi21_pipe_load_weights(m->pipe, be);
    } else {
        s = cq_qwen3_load(m->cmf, "", be, &m->lm);
        if (s != CQ_OK && m->name) cq_fail_prefix(s, "%s: ", m->name);
    }
    if (s != CQ_OK) {
        /* the pipeline may hold tensors of this backend: drop it with them */
        if (m->pipe) {
            cq_qi21_pipe_free(m->pipe);
            m->pipe = NULL;
            if (cq_qi21_pipe_open(m->cmf, &m->pipe) != CQ_OK) m->pipe = NULL;
        }
        cq_backend_free(be);
        return s;
    }
    m->be = be;
    m->load_s = cq_now() - t;
    return CQ_OK;
}

void cq_model_free(cq_model *m) {
    if (!m) return;
    cq_qi21_pipe_free(m->pipe);
    cq_qwen3_free(m->lm);
    cq_backend_free(m->be);
    cq_cmf_close(m->owned);
    cq_free(m->arch);
    cq_free(m->name);
    cq_free(m->backend_req);
    cq_free(m);
}

cq_model_kind cq_model_get_kind(const cq_model *m) { return m ? m->kind : (cq_model_kind)0; }
const char *cq_model_arch(const cq_model *m) { return m && m->arch ? m->arch : ""; }
const char *cq_model_backend_name(const cq_model *m) { return m && m->be ? cq_backend_name(m->be) : ""; }
double cq_model_load_seconds(const cq_model *m) { return m ? m->load_s : 0; }
