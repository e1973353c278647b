/*
 * residency.h — what an image pipeline keeps on a device backend, phase by
 * phase, under the backend's memory budget (cq_backend_mem_budget).
 *
 * A pipeline has three parts: the text encoder (used in the TEXT phase), the
 * denoiser (PREFILL and STEPS) and the latent codec (the VAE: the DECODE
 * phase, and its pack/unpack throughout). The planner picks the first plan
 * that fits, in this order of speed:
 *   1. everything bound for the whole run, weights as planes (the backend's
 *      fastest form);
 *   2. phased: the text encoder is bound only while the prompts are encoded
 *      and released before the denoiser is bound; the denoiser is released
 *      before the decode when the decode would not fit beside it; planes;
 *   3. phased, the denoiser's weights kept in their codec on the device
 *      (CQ_WEIGHTS_COMPACT: expanded just before each use);
 *   4. phased, the text encoder compact too;
 *   5. phased, every part compact;
 *   6. phased, every part compact, the denoiser STREAMED: as many of its
 *      matrices as fit stay on the device, the rest are copied from
 *      page-locked host memory before each use (spread through its blocks,
 *      overlapped with their compute);
 *   7. the same with the text encoder streamed too.
 * When none fits, the error names the smallest budget that would work.
 * The codec stays bound in every plan (it is small; its pack/unpack carry
 * the latents' layout through the whole run).
 *
 * A phase's need is its bound parts' weights, the largest per-use expansion
 * slot among them (compact weights), and the phase's activations (an upper
 * estimate each pipeline gives for the request). Host backends have no
 * budget: everything stays bound, as before.
 *
 * cq_resid drives a plan: cq_resid_stage(phase) releases the parts the
 * phase does not keep (then gives the freed memory back to the device,
 * cq_backend_trim) and binds the ones it needs, in the plan's weight mode,
 * through the pipeline's bind/release callbacks. Results are those of the
 * unlimited run: binding again reads the same payloads, and a compact weight
 * expands to the plane the planes mode keeps.
 */
#ifndef CQ_PIPELINES_RESIDENCY_H
#define CQ_PIPELINES_RESIDENCY_H

#include <stdbool.h>
#include <stdint.h>

#include "cortiq.h"
#include "ops/ops.h"
#include "pipelines/image_gen.h"

typedef enum cq_part {
    CQ_PART_TEXT = 0, /* text encoder */
    CQ_PART_DENOISER,
    CQ_PART_CODEC,    /* the VAE */
    CQ_PART_COUNT
} cq_part;

typedef enum cq_resid_phase {
    CQ_RESID_TEXT = 0, /* the prompts through the text encoder */
    CQ_RESID_DENOISE,  /* the denoiser's prepare and the sampler's steps */
    CQ_RESID_DECODE,   /* latents to pixels */
    CQ_RESID_PHASE_COUNT
} cq_resid_phase;

const char *cq_part_name(cq_part p);            /* "text encoder", "denoiser", "VAE" */
const char *cq_resid_phase_name(cq_resid_phase p);

/* What each part costs on the device, per weight mode, and what each phase
 * needs besides its weights. */
typedef struct cq_resid_need {
    uint64_t weights[CQ_PART_COUNT][CQ_WEIGHTS_MODE_COUNT]; /* bytes bound while the part is resident */
    uint64_t slot[CQ_PART_COUNT][CQ_WEIGHTS_MODE_COUNT];    /* the largest per-use expansion (compact) */
    uint64_t act[CQ_RESID_PHASE_COUNT];                     /* activations and scratch of the phase */
} cq_resid_need;

typedef struct cq_resid_plan {
    int level;                            /* 1..7, the list in the header comment; 0: no budget (host) */
    cq_weight_mode mode[CQ_PART_COUNT];   /* DEFAULT (the backend's fastest: planes on CUDA), COMPACT or STREAMED */
    /* STREAMED parts: of the `stream_of` bytes their matrices take compact, `keep_bytes` stay on the device
     * (cq_backend_set_stream_keep) and the rest are copied at every use of the part (every step for the
     * denoiser, every prompt for the text encoder) */
    uint64_t keep_bytes[CQ_PART_COUNT];
    uint64_t stream_of[CQ_PART_COUNT];
    bool keep[CQ_RESID_PHASE_COUNT][CQ_PART_COUNT]; /* bound during the phase */
    uint64_t phase_bytes[CQ_RESID_PHASE_COUNT];     /* planned need of each phase */
    uint64_t peak;                        /* the largest of them */
    uint64_t budget;                      /* what it was planned against (0: none) */
    bool single;                          /* one part only (a language model: CQ_PART_TEXT) */
} cq_resid_plan;

/* The plan for `n` under `budget` bytes (0: no budget: level 0, everything
 * bound in the backend's default mode). CQ_ERR_NOMEM with the smallest
 * budget that would work when nothing fits. `what` names the model in the
 * message. */
cq_status cq_resid_plan_make(const cq_resid_need *n, uint64_t budget, const char *what, cq_resid_plan *out);

/* The plan of a model that is one part (a language model, as CQ_PART_TEXT
 * of n): level 1 in the default form when it fits, else level 1 with the
 * weights compact, else CQ_ERR_NOMEM naming the least budget. */
cq_status cq_resid_plan_single(const cq_resid_need *n, uint64_t budget, const char *what, cq_resid_plan *out);

/* Plan `level` (1..7, the list above) for n, whether it fits or not; the
 * decode keeps the denoiser when that phase fits under budget; a streamed
 * part keeps on the device what fits beside its phase under budget (0: none). */
cq_status cq_resid_plan_at(const cq_resid_need *n, int level, uint64_t budget, cq_resid_plan *out);

