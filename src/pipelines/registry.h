/*
 * registry.h — the models cortiq runs, keyed by the pack's arch_name (the
 * header's arch.arch_name, written by `cortiq convert`). A command looks up
 * the pack's arch for its task and runs whatever implementation it finds;
 * adding a model is one entry in registry.c.
 *
 * Image models share one set of options (cq_image_req: prompt, negative
 * prompt, size, steps, seed, guidance); what only one architecture has
 * lives in its `extra` block, parsed by the architecture itself.
 */
#ifndef CQ_PIPELINES_REGISTRY_H
#define CQ_PIPELINES_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "cortiq.h"
#include "models/component.h"
#include "ops/ops.h"
#include "pipelines/image_gen.h"
#include "pipelines/residency.h"

typedef enum cq_arch_task {
    CQ_TASK_IMAGE = 0, /* text to image: `cortiq imagine` */
    CQ_TASK_CHAT = 1,  /* a causal LM: `cortiq run` */
    CQ_TASK_COUNT
} cq_arch_task;

/* The options every image model takes. */
typedef struct cq_image_req {
    const char *prompt;
    const char *negative; /* NULL: none */
    int width, height;
    int steps;
    uint64_t seed;
    double guidance;
    cq_flow_step_fn on_step;    /* NULL: none */
    cq_gen_phase_fn on_phase; /* NULL: none */
    void *user;
    const void *extra;          /* the architecture's own options (extra_size bytes), NULL: its defaults */
    const char *const *images;  /* input pictures (files) of an editing model, n_images of them */
    int n_images;
} cq_image_req;

typedef struct cq_image_arch {
    /* what it draws when neither the request nor the pack's generation_defaults say */
    int default_width, default_height, default_steps;
    double default_guidance;
    int size_multiple;          /* width and height must be multiples of it */
    int min_steps;
    /* input pictures it edits: 0 draws from text alone (and refuses pictures); > 0 needs 1..max_images, and a
     * default size of 0 x 0 means the pictures' (the model works it out) */
    int max_images;
    /* with max_images > 0: 0 pictures too (it then draws from text alone, at its default size) */
    bool images_optional;
    /* what guidance (the reference pipeline's own guidance_scale) means for it, one line */
    const char *guidance_help;
    const char *extra_help;     /* help lines of its own options ("" for none) */
    size_t extra_size;          /* bytes of its options block (0: none) */
    void (*extra_init)(void *extra);
    /* One of its own options: returns the arguments used (1: a flag, 2: with
     * its value), 0 when `opt` is not its own, -1 for a bad value (the
     * message in cq_last_error). val is NULL when no argument follows. */
    int (*extra_parse)(void *extra, const char *opt, const char *val);
    /* open (configs, tokenizer: no weights), check a request against the
     * model's limits, load the weights on a backend, generate, free */
    cq_status (*open)(const cq_cmf *cmf, void **pipe);
    cq_status (*check)(void *pipe, const cq_image_req *o);
    cq_status (*load_weights)(void *pipe, cq_backend *be);
    cq_status (*generate)(void *pipe, const cq_image_req *o, cq_image_result *res);
    void (*free)(void *pipe);
    /* what is bound per phase under the backend's budget (residency.h) */
    const cq_resid *(*residency)(const void *pipe);
} cq_image_arch;

typedef struct cq_chat_arch {
    /* the model's weights on `be`, as a causal LM, kept as *plan says fits the
     * backend's budget (planes, else compact); *model is freed with free */
    cq_status (*load)(const cq_cmf *cmf, cq_backend *be, void **model, cq_causal_lm *lm, cq_resid_plan *plan);
    void (*free)(void *model);
} cq_chat_arch;

typedef struct cq_arch_entry {
    const char *arch;   /* the pack's arch_name */
    const char *family; /* the model's name for people */
    cq_arch_task task;
    const cq_image_arch *image; /* CQ_TASK_IMAGE */
    const cq_chat_arch *chat;   /* CQ_TASK_CHAT */
} cq_arch_entry;

size_t cq_arch_count(void);
const cq_arch_entry *cq_arch_at(size_t i);
/* The entry of `arch` for `task`, or NULL. */
const cq_arch_entry *cq_arch_find(const char *arch, cq_arch_task task);
/* The entry for the pack's arch; CQ_ERR_UNSUPPORTED naming the arch and the
 * supported ones otherwise. `path` names the pack in the message. */
cq_status cq_arch_for_pack(const cq_cmf *cmf, const char *path, cq_arch_task task, const cq_arch_entry **out);
/* "qwen3, qwen3_vl, ...": the arch names of a task. */
const char *cq_arch_list(cq_arch_task task, char *buf, size_t len);

#endif /* CQ_PIPELINES_REGISTRY_H */
