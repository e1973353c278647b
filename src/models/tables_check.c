/*
 * tables_check.c — a pack against the tensor tables of the architectures it
 * holds (cq_tables_check_pack): what `cortiq convert` warns about.
 */
#include <stdio.h>
#include <string.h>

#include "models/kit/vision.h"
#include "models/tables.h"

static void add(cq_tt_report *to, const cq_tt_report *r) {
    to->missing += r->missing;
    to->unexpected += r->unexpected;
    to->mismatched += r->mismatched;
}

/* A config that is not the architecture's (another class, another model
 * type) means an unknown architecture: nothing to check, nothing to say. A
 * known one that does not parse is worth a note. */
static bool usable(cq_status s, const char *what, cq_tt_note_fn note, void *user) {
    if (s == CQ_OK) return true;
    if (s != CQ_ERR_UNSUPPORTED && s != CQ_ERR_MISSING && note) {
        char line[600];
        snprintf(line, sizeof line, "%s: the config does not parse, so its tensors were not checked: %s", what,
                 cq_last_error());
        note(user, line);
    }
    return false;
}

static cq_status check_list(const char *who, cq_tt_list *t, cq_status s, const cq_cmf *cmf, const char *prefix,
                            cq_tt_note_fn note, void *user, cq_tt_report *rep, int *n) {
    cq_tt_report r;
    if (s == CQ_OK) s = cq_tt_compare(who, t, cmf, prefix, note, user, &r);
    if (s == CQ_OK) {
        add(rep, &r);
        (*n)++;
    }
    cq_tt_list_free(t);
    return s;
}

static cq_status check_qwen3(const cq_cmf *cmf, const char *prefix, cq_tt_note_fn note, void *user, cq_tt_report *rep,
                             int *n) {
    cq_qwen3_config c;
    if (!usable(cq_qwen3_parse_config(cmf, prefix, &c), "qwen3", note, user)) return CQ_OK;
    const char *stack = cq_qwen3_stack_prefix(cmf, prefix);
    cq_tt_list t = {0};
    if (!stack) stack = "model."; /* everything is missing: say so under the usual names */
    return check_list("qwen3", &t, cq_qwen3_tensors(&c, prefix, stack, &t), cmf, prefix, note, user, rep, n);
}

static cq_status check_gemma4(const cq_cmf *cmf, const char *prefix, cq_tt_note_fn note, void *user,
                              cq_tt_report *rep, int *n) {
    cq_gemma4_config c;
    if (!usable(cq_gemma4_parse_config(cmf, prefix, &c), "gemma4", note, user)) return CQ_OK;
    const char *stack = cq_gemma4_stack_prefix(cmf, prefix);
    cq_tt_list t = {0};
    if (!stack) stack = "model.";
    return check_list("gemma4", &t, cq_gemma4_tensors(&c, prefix, stack, &t), cmf, prefix, note, user, rep, n);
}

/* A Qwen2.5-VL or Qwen3-VL text encoder's vision tower, where the pack keeps it (a text-only pack may leave it
 * out). Qwen3-VL's is the one with a learned position table. */
static cq_status check_vision(const cq_cmf *cmf, const char *prefix, cq_tt_note_fn note, void *user,
                              cq_tt_report *rep, int *n) {
    char sp[256] = "";
    const char *stem = cq_vision_stem(cmf, prefix);
    if (!stem) return CQ_OK;
    snprintf(sp, sizeof sp, "%s%s", prefix, stem);
    char pos[320];
    snprintf(pos, sizeof pos, "%spos_embed.weight", sp);
    if (cq_cmf_find(cmf, pos)) {
        cq_qwen3vl_vision_config c3;
        if (!usable(cq_qwen3vl_vision_parse_config(cmf, prefix, &c3), "qwen3vl_vision", note, user)) return CQ_OK;
        cq_tt_list t = {0};
        return check_list("qwen3vl_vision", &t, cq_qwen3vl_vision_tensors(&c3, prefix, stem, &t), cmf, sp, note,
                          user, rep, n);
    }
    cq_qwen25vl_vision_config c;
    if (!usable(cq_qwen25vl_vision_parse_config(cmf, prefix, &c), "qwen25vl_vision", note, user)) return CQ_OK;
    cq_tt_list t = {0};
    return check_list("qwen25vl_vision", &t, cq_qwen25vl_vision_tensors(&c, prefix, stem, &t), cmf, sp, note, user,
                      rep, n);
}

