/*
 * sampler.c — the next-token sampler (see sampler.h for the order of the
 * filters). The random stream is splitmix64, a 53-bit uniform per draw.
 */
#include "pipelines/sampler.h"

#include <math.h>
#include <stdlib.h>

typedef struct cand {
    float logit;
    int32_t id;
} cand;

struct cq_sampler {
    cq_sampler_params p;
    int vocab;
    uint64_t state;
    cand *c;      /* [vocab] candidates, best first after ranking */
    double *prob; /* [vocab] their probabilities */
};

/* a ranks before b: higher logit, then lower id */
static inline bool better(const cand *a, const cand *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int cmp_cand(const void *x, const void *y) {
    const cand *a = x, *b = y;
    return better(a, b) ? -1 : better(b, a) ? 1 : 0;
}

static uint64_t next_u64(cq_sampler *s) {
    uint64_t z = (s->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double next_uniform(cq_sampler *s) { return (double)(next_u64(s) >> 11) * 0x1.0p-53; }

cq_status cq_sampler_create(int vocab, const cq_sampler_params *p, cq_sampler **out) {
    *out = NULL;
    if (vocab < 1) return cq_fail(CQ_ERR_INVALID_ARG, "sampler: vocabulary size %d", vocab);
    if (!p->greedy) {
        if (!(p->temperature > 0.0f && isfinite(p->temperature)))
            return cq_fail(CQ_ERR_INVALID_ARG, "sampler: temperature must be > 0 (use greedy decoding for 0)");
        if (p->top_k < 0) return cq_fail(CQ_ERR_INVALID_ARG, "sampler: top-k must be >= 0 (0 = off)");
        if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
            return cq_fail(CQ_ERR_INVALID_ARG, "sampler: top-p must be in (0, 1] (1 = off)");
        if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
            return cq_fail(CQ_ERR_INVALID_ARG, "sampler: min-p must be in [0, 1] (0 = off)");
    }
    cq_sampler *s = cq_calloc(1, sizeof *s);
    if (!s) return CQ_ERR_NOMEM;
    s->p = *p;
    s->vocab = vocab;
    s->state = p->seed;
    s->c = cq_mallocn((size_t)vocab, sizeof *s->c);
    s->prob = cq_mallocn((size_t)vocab, sizeof *s->prob);
    if (!s->c || !s->prob) {
        cq_sampler_free(s);
        return CQ_ERR_NOMEM;
    }
    *out = s;
    return CQ_OK;
}

void cq_sampler_free(cq_sampler *s) {
    if (!s) return;
    cq_free(s->c);
    cq_free(s->prob);
    cq_free(s);
}

void cq_sampler_reseed(cq_sampler *s, uint64_t seed) { s->state = seed; }

/* Min-heap (worst kept candidate at the root) for top-k selection. */
static void sift_down(cand *h, int n, int i) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && better(&h[w], &h[l])) w = l;
        if (r < n && better(&h[w], &h[r])) w = r;
        if (w == i) return;
        cand t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

static void sift_up(cand *h, int i) {
    while (i > 0) {
        int parent = (i - 1) / 2;
        if (!better(&h[parent], &h[i])) return;
        cand t = h[i];
        h[i] = h[parent];
        h[parent] = t;
        i = parent;
    }
}

/* Rank the candidates best first; returns how many are kept (top-k or all). */
static int rank(cq_sampler *s, const float *logits) {
    int V = s->vocab, k = s->p.top_k > 0 && s->p.top_k < V ? s->p.top_k : V;
    if (k == V) {
        for (int i = 0; i < V; i++) s->c[i] = (cand){logits[i], i};
    } else {
        int n = 0;
        for (int i = 0; i < V; i++) {
            cand c = {logits[i], i};
            if (n < k) {
                s->c[n] = c;
                sift_up(s->c, n++);
            } else if (better(&c, &s->c[0])) {
                s->c[0] = c;
                sift_down(s->c, k, 0);
            }
        }
    }
    qsort(s->c, (size_t)k, sizeof *s->c, cmp_cand);
    return k;
}

cq_status cq_sampler_sample(cq_sampler *s, const float *logits, int32_t *out) {
    int V = s->vocab;
    int best = 0;
    for (int i = 0; i < V; i++) {
        if (isnan(logits[i]) || logits[i] == INFINITY)
            return cq_fail(CQ_ERR_NUMERIC, "sampler: logit %d is %s", i, isnan(logits[i]) ? "NaN" : "+inf");
        if (logits[i] > logits[best]) best = i;
    }
    if (logits[best] == -INFINITY) return cq_fail(CQ_ERR_NUMERIC, "sampler: every logit is -inf");
    if (s->p.greedy) {
        *out = best;
        return CQ_OK;
    }
    int n = rank(s, logits);
    /* temperature, then probabilities over the top-k survivors */
    double inv_t = 1.0 / (double)s->p.temperature, top = s->c[0].logit, sum = 0;
    for (int i = 0; i < n; i++) sum += s->prob[i] = exp(((double)s->c[i].logit - top) * inv_t);
    for (int i = 0; i < n; i++) s->prob[i] /= sum;
    /* top-p: the shortest best-first prefix reaching top_p (at least one) */
    if (s->p.top_p < 1.0f) {
        double cum = 0;
        int keep = n;
        for (int i = 0; i < n; i++) {
            cum += s->prob[i];
            if (cum >= (double)s->p.top_p) {
                keep = i + 1;
                break;
            }
        }
        n = keep;
    }
    /* min-p relative to the most likely token (renormalisation does not change the ratio) */
    if (s->p.min_p > 0.0f) {
        double floor_p = (double)s->p.min_p * s->prob[0];
        int keep = 1;
        while (keep < n && s->prob[keep] >= floor_p) keep++;
        n = keep;
    }
    double mass = 0;
    for (int i = 0; i < n; i++) mass += s->prob[i];
    double u = next_uniform(s) * mass, cum = 0;
    for (int i = 0; i < n; i++) {
        cum += s->prob[i];
        if (u < cum) {
            *out = s->c[i].id;
            return CQ_OK;
        }
    }
    *out = s->c[n - 1].id; /* rounding left u at the very top */
    return CQ_OK;
}
