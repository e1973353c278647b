/*
 * sampler.h — picking the next token from a model's logits: greedy argmax,
 * or seeded sampling with temperature, top-k, top-p (nucleus) and min-p.
 *
 * Order (as transformers applies its warpers): temperature -> top-k ->
 * top-p -> min-p -> draw. Candidates are ranked by logit, ties by the lower
 * id, so a seed gives the same tokens on every platform. Sampling allocates
 * nothing: the buffers are sized for the vocabulary at creation.
 */
#ifndef CQ_PIPELINES_SAMPLER_H
#define CQ_PIPELINES_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"

typedef struct cq_sampler_params {
    bool greedy;        /* argmax (lowest id among equal maxima); the rest is ignored */
    float temperature;  /* > 0; logits are divided by it */
    int top_k;          /* keep the k most likely tokens; 0 = off */
    float top_p;        /* keep the smallest set whose probability reaches top_p; >= 1 = off */
    float min_p;        /* drop tokens less likely than min_p x the most likely one; 0 = off */
    uint64_t seed;
} cq_sampler_params;

typedef struct cq_sampler cq_sampler;

/* Fails with CQ_ERR_INVALID_ARG naming a parameter out of range
 * (temperature <= 0 when not greedy, top_k < 0, top_p or min_p outside [0, 1]). */
cq_status cq_sampler_create(int vocab, const cq_sampler_params *p, cq_sampler **out);
void cq_sampler_free(cq_sampler *s);
/* Restart the random stream from a seed. */
void cq_sampler_reseed(cq_sampler *s, uint64_t seed);
/* The next token for logits[vocab] (not modified). CQ_ERR_NUMERIC when a
 * logit is NaN or none is finite-or-+inf. */
cq_status cq_sampler_sample(cq_sampler *s, const float *logits, int32_t *out);

#endif /* CQ_PIPELINES_SAMPLER_H */
