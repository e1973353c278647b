/*
 * convert_plan.c — which codec each tensor gets (the policy is spelled out in
 * convert.h), `GLOB=CODEC` rules, and the header's quant_type label.
 */
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

#include "codec/codec.h"
#include "format/convert_impl.h"

bool cv_codec_is_float(cq_dtype dt) { return dt == CQ_DTYPE_F32 || dt == CQ_DTYPE_F16 || dt == CQ_DTYPE_BF16; }

bool cv_codec_below_8_bits(cq_dtype dt) {
    switch (dt) {
    case CQ_DTYPE_F32:
    case CQ_DTYPE_F16:
    case CQ_DTYPE_BF16:
    case CQ_DTYPE_Q8_ROW:
    case CQ_DTYPE_Q8_2F:
    case CQ_DTYPE_U8: return false;
    default: return true;
    }
}

const char *cv_quant_type_name(cq_dtype dt) {
    switch (dt) {
    case CQ_DTYPE_F16: return "F16";
    case CQ_DTYPE_BF16: return "BF16";
    case CQ_DTYPE_Q8_ROW: return "Q8_ROW";
    case CQ_DTYPE_Q8_2F: return "Q8_2F";
    /* The format's enum has one 4-bit label; the directory holds the truth. */
    case CQ_DTYPE_Q4_BLOCK:
    case CQ_DTYPE_Q4_TILED:
    case CQ_DTYPE_Q4TP:
    case CQ_DTYPE_Q2TP: return "Q4_BLOCK";
    case CQ_DTYPE_VBIT:
    case CQ_DTYPE_VBIT_RO:
    case CQ_DTYPE_Q1:
    case CQ_DTYPE_Q1S:
    case CQ_DTYPE_Q1T: return "VBIT";
    default: return "F32";
    }
}

cq_status cq_convert_check_codec(cq_dtype dt) {
    if ((unsigned)dt < CQ_DTYPE_COUNT && dt != CQ_DTYPE_U8 && cq_codec_can_encode(dt)) return CQ_OK;
    char list[256] = "";
    size_t o = 0;
    for (int i = 0; i < CQ_DTYPE_COUNT; i++)
        if (i != CQ_DTYPE_U8 && cq_codec_can_encode((cq_dtype)i) && o < sizeof list)
            o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", o ? ", " : "", cq_dtype_name((cq_dtype)i));
    return cq_fail(CQ_ERR_INVALID_ARG, "codec '%s' cannot be written by this build (choose one of: %s)",
                   cq_dtype_name(dt), list);
}

cq_status cq_convert_parse_rule(const char *text, cq_convert_rule *out) {
    const char *eq = text ? strrchr(text, '=') : NULL;
    if (!eq || eq == text || !eq[1])
        return cq_fail(CQ_ERR_INVALID_ARG, "rule '%s' is not of the form GLOB=CODEC", text ? text : "");
    size_t n = (size_t)(eq - text);
    if (n >= sizeof out->glob) return cq_fail(CQ_ERR_INVALID_ARG, "rule glob longer than %zu bytes", sizeof out->glob - 1);
    int dt = cq_dtype_from_name(eq + 1);
    if (dt < 0) return cq_fail(CQ_ERR_INVALID_ARG, "rule '%s': unknown codec '%s'", text, eq + 1);
    CQ_TRY(cq_convert_check_codec((cq_dtype)dt));
    memcpy(out->glob, text, n);
    out->glob[n] = '\0';
    out->dtype = (cq_dtype)dt;
    return CQ_OK;
}

/* The size rule accepts what a reader can decode; as a conversion target a
 * grouped codec must also keep its 32-weight groups inside rows (as the
 * format's own converter does), so matmul kernels can run row by row. */
static bool fits(cq_dtype dt, const cq_st_tensor *t) {
    uint64_t nb;
    if (cv_codec_below_8_bits(dt) && (t->ndim != 2 || t->shape[1] % 32 != 0)) return false;
    return cq_codec_nbytes(dt, t->ndim, t->shape, &nb) == CQ_OK;
}

/* A per-channel vector: 1-D, or N-D with one dimension > 1 (the VAE stores
 * its norm gammas as [C, 1, 1]): such tensors keep the "norms stay f32" rule. */
static bool is_vector(const cq_st_tensor *t) {
    int big = 0;
    for (int i = 0; i < t->ndim; i++) big += t->shape[i] > 1;
    return t->ndim <= 1 || big <= 1;
}

/* Signal-processing tables, not weights: a vocoder's STFT basis and mel filterbank (LTX-2.3 / 2.5's BWE) stay
 * f32 unless a rule says otherwise, as the reference loads them exactly. */
static bool is_signal_table(const char *name) {
    static const char *const ends[] = {"mel_stft.mel_basis", "mel_stft.stft_fn.forward_basis",
                                       "mel_stft.stft_fn.inverse_basis"};
    const size_t n = strlen(name);
    for (size_t i = 0; i < CQ_ARRAY_LEN(ends); i++) {
        const size_t m = strlen(ends[i]);
        if (n >= m && strcmp(name + n - m, ends[i]) == 0) return true;
    }
    return false;
}

cv_choice cv_plan_tensor(const cq_convert_opts *opts, cv_role role, const char *name, const cq_st_tensor *t) {
    if (t->dtype == CQ_ST_U8 || t->dtype == CQ_ST_BOOL) return (cv_choice){CQ_DTYPE_U8, CQ_DTYPE_U8, NULL};
    cq_dtype want;
    const char *why = NULL;
    bool ruled = false;
    for (size_t i = 0; i < opts->n_rules && !ruled; i++)
        if (fnmatch(opts->rules[i].glob, name, 0) == 0) {
            want = opts->rules[i].dtype;
            ruled = true;
        }
    if (!ruled) {
        if (is_vector(t) || is_signal_table(name)) {
            want = CQ_DTYPE_F32;
        } else if (t->ndim == 2) {
            want = opts->quant >= 0 ? (cq_dtype)opts->quant : role == CV_VAE ? CQ_DTYPE_F16 : CQ_DTYPE_Q8_2F;
        } else {
            bool q_float = opts->quant >= 0 && cv_codec_is_float((cq_dtype)opts->quant);
            want = q_float ? (cq_dtype)opts->quant : role == CV_VAE ? CQ_DTYPE_F16 : CQ_DTYPE_F32;
        }
    }
    cq_dtype use = want;
    if (!ruled && role == CV_TE && cv_codec_below_8_bits(use)) {
        use = CQ_DTYPE_Q8_2F;
        why = "text encoder stays at 8 bits";
    }
    if (!cv_codec_is_float(use)) {
        if (is_vector(t)) {
            /* Norms and biases stay float whatever a broad rule says: not a
             * fallback worth reporting. */
            return (cv_choice){CQ_DTYPE_F32, CQ_DTYPE_F32, NULL};
        } else if (t->ndim != 2) {
            use = CQ_DTYPE_F16;
            why = "quantized codecs need a 2-D tensor";
        } else if (!fits(use, t)) {
            why = "shape does not fit the codec (cols % 32)";
            use = CQ_DTYPE_Q8_2F;
            if (!fits(use, t)) use = CQ_DTYPE_F32;
        }
    }
    if (!fits(use, t)) {
        why = "shape does not fit the codec";
        use = CQ_DTYPE_F32;
    }
    return (cv_choice){use, want, use == want ? NULL : why};
}