/* The bytes a streamed part copies at each use (0 when it is not streamed). */
uint64_t cq_resid_streamed(const cq_resid_plan *p, cq_part part);

/* Set the backend's weight mode (and, for a streamed part, what it keeps) for binding `part` of plan p. */
cq_status cq_resid_apply_mode(cq_backend *be, const cq_resid_plan *p, cq_part part);

/* One line: "all resident, planes, 21.3 GiB of 130.0 GiB" or "phased (text encoder released before the
 * denoiser), denoiser compact, 7.9 GiB of 8.0 GiB"; a streamed part adds what it copies per use. */
const char *cq_resid_plan_describe(const cq_resid_plan *p, char *buf, size_t len);

/* The device bytes of every tensor named prefix* in the pack, bound in
 * `mode` on `be` (cq_backend_weight_cost), and the largest expansion slot
 * among them, leaving out the slot of tensors whose name ends in
 * `rows_only` (NULL: none): tables only get_rows reads, which decodes the
 * rows it needs straight into its output. */
cq_status cq_resid_weight_cost(const cq_backend *be, const cq_cmf *cmf, const char *prefix, const char *rows_only,
                               cq_weight_mode mode, uint64_t *bytes, uint64_t *slot);

/* Fills n->weights and n->slot of `part` for every mode from the pack's prefix. */
cq_status cq_resid_need_part(cq_resid_need *n, const cq_backend *be, const cq_cmf *cmf, cq_part part,
                             const char *prefix, const char *rows_only);

/* Upper estimates of a phase's activations and scratch, in bytes, for a
 * device whose activations are `act` bytes per value (cq_act_dtype_size):
 * a transformer tower over n tokens of `width` with an MLP of `ffn`
 * (attention streams its scores: the device backends' kernels are flash
 * attention), and a decoder
 * to `pixels` output pixels. Each adds the backend's fixed workspace. */
uint64_t cq_resid_act_tower(int64_t n, int width, int ffn, size_t act);
uint64_t cq_resid_act_decoder(int64_t pixels);

/* The three parts' costs from their pack prefixes ("te.", "dit.", "vae."); the
 * text encoder's token table (embed_tokens.weight) is read by rows only. */
cq_status cq_resid_need_parts(cq_resid_need *n, const cq_backend *be, const cq_cmf *cmf, const char *text,
                              const char *denoiser, const char *codec);

/* The request a load plans for: the pack's generation defaults' size, else
 * 1024 x 1024. */
void cq_resid_load_size(const cq_cmf *cmf, int *width, int *height);

/* n->act for an image pipeline's request, on a device of `act` bytes per activation value: the text tower over
 * text_tokens (width tw, MLP tf), the denoiser over dit_tokens (width dw, MLP df), the decoder to `pixels`. */
void cq_resid_request_acts(cq_resid_need *n, size_t act, int64_t text_tokens, int tw, int tf, int64_t dit_tokens, int dw,
                           int df, int64_t pixels);

/* ---- driving a plan -------------------------------------------------------------------------- */
typedef struct cq_resid_ops {
    /* bind the part's weights on the backend (in the backend's current weight mode) */
    cq_status (*bind)(void *pipe, cq_part part);
    /* release them (nothing when not bound) */
    void (*release)(void *pipe, cq_part part);
} cq_resid_ops;

typedef struct cq_resid {
    cq_backend *be;
    const cq_resid_ops *ops;
    void *pipe;
    cq_resid_plan plan;
    bool bound[CQ_PART_COUNT];
    cq_weight_mode bound_mode[CQ_PART_COUNT];
    uint64_t bound_keep[CQ_PART_COUNT];   /* a streamed part's keep_bytes when bound */
    int binds;                        /* parts bound so far (tests: how often a plan rebinds) */
    double stage_s;                   /* seconds in cq_resid_stage so far (binds, releases, trims) */
    bool fixed;                       /* the plan was set from outside (cq_resid_set_plan): replan keeps it */
} cq_resid;

void cq_resid_init(cq_resid *r, cq_backend *be, const cq_resid_ops *ops, void *pipe);
/* Use `plan` from now on (the next cq_resid_stage applies it); NULL: plan
 * again at the next cq_resid_replan. */
void cq_resid_set_plan(cq_resid *r, const cq_resid_plan *plan);
/* Make the parts of `phase` bound (in the plan's modes) and release the others. */
cq_status cq_resid_stage(cq_resid *r, cq_resid_phase phase);
/* Bind one part now if it is not bound (in the plan's mode). */
cq_status cq_resid_ensure(cq_resid *r, cq_part part);
/* Release every bound part. */
void cq_resid_release_all(cq_resid *r);
/* Plan again for n under the backend's budget (level 0 on a host backend; nothing changes when `fixed`). */
cq_status cq_resid_replan(cq_resid *r, const cq_resid_need *n, const char *what);
/* An image pipeline's load: under a budget, the parts' costs from the pack's "te.", "dit." and "vae." tensors
 * into *n and a plan for the pack's default request (plan_for(pipe, width, height, false): it sets n->act and
 * calls cq_resid_replan), else, when that does not fit, for the smallest request (plan_for(pipe, 64, 64, true);
 * a larger one is refused when it is made; when even that does not fit, the default's message stands); then
 * what the text phase keeps is bound. On failure whatever was bound is released. */
cq_status cq_resid_load(cq_resid *r, cq_resid_need *n, const cq_cmf *cmf,
                        cq_status (*plan_for)(void *pipe, int width, int height, bool smallest), void *pipe);
/* A cq_gen_stage_fn over a cq_resid (user): TEXT, PREFILL and VAE map to the three phases. */
cq_status cq_resid_gen_stage(cq_gen_phase phase, void *user);

#endif /* CQ_PIPELINES_RESIDENCY_H */
