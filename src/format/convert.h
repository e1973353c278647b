/*
 * convert.h — turning safetensors checkpoints into one CMF v2 file.
 *
 * Sources: a diffusers pipeline folder (model_index.json; transformer/,
 * text_encoder/, vae/, ... with safetensors; tokenizer/ or processor/), one
 * component folder (a diffusers config.json with "_class_name" +
 * safetensors), or a Hugging Face LLM folder (config.json + safetensors +
 * tokenizer files). Naming in the pack: `dit.` (transformer/unet), `te.`
 * (text encoder), `vae.` prefixes + the original tensor names; a lone
 * component gets its role's prefix, a lone LLM keeps bare names. Configs go
 * in as u8 tensors `<prefix>.config_json` (`config_json` for an LLM,
 * `pipeline.config_json` for model_index.json, `scheduler.config_json`).
 *
 * Codec choice per tensor, first that applies:
 *   1. U8/BOOL sources stay u8 bytes.
 *   2. the first --quant-rule whose glob (fnmatch) matches the full name;
 *   3. 0-D/1-D tensors (norms, biases): f32 (exact for f32/f16/bf16 sources);
 *      so do a vocoder's STFT basis and mel filterbank (names ending in
 *      mel_stft.mel_basis or mel_stft.stft_fn.{forward,inverse}_basis);
 *   4. 2-D: --quant if given (capped at q8_2f for the text encoder, which is
 *      never stored below 8 bits unless a rule says so), else the component
 *      default: q8_2f (dit, te, LLM, other), f16 (vae);
 *   5. N-D (conv kernels): --quant if it is a float codec, else f16 for the
 *      VAE and f32 elsewhere.
 * A quantized codec never applies to 0-D/1-D tensors (they stay f32, even
 * under a matching rule). A codec that cannot hold a tensor falls back and
 * the fallback is reported: 2-D -> q8_2f (grouped codecs need cols % 32 ==
 * 0), N-D -> f16 (quantized codecs need 2-D), f16 -> f32 when a finite value
 * exceeds the f16 range.
 *
 * Streaming: one tensor at a time is read from the mapping, encoded and
 * appended to the CMF writer; float targets are streamed in chunks, so peak
 * memory is about one quantized tensor (f32 copy + payload).
 *
 * Generation defaults: the header gets the known recipe of the architecture
 * (format/gen_defaults.h): Z-Image-Turbo (scheduler shift 3) 1024x1024, 8
 * steps, guidance 0, shift 3; Z-Image base (shift 6) 1024x1024, 28 steps,
 * guidance 4, shift 6; Qwen-Image-2.1 1024x1024, 40 steps, guidance 1; then
 * opts.defaults over it.
 *
 * A .cmf source is copied tensor by tensor as it is stored (each payload's
 * hash checked on the way), with its header's generation defaults replaced
 * by opts.defaults over its own and --drop applied: a cheap way to change a
 * pack's defaults or leave out tensors without the original folder. Codecs
 * are not changed (--quant and --quant-rule are refused), and a pack with
 * task masks or a sparse index is refused.
 */
#ifndef CQ_CONVERT_H
#define CQ_CONVERT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "format/gen_defaults.h"

typedef struct cq_convert_rule {
    char glob[512];
    cq_dtype dtype;
} cq_convert_rule;

/* Parse "GLOB=CODEC" (split at the last '='). CQ_ERR_INVALID_ARG with a
 * message for a malformed rule, an unknown codec or one this build cannot
 * encode. */
cq_status cq_convert_parse_rule(const char *text, cq_convert_rule *out);
/* Check that a codec can be used as a conversion target. */
cq_status cq_convert_check_codec(cq_dtype dt);

typedef struct cq_convert_opts {
    int quant;                     /* a cq_dtype for 2-D weights, or -1 for the defaults */
    const cq_convert_rule *rules;  /* first match wins */
    size_t n_rules;
    const char *const *drop;       /* fnmatch globs: weight tensors whose full name matches one are left out
                                    * (each glob must match something); configs are always kept */
    size_t n_drop;
    /* generation defaults written into the header over the architecture's known recipe (and, for a .cmf
     * source, over the pack's own); NULL: the recipe alone */
    const cq_gen_defaults *defaults;
    cq_progress_fn progress;       /* done/total in source bytes; non-zero return cancels */
    void *progress_user;
    cq_progress_fn verify_progress; /* the writer's read-back verification of the new file */
    void *verify_user;
} cq_convert_opts;

typedef struct cq_convert_codec_stat {
    size_t tensors;
    uint64_t bytes;            /* payload bytes in the pack */
    double worst_rel_rms;      /* max over tensors of ||w - deq(q(w))|| / ||w|| */
    char worst_name[200];
} cq_convert_codec_stat;

typedef struct cq_convert_fallback {
    char name[200];
    cq_dtype wanted, used;
    char why[96];
} cq_convert_fallback;

typedef struct cq_convert_report {
    char arch[64];
    char layout[16];           /* "pipeline", "component" or "llm" */
    char quant_type[16];       /* the header's quant_type */
    size_t tensors;            /* including the u8 config tensors */
    size_t dropped;            /* tensors left out by opts.drop */
    uint64_t dropped_bytes;    /* their source payload bytes */
    size_t last_taps;          /* 5-D causal kernels stored as their last temporal tap (single-image VAEs) */
    uint64_t bytes_in;         /* source payload bytes */
    uint64_t file_size;
    double seconds;
    cq_convert_codec_stat codec[CQ_DTYPE_COUNT];
    cq_convert_fallback *fallbacks;
    size_t n_fallbacks;
    char **notes;              /* things a user should know (missing tokenizer...) */
    size_t n_notes;
    bool has_tokenizer, has_chat_template;
    char defaults[256];        /* the generation defaults written ("" for none) */
} cq_convert_report;

/* Convert `src` into `out` (written to a temporary name, verified, renamed).
 * `report` is filled as far as the conversion got; free it with
 * cq_convert_report_free() either way. */
cq_status cq_convert(const char *src, const char *out, const cq_convert_opts *opts, cq_convert_report *report);
void cq_convert_report_free(cq_convert_report *r);

#endif /* CQ_CONVERT_H */
