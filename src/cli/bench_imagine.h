/*
 * bench_imagine.h — the models `cortiq bench imagine` runs end to end
 * (Qwen-Image-2.1, Z-Image Turbo, Qwen-Image, Qwen-Image-Edit-2511): what each one's pack holds at the released
 * configuration, as `cortiq convert` makes it of the diffusers pipeline
 * folder, and its pipeline's calls behind one small interface, so that the
 * benchmark's timing and report (bench_imagine.c) are the same for all.
 */
#ifndef CQ_CLI_BENCH_IMAGINE_H
#define CQ_CLI_BENCH_IMAGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/bench_pack.h"
#include "cortiq.h"
#include "pipelines/image_gen.h"
#include "pipelines/residency.h"

typedef enum cq_imagine_kind {
    CQ_IMAGINE_QI21,
    CQ_IMAGINE_ZIMAGE,
    CQ_IMAGINE_QIMAGE,
    CQ_IMAGINE_QIMAGE_EDIT_PLUS, /* Qwen-Image-Edit-2511: Qwen-Image's parts, the vision tower, zero_cond_t */
} cq_imagine_kind;

typedef struct cq_imagine_model {
    cq_imagine_kind kind;
    const char *name;          /* --model */
    const char *title;         /* "Qwen-Image-2.1" */
    int te_layers, dit_layers; /* the released model's */
    int te_unread;             /* the text tower's last layers the pipeline stores but never runs */
    int min_steps, default_steps;
    int project_steps;         /* the report projects a generation of this many steps */
    const char *chat_template; /* the default, under the fixtures folder; NULL: the pipeline's own, fixed */
    const char *te_what, *dit_what, *vae_what; /* the report's description of each part */
    const char *prefill;       /* what the PREFILL phase is called, and what it reads */
    const char *prefill_rows;
    const char *rows;          /* what the denoiser reads of the text tower's rows */
    int vision_layers;         /* the vision tower's blocks (0: none; the model edits pictures) */
    const char *vision_what;
} cq_imagine_model;

/* The model named `name`, or NULL; *names lists every name (for messages). */
const cq_imagine_model *cq_imagine_model_find(const char *name, const char **names);

/* A pack's contents before it is written: the weights, the configs (te, dit, vae, pipeline, scheduler, in
 * that order) and the header JSON, with the bytes of each part's weights. */
typedef struct cq_imagine_pack {
    cq_bench_pack weights;
    char te_cfg[4096], dit_cfg[1024];
    char *vae_cfg, *header; /* cJSON_free */
    cq_bench_blob blobs[5];
    uint64_t b_te, b_dit, b_vae;
    uint64_t b_vision;      /* of b_te: the vision tower's */
    uint64_t b_dit_q4tp;    /* the denoiser in q4tp (what --quant q4tp would make it) */
} cq_imagine_pack;

/* The pack of `m` with te_layers text layers, vision_layers vision blocks (a model that edits) and dit_layers
 * denoiser layers, the denoiser's matrices in `quant`, the header carrying `chat_template` (NULL: none). */
cq_status cq_imagine_pack_build(const cq_imagine_model *m, cq_dtype quant, int te_layers, int vision_layers,
                                int dit_layers, const char *chat_template, cq_imagine_pack *out);
/* The weights only (the pack written, the configs and header stay for the file). */
void cq_imagine_pack_free(cq_imagine_pack *p);

/* One of the models' pipelines. */
typedef struct cq_imagine_pipe {
    const cq_imagine_model *m;
    void *p; /* cq_qi21_pipe, cq_zimage_pipe or cq_qimage_pipe */
} cq_imagine_pipe;

/* One generation: the prompt, a side x side image, `steps` steps from a fixed seed, without guidance (Z-Image
 * Turbo's recipe; Qwen-Image's true CFG runs only with a negative prompt, and the benchmark gives none); a
 * model that edits reads the input pictures' files. */
typedef struct cq_imagine_req {
    const char *prompt;
    int side, steps;
    const char *const *images;
    int n_images;
    cq_flow_step_fn on_step;
    cq_gen_phase_fn on_phase;
    void *user;
} cq_imagine_req;

/* The pipeline's open (the tokenizer, template and configs) and its weights' load, apart. */
cq_status cq_imagine_pipe_open(const cq_imagine_model *m, const cq_cmf *cmf, cq_imagine_pipe *out);
cq_status cq_imagine_pipe_load_weights(cq_imagine_pipe *p, cq_backend *be);
void cq_imagine_pipe_free(cq_imagine_pipe *p); /* the pipeline; *p may be opened again */
const cq_resid *cq_imagine_pipe_residency(const cq_imagine_pipe *p); /* NULL when none is open */
const cq_resid_need *cq_imagine_pipe_need(const cq_imagine_pipe *p);
/* The prompt's tokens through the text tower and the rows of their states the denoiser reads (an edit's with its
 * pictures: their pads expanded); *cond: the pictures' denoiser tokens (0 for text to image). */
cq_status cq_imagine_pipe_tokens(cq_imagine_pipe *p, const cq_imagine_req *rq, int *total, int *rows, int *cond);
cq_status cq_imagine_pipe_generate(cq_imagine_pipe *p, const cq_imagine_req *rq, cq_image_result *res);

#endif /* CQ_CLI_BENCH_IMAGINE_H */
