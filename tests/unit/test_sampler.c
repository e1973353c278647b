/*
 * test_sampler.c — the next-token sampler: greedy ties, each filter's
 * survivors and the drawn frequencies (20000 seeded draws, each frequency
 * within 0.015 of the exact probability: over 4 standard deviations),
 * seed reproducibility, top-k selection against a full sort, bad input.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "pipelines/sampler.h"

#define DRAWS 20000
#define FREQ_TOL 0.015

static cq_sampler *make(int V, cq_sampler_params p) {
    cq_sampler *s;
    assert_int_equal(cq_sampler_create(V, &p, &s), CQ_OK);
    return s;
}

/* Frequencies of DRAWS draws into freq[V]. */
static void draw(cq_sampler *s, const float *logits, int V, double *freq) {
    memset(freq, 0, (size_t)V * sizeof *freq);
    for (int i = 0; i < DRAWS; i++) {
        int32_t id = -1;
        assert_int_equal(cq_sampler_sample(s, logits, &id), CQ_OK);
        assert_true(id >= 0 && id < V);
        freq[id] += 1.0 / DRAWS;
    }
}

static void expect_freq(const double *freq, const double *want, int V) {
    for (int i = 0; i < V; i++)
        if (fabs(freq[i] - want[i]) > FREQ_TOL || (want[i] == 0 && freq[i] != 0))
            fail_msg("token %d drawn with frequency %.4f, expected %.4f", i, freq[i], want[i]);
}

static float L3[4];

static void setup_l3(void) {
    /* probabilities 0.5, 0.3, 0.15, 0.05 */
    L3[0] = logf(0.5f);
    L3[1] = logf(0.3f);
    L3[2] = logf(0.15f);
    L3[3] = logf(0.05f);
}

static void test_greedy(void **state) {
    (void)state;
    cq_sampler *s = make(5, (cq_sampler_params){.greedy = true});
    float l[5] = {1, 3, -2, 3, 0};
    int32_t id;
    assert_int_equal(cq_sampler_sample(s, l, &id), CQ_OK);
    assert_int_equal(id, 1); /* the lower of two equal maxima */
    l[4] = 4;
    assert_int_equal(cq_sampler_sample(s, l, &id), CQ_OK);
    assert_int_equal(id, 4);
    l[2] = NAN;
    assert_int_equal(cq_sampler_sample(s, l, &id), CQ_ERR_NUMERIC);
    float ninf[2] = {-INFINITY, -INFINITY};
    cq_sampler_free(s);
    s = make(2, (cq_sampler_params){.greedy = true});
    assert_int_equal(cq_sampler_sample(s, ninf, &id), CQ_ERR_NUMERIC);
    cq_sampler_free(s);
}

static void test_filters(void **state) {
    (void)state;
    setup_l3();
    double f[4];
    /* plain: the model's probabilities */
    cq_sampler *s = make(4, (cq_sampler_params){.temperature = 1, .top_p = 1, .seed = 1});
    draw(s, L3, 4, f);
    expect_freq(f, (double[]){0.5, 0.3, 0.15, 0.05}, 4);
    cq_sampler_free(s);
    /* temperature 0.5 squares the probabilities */
    s = make(4, (cq_sampler_params){.temperature = 0.5f, .top_p = 1, .seed = 2});
    draw(s, L3, 4, f);
    double z = 0.25 + 0.09 + 0.0225 + 0.0025;
    expect_freq(f, (double[]){0.25 / z, 0.09 / z, 0.0225 / z, 0.0025 / z}, 4);
    cq_sampler_free(s);
    /* top-k 2 */
    s = make(4, (cq_sampler_params){.temperature = 1, .top_k = 2, .top_p = 1, .seed = 3});
    draw(s, L3, 4, f);
    expect_freq(f, (double[]){0.625, 0.375, 0, 0}, 4);
    cq_sampler_free(s);
    /* top-p 0.85: 0.5 + 0.3 < 0.85 <= 0.95 keeps three */
    s = make(4, (cq_sampler_params){.temperature = 1, .top_p = 0.85f, .seed = 4});
    draw(s, L3, 4, f);
    expect_freq(f, (double[]){0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0}, 4);
    cq_sampler_free(s);
    /* min-p 0.5: p >= 0.25 keeps two */
    s = make(4, (cq_sampler_params){.temperature = 1, .top_p = 1, .min_p = 0.5f, .seed = 5});
    draw(s, L3, 4, f);
    expect_freq(f, (double[]){0.625, 0.375, 0, 0}, 4);
    cq_sampler_free(s);
    /* order: top-k 3 renormalises to (0.526, 0.316, 0.158), then top-p 0.8 keeps two */
    s = make(4, (cq_sampler_params){.temperature = 1, .top_k = 3, .top_p = 0.8f, .seed = 6});
    draw(s, L3, 4, f);
    expect_freq(f, (double[]){0.625, 0.375, 0, 0}, 4);
    cq_sampler_free(s);
    /* top-k 1 is greedy */
    s = make(4, (cq_sampler_params){.temperature = 3, .top_k = 1, .top_p = 1, .seed = 7});
    draw(s, L3, 4, f);
    expect_freq(f, (double[]){1, 0, 0, 0}, 4);
    cq_sampler_free(s);
}

