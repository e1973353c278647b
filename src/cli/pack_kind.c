/*
 * pack_kind.c — what a pack holds, in words, so a command run on the wrong
 * kind of pack says what the pack is and which command uses it.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "format/cmf.h"

static bool has(const cq_cmf *c, const char *name) { return cq_cmf_find(c, name) != NULL; }

cq_cli_pack_kind cq_cli_pack_classify(const cq_cmf *c) {
    if (!c) return CQ_PACK_UNKNOWN;
    if (has(c, "dit.config_json") && has(c, "te.config_json") && has(c, "vae.config_json"))
        return CQ_PACK_IMAGE_PIPELINE;
    if (has(c, "config_json") && (has(c, "model.embed_tokens.weight") ||
                                  has(c, "model.language_model.embed_tokens.weight")))
        return CQ_PACK_LANGUAGE_MODEL;
    if (has(c, "dit.config_json")) return CQ_PACK_DENOISER;
    if (has(c, "vae.config_json")) return CQ_PACK_AUTOENCODER;
    return CQ_PACK_UNKNOWN;
}

const char *cq_cli_pack_describe(const cq_cmf *c, char *buf, size_t len) {
    cq_cmf_info info;
    const char *arch = cq_cmf_get_info(c, &info) == CQ_OK && info.arch_name ? info.arch_name : "unknown";
    switch (cq_cli_pack_classify(c)) {
    case CQ_PACK_IMAGE_PIPELINE:
        snprintf(buf, len, "a text-to-image pipeline (arch %s), which `cortiq imagine` draws with", arch);
        break;
    case CQ_PACK_LANGUAGE_MODEL:
        snprintf(buf, len, "a language model (arch %s), which `cortiq run` chats with", arch);
        break;
    case CQ_PACK_DENOISER:
        snprintf(buf, len, "a lone denoiser (arch %s, no text encoder or VAE), which `cortiq forward` runs", arch);
        break;
    case CQ_PACK_AUTOENCODER:
        snprintf(buf, len, "a lone autoencoder (arch %s)", arch);
        break;
    default:
        snprintf(buf, len, "%zu tensors of arch %s that no command runs", info.tensor_count, arch);
        break;
    }
    return buf;
}
