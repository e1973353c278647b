/*
 * convert_repack.c — `convert` of a .cmf source (convert.h): every tensor
 * copied as it is stored, its hash checked on the way, --drop applied, the
 * header kept but for its generation defaults (the pack's own, with
 * opts.defaults over them) and its section hashes (the writer records them
 * anew). Nothing is decoded or re-encoded, so the copy costs one read and one
 * write of the file.
 */
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "format/cmf.h"
#include "format/convert_impl.h"
#include "format/jsonutil.h"

static bool dropped(const cq_convert_opts *o, const char *name, bool *used) {
    for (size_t i = 0; i < o->n_drop; i++)
        if (fnmatch(o->drop[i], name, 0) == 0) {
            used[i] = true;
            return true;
        }
    return false;
}

static bool is_config(const char *name) {
    const size_t n = strlen(name);
    return n >= 11 && strcmp(name + n - 11, "config_json") == 0;
}

/* The source's header with the new defaults and without section_hashes, as JSON text. */
static cq_status new_header(const cq_cmf *cmf, const cq_convert_opts *opts, cq_convert_report *rep, char **json) {
    size_t len;
    const char *hj = cq_cmf_header_json(cmf, &len);
    cJSON *h = NULL;
    CQ_TRY(cq_json_parse(hj, len, "header JSON", &h));
    cJSON_DeleteItemFromObjectCaseSensitive(h, "section_hashes");
    cq_gen_defaults d;
    cq_status s = cq_cmf_gen_defaults(cmf, &d);
    if (s == CQ_OK && opts->defaults) s = cq_gen_defaults_merge(&d, opts->defaults);
    if (s == CQ_OK) s = cq_gen_defaults_to_header(&d, h);
    if (s == CQ_OK) cq_gen_defaults_describe(&d, rep->defaults, sizeof rep->defaults);
    cq_gen_defaults_free(&d);
    size_t out_len;
    if (s == CQ_OK) s = cq_json_print(h, json, &out_len);
    cJSON_Delete(h);
    return s;
}

static cq_status copy_all(const cq_cmf *cmf, const char *out, const cq_convert_opts *opts, bool *used,
                          cq_convert_report *rep) {
    cq_cmf_info in;
    CQ_TRY(cq_cmf_get_info(cmf, &in));
    snprintf(rep->arch, sizeof rep->arch, "%s", in.arch_name ? in.arch_name : "unknown");
    snprintf(rep->layout, sizeof rep->layout, "cmf");
    snprintf(rep->quant_type, sizeof rep->quant_type, "%s", in.quant_type ? in.quant_type : "");
    if (in.masks_len || in.index_len)
        return cq_fail(CQ_ERR_UNSUPPORTED, "convert: the source pack has %s; copying a pack is implemented for packs "
                       "without them", in.masks_len ? "task masks" : "a sparse index");
    char *header = NULL;
    CQ_TRY(new_header(cmf, opts, rep, &header));
    size_t tok_len = 0;
    const uint8_t *tok = cq_cmf_tokenizer_json(cmf, &tok_len);
    rep->has_tokenizer = tok != NULL;
    rep->has_chat_template = cq_cmf_chat_template(cmf) != NULL;
    cq_cmf_writer *w = NULL;
    cq_status s = cq_cmf_writer_create(out, &w);
    if (s == CQ_OK) s = cq_cmf_writer_check_space(w, in.file_size);
    if (s == CQ_OK) s = cq_cmf_writer_set_header(w, header, strlen(header));
    if (s == CQ_OK && tok) s = cq_cmf_writer_set_tokenizer(w, tok, tok_len);
    uint64_t total = 0, done = 0;
    for (size_t i = 0; i < in.tensor_count; i++) total += cq_cmf_tensor_at(cmf, i)->nbytes;
    size_t kept = 0;
    for (size_t i = 0; s == CQ_OK && i < in.tensor_count; i++) {
        const cq_tensor_view *t = cq_cmf_tensor_at(cmf, i);
        done += t->nbytes;
        if (!is_config(t->name) && dropped(opts, t->name, used)) {
            rep->dropped++;
            rep->dropped_bytes += t->nbytes;
            continue;
        }
        s = cq_check_cancel("the conversion");
        if (s == CQ_OK) s = cq_cmf_check_tensor(t); /* a damaged payload is not copied into a fresh hash */
        if (s == CQ_OK) s = cq_cmf_writer_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, t->nbytes);
        if (s != CQ_OK) break;
        kept++;
        rep->bytes_in += t->nbytes;
        cq_convert_codec_stat *c = &rep->codec[t->dtype];
        c->tensors++;
        c->bytes += t->nbytes;
        snprintf(c->worst_name, sizeof c->worst_name, "copied as stored");
        if (opts->progress && opts->progress(done, total, opts->progress_user))
            s = cq_fail(CQ_ERR_INTERRUPTED, "convert: cancelled");
    }
    for (size_t i = 0; s == CQ_OK && i < opts->n_drop; i++)
        if (!used[i]) s = cq_fail(CQ_ERR_INVALID_ARG, "convert: the drop pattern '%s' matches no tensor", opts->drop[i]);
    rep->tensors = kept;
    if (s == CQ_OK && opts->verify_progress) cq_cmf_writer_set_progress(w, opts->verify_progress, opts->verify_user);
    if (s == CQ_OK) s = cq_cmf_writer_finish(w);
    cq_cmf_writer_free(w);
    cq_free(header);
    return s;
}

cq_status cv_repack(const char *src, const char *out, const cq_convert_opts *opts, cq_convert_report *rep) {
    if (opts->quant >= 0 || opts->n_rules)
        return cq_fail(CQ_ERR_INVALID_ARG, "convert: %s is a .cmf pack, whose tensors are copied as they are stored; "
                       "--quant and --quant-rule need the original safetensors folder", src);
    double t0 = cq_now();
    cq_cmf *cmf = NULL;
    CQ_TRY(cq_cmf_open(src, &cmf));
    bool *used = cq_calloc(opts->n_drop ? opts->n_drop : 1, sizeof *used);
    cq_status s = used ? copy_all(cmf, out, opts, used, rep) : CQ_ERR_NOMEM;
    cq_free(used);
    cq_cmf_close(cmf);
    if (s == CQ_OK) {
        struct stat sb;
        if (stat(out, &sb) == 0) rep->file_size = (uint64_t)sb.st_size;
    }
    rep->seconds = cq_now() - t0;
    return s;
}
