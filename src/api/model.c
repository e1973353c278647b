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
#include "ops/ops.h"
#include "pipelines/registry.h"

static bool has(const cq_cmf *c, const char *name) { return cq_cmf_find(c, name) != NULL; }

/* What the pack holds decides the task; the registry then finds the arch's
 * implementation for it, or names the supported ones. */
static cq_status classify(const cq_cmf *cmf, const char *arch, const char *path, const char *what,
                          cq_model_kind *kind, const cq_arch_entry **entry) {
    if (has(cmf, "dit.config_json") && has(cmf, "te.config_json") && has(cmf, "vae.config_json")) {
        *kind = CQ_MODEL_IMAGE;
        return cq_arch_for_pack(cmf, path, CQ_TASK_IMAGE, entry);
    }
    if (has(cmf, "config_json") &&
        (has(cmf, "model.embed_tokens.weight") || has(cmf, "model.language_model.embed_tokens.weight"))) {
        *kind = CQ_MODEL_TEXT;
        return cq_arch_for_pack(cmf, path, CQ_TASK_CHAT, entry);
    }
    char img[256], txt[256];
    return cq_fail(CQ_ERR_UNSUPPORTED,
                   "%s (arch '%s') is neither a text-to-image pipeline (dit.*, te.*, vae.* with their configs; "
                   "arch %s) nor a language model (config_json and its tensors; arch %s)",
                   what, arch, cq_arch_list(CQ_TASK_IMAGE, img, sizeof img), cq_arch_list(CQ_TASK_CHAT, txt, sizeof txt));
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
    m->gpu_memory = opts->gpu_memory;
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
    if (s == CQ_OK) s = classify(cmf, arch, path, what, &m->kind, &m->entry);
    if (s == CQ_OK && m->kind == CQ_MODEL_IMAGE) s = cq_cmf_gen_defaults(cmf, &m->defaults);
    if (s == CQ_OK && m->kind == CQ_MODEL_IMAGE) {
        s = m->entry->image->open(cmf, &m->pipe);
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

cq_status cq_api_model_use_backend(cq_model *m, cq_backend *be) {
    if (!m) {
        cq_backend_free(be);
        return cq_fail(CQ_ERR_INVALID_ARG, "cq_api_model_use_backend: no model");
    }
    if (m->be) {
        cq_backend_free(be);
        return cq_fail(CQ_ERR_INVALID_ARG, "cq_api_model_use_backend: the model is loaded already");
    }
    cq_backend_free(m->given);
    m->given = be;
    return CQ_OK;
}

cq_status cq_model_load(cq_model *m) {
    if (!m) return cq_fail(CQ_ERR_INVALID_ARG, "cq_model_load: no model");
    if (m->be) return CQ_OK;
    double t = cq_now();
    cq_backend *be = m->given;
    m->given = NULL;
    if (!be) {
        const cq_backend_opts bo = {.cpu = {.threads = m->threads}, .mem_budget = m->gpu_memory};
        CQ_TRY(cq_backend_open(m->backend_req ? m->backend_req : "cpu", &bo, &be));
    }
    cq_status s;
    if (m->kind == CQ_MODEL_IMAGE) {
        s = m->entry->image->load_weights(m->pipe, be);
    } else {
        s = m->entry->chat->load(m->cmf, be, &m->lm_model, &m->lm, &m->lm_plan);
        if (s != CQ_OK && m->name) cq_fail_prefix(s, "%s: ", m->name);
    }
    if (s != CQ_OK) {
        /* the pipeline may hold tensors of this backend: drop it with them */
        if (m->pipe) {
            m->entry->image->free(m->pipe);
            m->pipe = NULL;
            if (m->entry->image->open(m->cmf, &m->pipe) != CQ_OK) m->pipe = NULL;
        }
        if (m->lm_model) {
            m->entry->chat->free(m->lm_model);
            m->lm_model = NULL;
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
    if (m->pipe) m->entry->image->free(m->pipe);
    if (m->lm_model) m->entry->chat->free(m->lm_model);
    cq_backend_free(m->be);
    cq_backend_free(m->given);
    cq_cmf_close(m->owned);
    cq_free(m->arch);
    cq_free(m->name);
    cq_free(m->backend_req);
    cq_gen_defaults_free(&m->defaults);
    cq_free(m);
}

cq_model_kind cq_model_get_kind(const cq_model *m) { return m ? m->kind : (cq_model_kind)0; }
const char *cq_model_arch(const cq_model *m) { return m && m->arch ? m->arch : ""; }
const char *cq_model_backend_name(const cq_model *m) { return m && m->be ? cq_backend_name(m->be) : ""; }
double cq_model_load_seconds(const cq_model *m) { return m ? m->load_s : 0; }

const char *cq_model_memory_plan(const cq_model *m, char *buf, size_t len) {
    if (!buf || !len) return "";
    buf[0] = '\0';
    if (!m || !m->be) return buf;
    const cq_resid_plan *p = m->kind == CQ_MODEL_IMAGE ? (m->pipe && m->entry->image->residency
                                                              ? &m->entry->image->residency(m->pipe)->plan
                                                              : NULL)
                                                       : &m->lm_plan;
    if (p && p->level > 0) cq_resid_plan_describe(p, buf, len);
    return buf;
}