static void test_seed_and_topk(void **state) {
    (void)state;
    enum { V = 1000, K = 50, N = 300 };
    float *l = malloc(V * sizeof(float));
    assert_non_null(l);
    tu_rng r;
    tu_rng_seed(&r, 11);
    tu_fill_normal(&r, l, V, 3.0f);
    l[17] = l[18]; /* a tie */
    cq_sampler_params p = {.temperature = 0.8f, .top_k = K, .top_p = 0.95f, .min_p = 0.01f, .seed = 42};
    cq_sampler *a = make(V, p), *b = make(V, p);
    p.seed = 43;
    cq_sampler *c = make(V, p);
    /* the K best by a full sort */
    float *sorted = malloc(V * sizeof(float));
    assert_non_null(sorted);
    memcpy(sorted, l, V * sizeof(float));
    for (int i = 0; i < V; i++)
        for (int j = i + 1; j < V; j++)
            if (sorted[j] > sorted[i]) {
                float t = sorted[i];
                sorted[i] = sorted[j];
                sorted[j] = t;
            }
    float kth = sorted[K - 1];
    int differ = 0;
    for (int i = 0; i < N; i++) {
        int32_t x, y, w;
        assert_int_equal(cq_sampler_sample(a, l, &x), CQ_OK);
        assert_int_equal(cq_sampler_sample(b, l, &y), CQ_OK);
        assert_int_equal(cq_sampler_sample(c, l, &w), CQ_OK);
        assert_int_equal(x, y);
        assert_true(l[x] >= kth);
        differ += x != w;
    }
    assert_true(differ > N / 10); /* another seed, another stream */
    /* reseeding replays the stream */
    int32_t first[8], again[8];
    cq_sampler_reseed(a, 99);
    for (int i = 0; i < 8; i++) assert_int_equal(cq_sampler_sample(a, l, &first[i]), CQ_OK);
    cq_sampler_reseed(a, 99);
    for (int i = 0; i < 8; i++) assert_int_equal(cq_sampler_sample(a, l, &again[i]), CQ_OK);
    assert_memory_equal(first, again, sizeof first);
    cq_sampler_free(a);
    cq_sampler_free(b);
    cq_sampler_free(c);
    free(sorted);
    free(l);
}

static void test_bad_params(void **state) {
    (void)state;
    cq_sampler *s;
    cq_sampler_params ok = {.temperature = 1, .top_p = 1};
    cq_sampler_params p = ok;
    p.temperature = 0;
    assert_int_equal(cq_sampler_create(10, &p, &s), CQ_ERR_INVALID_ARG);
    p = ok;
    p.top_k = -1;
    assert_int_equal(cq_sampler_create(10, &p, &s), CQ_ERR_INVALID_ARG);
    p = ok;
    p.top_p = 0;
    assert_int_equal(cq_sampler_create(10, &p, &s), CQ_ERR_INVALID_ARG);
    p = ok;
    p.min_p = 1.5f;
    assert_int_equal(cq_sampler_create(10, &p, &s), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_sampler_create(0, &ok, &s), CQ_ERR_INVALID_ARG);
    cq_sampler_free(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy),
        cmocka_unit_test(test_filters),
        cmocka_unit_test(test_seed_and_topk),
        cmocka_unit_test(test_bad_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