cq_status cq_tables_check_pack(const cq_cmf *cmf, cq_tt_note_fn note, void *user, cq_tt_report *rep, int *n_checked) {
    memset(rep, 0, sizeof *rep);
    *n_checked = 0;
    if (cq_cmf_find(cmf, "dit.config_json")) {
        /* each denoiser's config reader refuses another's class (CQ_ERR_UNSUPPORTED): at most one matches */
        cq_qi21_config c;
        cq_zimage_config z;
        cq_qimage_config qi;
        cq_ltx2_config lx;
        cq_tt_list t = {0};
        if (usable(cq_qi21_parse_config(cmf, "dit.", &c), "qi21", note, user))
            CQ_TRY(check_list("qi21", &t, cq_qi21_tensors(&c, "dit.", &t), cmf, "dit.", note, user, rep, n_checked));
        else if (usable(cq_zimage_parse_config(cmf, "dit.", &z), "zimage", note, user))
            CQ_TRY(check_list("zimage", &t, cq_zimage_tensors(&z, "dit.", &t), cmf, "dit.", note, user, rep,
                              n_checked));
        else if (usable(cq_qimage_parse_config(cmf, "dit.", &qi), "qimage", note, user))
            CQ_TRY(check_list("qimage", &t, cq_qimage_tensors(&qi, "dit.", &t), cmf, "dit.", note, user, rep,
                              n_checked));
        else if (usable(cq_ltx2_parse_config(cmf, "dit.", &lx), "ltx2", note, user))
            CQ_TRY(check_list("ltx2", &t, cq_ltx2_tensors(&lx, "dit.", &t), cmf, "dit.", note, user, rep, n_checked));
    }
    if (cq_cmf_find(cmf, "vae.config_json")) {
        cq_qi21_vae_geometry g;
        cq_flux_vae_config fc;
        cq_ltx2_vae_config lv;
        cq_tt_list t = {0};
        if (usable(cq_qi21_vae_parse_geometry(cmf, "vae.", &g), "qi21_vae", note, user)) {
            const char *who = g.kind == CQ_QI21_VAE_QIMAGE ? "qimage_vae" : "qi21_vae";
            CQ_TRY(check_list(who, &t, cq_qi21_vae_tensors(&g, "vae.", &t), cmf, "vae.", note, user, rep, n_checked));
        }
        else if (usable(cq_flux_vae_parse_config(cmf, "vae.", &fc), "flux_vae", note, user))
            CQ_TRY(check_list("flux_vae", &t, cq_flux_vae_tensors(&fc, "vae.", &t), cmf, "vae.", note, user, rep,
                              n_checked));
        else if (usable(cq_ltx2_vae_parse_config(cmf, "vae.", &lv), "ltx2_vae", note, user))
            CQ_TRY(check_list("ltx2_vae", &t, cq_ltx2_vae_tensors(&lv, "vae.", &t), cmf, "vae.", note, user, rep,
                              n_checked));
    }
    if (cq_cmf_find(cmf, "connectors.config_json")) {
        cq_ltx2_text_config lc;
        cq_tt_list t = {0};
        if (usable(cq_ltx2_text_parse_config(cmf, "connectors.", &lc), "ltx2_text", note, user))
            CQ_TRY(check_list("ltx2_text", &t, cq_ltx2_text_tensors(&lc, "connectors.", &t), cmf, "connectors.", note,
                              user, rep, n_checked));
    }
    if (cq_cmf_find(cmf, "upsampler.config_json")) {
        cq_ltx2_ups_config uc;
        cq_tt_list t = {0};
        if (usable(cq_ltx2_ups_parse_config(cmf, "upsampler.", &uc), "ltx2_upsampler", note, user))
            CQ_TRY(check_list("ltx2_upsampler", &t, cq_ltx2_ups_tensors(&uc, "upsampler.", &t), cmf, "upsampler.",
                              note, user, rep, n_checked));
    }
    if (cq_cmf_find(cmf, "audio_vae.config_json")) {
        cq_ltx2_audio_vae_config ac;
        cq_tt_list t = {0};
        if (usable(cq_ltx2_audio_vae_parse_config(cmf, "audio_vae.", &ac), "ltx2_audio_vae", note, user))
            CQ_TRY(check_list("ltx2_audio_vae", &t, cq_ltx2_audio_vae_tensors(&ac, "audio_vae.", &t), cmf, "audio_vae.",
                              note, user, rep, n_checked));
    }
    if (cq_cmf_find(cmf, "vocoder.config_json")) {
        cq_ltx2_vocoder_config vc;
        cq_tt_list t = {0};
        if (usable(cq_ltx2_vocoder_parse_config(cmf, "vocoder.", &vc), "ltx2_vocoder", note, user))
            CQ_TRY(check_list("ltx2_vocoder", &t, cq_ltx2_vocoder_tensors(&vc, "vocoder.", &t), cmf, "vocoder.", note,
                              user, rep, n_checked));
    }
    if (cq_cmf_find(cmf, "te.config_json")) {
        CQ_TRY(check_qwen3(cmf, "te.", note, user, rep, n_checked));
        CQ_TRY(check_gemma4(cmf, "te.", note, user, rep, n_checked));
        CQ_TRY(check_vision(cmf, "te.", note, user, rep, n_checked));
    }
    /* bare names: a language model, when it has a decoder stack (a bare config alone is no known architecture) */
    if (cq_cmf_find(cmf, "config_json") && cq_qwen3_stack_prefix(cmf, "")) {
        CQ_TRY(check_qwen3(cmf, "", note, user, rep, n_checked));
        CQ_TRY(check_gemma4(cmf, "", note, user, rep, n_checked));
        CQ_TRY(check_vision(cmf, "", note, user, rep, n_checked));
    }
    return CQ_OK;
}
