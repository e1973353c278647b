/*
 * test_chat.c — the chat session on the tiny golden Qwen3 model
 * (tests/golden/qwen3/qwen3_a, converted here): the rendered conversation
 * and its ids equal what transformers' apply_chat_template + tokenizer
 * produced, greedy replies equal the reference's greedy tokens up to the
 * stop token, streamed text equals the decoded ids, a second turn that
 * reuses the K/V cache gives the same tokens as a fresh session fed the
 * whole conversation, seeded sampling repeats, and the ChatML / stop-token
 * fallbacks of files without a chat bundle.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "base/base.h"
#include "format/cmf.h"
#include "format/convert.h"
#include "format/safetensors.h"
#include "models/qwen3.h"
#include "ops/ops.h"
#include "pipelines/chat.h"
#include "tokenizer/tokenizer.h"

#define SYSTEM "You are a helpful assistant."
#define USER "Hello! How are you today?"

static char g_cmf[1024];
static cq_st *g_gold;

static int setup(void **state) {
    (void)state;
    const char *dir = tu_tmpdir("chat");
    char src[1024];
    snprintf(src, sizeof src, "%s/tests/golden/qwen3/qwen3_a", CQ_SOURCE_DIR);
    snprintf(g_cmf, sizeof g_cmf, "%s/qwen3_a.cmf", dir);
    cq_convert_opts opts = {.quant = CQ_DTYPE_F32};
    cq_convert_report rep;
    cq_status s = cq_convert(src, g_cmf, &opts, &rep);
    cq_convert_report_free(&rep);
    if (s != CQ_OK) {
        fprintf(stderr, "convert: %s\n", cq_last_error());
        return -1;
    }
    char g[1100];
    snprintf(g, sizeof g, "%s/golden.safetensors", src);
    return cq_st_open(g, &g_gold) == CQ_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    cq_st_close(g_gold);
    return 0;
}

static const int32_t *gold_ids(const char *name, int *n) {
    const cq_st_tensor *t = cq_st_find(g_gold, name);
    if (!t || t->dtype != CQ_ST_I32) fail_msg("golden %s missing", name);
    *n = (int)t->nelem;
    return (const int32_t *)(const void *)t->data; /* safetensors data is 8-aligned after the header */
}

typedef struct session {
    cq_cmf *cmf;
    cq_backend *be;
    cq_qwen3 *m;
    cq_chat *chat;
    cq_sampler *smp;
} session;

static cq_status open_session(session *x, const char *path, const cq_chat_opts *co, const cq_sampler_params *sp) {
    memset(x, 0, sizeof *x);
    assert_int_equal(cq_cmf_open(path, &x->cmf), CQ_OK);
    assert_int_equal(cq_backend_create(NULL, 0, &x->be), CQ_OK);
    assert_int_equal(cq_qwen3_load(x->cmf, "", x->be, &x->m), CQ_OK);
    cq_sampler_params greedy = {.greedy = true};
    assert_int_equal(cq_sampler_create(cq_qwen3_get_config(x->m)->vocab_size, sp ? sp : &greedy, &x->smp), CQ_OK);
    const cq_causal_lm lm = cq_qwen3_causal_lm(x->m);
    return cq_chat_create(x->cmf, &lm, co, &x->chat);
}

static void close_session(session *x) {
    cq_chat_free(x->chat);
    cq_sampler_free(x->smp);
    cq_qwen3_free(x->m);
    cq_backend_free(x->be);
    cq_cmf_close(x->cmf);
}

/* What a turn streamed. */
typedef struct sink {
    int32_t ids[512];
    int n;
    char text[8192];
    size_t len;
} sink;

static int collect(void *user, int32_t id, const char *text, size_t len) {
    sink *k = user;
    if (k->n < 512) k->ids[k->n++] = id;
    if (k->len + len < sizeof k->text) {
        memcpy(k->text + k->len, text, len);
        k->len += len;
        k->text[k->len] = 0;
    }
    return 0;
}

static void turn(session *x, const char *msg, int max_tokens, sink *k, cq_chat_stats *st) {
    memset(k, 0, sizeof *k);
    cq_status s = cq_chat_turn(x->chat, msg, x->smp, max_tokens, collect, k, st);
    if (s != CQ_OK) fail_msg("turn: %s", cq_last_error());
    assert_int_equal(k->n, st->generated);
}

static void test_golden_turn(void **state) {
    (void)state;
    session x;
    cq_chat_opts co = {.enable_thinking = 0};
    assert_int_equal(open_session(&x, g_cmf, &co, NULL), CQ_OK);
    assert_int_equal(cq_chat_add_message(x.chat, "system", SYSTEM), CQ_OK);
    sink k;
    cq_chat_stats st;
    turn(&x, USER, 32, &k, &st);
    /* the render and its ids are the reference's */
    assert_string_equal(cq_chat_last_prompt(x.chat), cq_st_metadata_get(g_gold, "chat_text"));
    int nc, ng, nctx;
    const int32_t *chat_ids = gold_ids("chat_ids", &nc), *greedy = gold_ids("chat_greedy", &ng);
    const int32_t *ctx = cq_chat_context_ids(x.chat, &nctx);
    assert_int_equal(st.prompt_tokens, nc);
    assert_int_equal(st.reused_tokens, 0);
    assert_memory_equal(ctx, chat_ids, (size_t)nc * sizeof(int32_t));
    /* greedy reply = the reference's greedy tokens up to its first stop token */
    int stop_at = -1;
    for (int i = 0; i < ng && stop_at < 0; i++)
        if (greedy[i] == 2) stop_at = i; /* <|im_end|>, the file's eos id */
    assert_true(stop_at > 0);
    assert_int_equal(st.stop_id, 2);
    assert_int_equal(st.generated, stop_at);
    assert_memory_equal(k.ids, greedy, (size_t)stop_at * sizeof(int32_t));
    printf("  chat reply: %d tokens identical to transformers, then stop id %d\n", stop_at, (int)st.stop_id);
    /* the streamed text is the decoded reply; the cache holds prompt + reply */
    char *dec = NULL;
    size_t dl = 0;
    assert_int_equal(cq_tokenizer_decode(cq_chat_tokenizer(x.chat), greedy, (size_t)stop_at, 0, &dec, &dl), CQ_OK);
    assert_int_equal(k.len, dl);
    assert_memory_equal(k.text, dec, dl);
    cq_free(dec);
    ctx = cq_chat_context_ids(x.chat, &nctx);
    assert_int_equal(nctx, nc + stop_at);
    assert_memory_equal(ctx + nc, greedy, (size_t)stop_at * sizeof(int32_t));
    close_session(&x);
}

/* A scripted causal LM behind the interface: the next token is always the
 * last fed id + 1, so the session's bookkeeping can be checked exactly
 * without a real model. */
#define FAKE_VOCAB 200000
typedef struct fake_lm {
    int32_t fed[4096];
    int len, feeds, truncates, cap;
} fake_lm;

static cq_status fake_create(void *self, int max_tokens, int max_batch, void **cache) {
    (void)max_batch;
    fake_lm *f = self;
    f->cap = max_tokens;
    *cache = f;
    return CQ_OK;
}
static void fake_free(void *cache) { (void)cache; }
static int fake_capacity(const void *cache) { return ((const fake_lm *)cache)->cap; }
static cq_status fake_truncate(void *cache, int n) {
    fake_lm *f = cache;
    f->truncates++;
    f->len = n;
    return CQ_OK;
}
static cq_status fake_feed(void *cache, const int32_t *ids, int n, float *logits) {
    fake_lm *f = cache;
    memcpy(f->fed + f->len, ids, (size_t)n * sizeof *ids);
    f->len += n;
    f->feeds++;
    if (logits) {
        for (int i = 0; i < FAKE_VOCAB; i++) logits[i] = 0.0f;
        logits[(ids[n - 1] + 1) % FAKE_VOCAB] = 1.0f;
    }
    return CQ_OK;
}

static void test_any_causal_lm(void **state) {
    (void)state;
    cq_cmf *cmf;
    assert_int_equal(cq_cmf_open(g_cmf, &cmf), CQ_OK);
    static fake_lm f;
    memset(&f, 0, sizeof f);
    const cq_causal_lm lm = {.self = &f, .vocab = FAKE_VOCAB, .max_positions = 4096, .has_logits = true,
                             .cache_create = fake_create, .cache_free = fake_free, .capacity = fake_capacity,
                             .truncate = fake_truncate, .feed = fake_feed};
    cq_chat *chat;
    cq_chat_opts co = {.enable_thinking = 0, .context = 4096};
    assert_int_equal(cq_chat_create(cmf, &lm, &co, &chat), CQ_OK);
    cq_sampler *smp;
    cq_sampler_params greedy = {.greedy = true};
    assert_int_equal(cq_sampler_create(FAKE_VOCAB, &greedy, &smp), CQ_OK);
    cq_chat_stats st;
    assert_int_equal(cq_chat_turn(chat, USER, smp, 4, NULL, NULL, &st), CQ_OK);
    int n;
    const int32_t *ctx = cq_chat_context_ids(chat, &n);
    /* the prompt in one feed, then three single tokens (the fourth's logits are never needed) */
    assert_int_equal(st.generated, 4);
    assert_int_equal(n, st.prompt_tokens + 3);
    assert_int_equal(f.len, n);
    assert_int_equal(f.feeds, 1 + 3);
    assert_int_equal(f.truncates, 1);
    assert_memory_equal(f.fed, ctx, (size_t)n * sizeof(int32_t));
    const int32_t last = ctx[st.prompt_tokens - 1];
    for (int i = 0; i < 3; i++) assert_int_equal(ctx[st.prompt_tokens + i], last + 1 + i);
    cq_sampler_free(smp);
    cq_chat_free(chat);
    cq_cmf_close(cmf);
}

/* A second turn on the kept cache equals a fresh session fed the whole conversation. */
static void test_reuse_is_exact(void **state) {
    (void)state;
    cq_chat_opts co = {.enable_thinking = 0};
    session a, b;
    sink k1, k2a, k2b;
    cq_chat_stats s1, s2a, s2b;
    assert_int_equal(open_session(&a, g_cmf, &co, NULL), CQ_OK);
    assert_int_equal(cq_chat_add_message(a.chat, "system", SYSTEM), CQ_OK);
    turn(&a, USER, 32, &k1, &s1);
    turn(&a, "Tell me about the red circle.", 20, &k2a, &s2a);
    assert_true(s2a.reused_tokens > 40 && s2a.reused_tokens < s2a.prompt_tokens);

    assert_int_equal(open_session(&b, g_cmf, &co, NULL), CQ_OK);
    assert_int_equal(cq_chat_add_message(b.chat, "system", SYSTEM), CQ_OK);
    assert_int_equal(cq_chat_add_message(b.chat, "user", USER), CQ_OK);
    assert_int_equal(cq_chat_add_message(b.chat, "assistant", k1.text), CQ_OK);
    turn(&b, "Tell me about the red circle.", 20, &k2b, &s2b);
    assert_int_equal(s2b.reused_tokens, 0);
    assert_string_equal(cq_chat_last_prompt(a.chat), cq_chat_last_prompt(b.chat));
    assert_int_equal(s2a.prompt_tokens, s2b.prompt_tokens);
    assert_int_equal(k2a.n, k2b.n);
    assert_memory_equal(k2a.ids, k2b.ids, (size_t)k2a.n * sizeof(int32_t));
    int na, nb;
    const int32_t *ca = cq_chat_context_ids(a.chat, &na), *cb = cq_chat_context_ids(b.chat, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(ca, cb, (size_t)na * sizeof(int32_t));
    printf("  second turn: %d of %d prompt tokens reused, %d reply tokens equal to a fresh session\n", s2a.reused_tokens,
           s2a.prompt_tokens, k2a.n);
    close_session(&a);
    close_session(&b);
}

static void test_seeded_sampling(void **state) {
    (void)state;
    cq_sampler_params sp = {.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = 1234};
    session a, b, c;
    sink ka, kb, kc;
    cq_chat_stats st;
    assert_int_equal(open_session(&a, g_cmf, NULL, &sp), CQ_OK);
    assert_int_equal(open_session(&b, g_cmf, NULL, &sp), CQ_OK);
    sp.seed = 4321;
    assert_int_equal(open_session(&c, g_cmf, NULL, &sp), CQ_OK);
    turn(&a, USER, 24, &ka, &st);
    turn(&b, USER, 24, &kb, &st);
    turn(&c, USER, 24, &kc, &st);
    assert_int_equal(ka.n, kb.n);
    assert_memory_equal(ka.ids, kb.ids, (size_t)ka.n * sizeof(int32_t));
    assert_true(ka.n != kc.n || memcmp(ka.ids, kc.ids, (size_t)ka.n * sizeof(int32_t)) != 0);
    close_session(&a);
    close_session(&b);
    close_session(&c);
}

/* A file without the header's chat bundle: ChatML and the tokenizer's <|im_end|>. */
static void test_fallbacks(void **state) {
    (void)state;
    cq_cmf *src;
    assert_int_equal(cq_cmf_open(g_cmf, &src), CQ_OK);
    size_t hl, tl;
    const char *hdr = cq_cmf_header_json(src, &hl);
    const uint8_t *tj = cq_cmf_tokenizer_json(src, &tl);
    cJSON *h = cJSON_ParseWithLength(hdr, hl);
    assert_non_null(h);
    cJSON_DeleteItemFromObject(h, "tokenizer_config");
    char *text = cJSON_PrintUnformatted(h);
    const char *path = tu_path(tu_tmpdir("chat_bare"), "bare.cmf");
    cq_cmf_writer *w;
    assert_int_equal(cq_cmf_writer_create(path, &w), CQ_OK);
    assert_int_equal(cq_cmf_writer_set_header(w, text, strlen(text)), CQ_OK);
    assert_int_equal(cq_cmf_writer_set_tokenizer(w, tj, tl), CQ_OK);
    for (size_t i = 0; i < cq_cmf_tensor_count(src); i++) {
        const cq_tensor_view *v = cq_cmf_tensor_at(src, i);
        assert_int_equal(cq_cmf_writer_add(w, v->name, v->dtype, v->ndim, v->shape, v->data, v->nbytes), CQ_OK);
    }
    if (cq_cmf_writer_finish(w) != CQ_OK) fail_msg("write: %s", cq_last_error());
    cq_cmf_writer_free(w);
    cJSON_free(text);
    cJSON_Delete(h);
    cq_cmf_close(src);

    session x;
    assert_int_equal(open_session(&x, path, NULL, NULL), CQ_OK);
    assert_int_equal(cq_chat_add_message(x.chat, "system", SYSTEM), CQ_OK);
    sink k;
    cq_chat_stats st;
    turn(&x, USER, 64, &k, &st);
    assert_string_equal(cq_chat_last_prompt(x.chat), "<|im_start|>system\n" SYSTEM "<|im_end|>\n<|im_start|>user\n" USER
                                                     "<|im_end|>\n<|im_start|>assistant\n");
    /* Qwen3's template without enable_thinking renders the same text */
    const char *gold = cq_st_metadata_get(g_gold, "chat_text");
    assert_memory_equal(gold, cq_chat_last_prompt(x.chat), strlen(cq_chat_last_prompt(x.chat)));
    assert_true(st.stop_id == 2 || st.generated == 64);
    close_session(&x);
}

static void test_raw_and_limits(void **state) {
    (void)state;
    session x;
    cq_chat_opts co = {.raw = true};
    assert_int_equal(open_session(&x, g_cmf, &co, NULL), CQ_OK);
    sink k;
    cq_chat_stats st;
    turn(&x, USER, 5, &k, &st);
    assert_string_equal(cq_chat_last_prompt(x.chat), USER);
    int n, na;
    const int32_t *ctx = cq_chat_context_ids(x.chat, &n), *ids = gold_ids("ids_a", &na); /* prompt a is USER */
    assert_int_equal(st.prompt_tokens, na);
    assert_memory_equal(ctx, ids, (size_t)na * sizeof(int32_t));
    int ng;
    const int32_t *greedy = gold_ids("greedy_a", &ng);
    assert_int_equal(st.generated, 5); /* greedy_a has no stop token in its first 5 */
    assert_memory_equal(k.ids, greedy, 5 * sizeof(int32_t));
    assert_int_equal(st.stop_id, -1);
    close_session(&x);

    /* a context too small for the prompt fails cleanly, and the session stays usable */
    co = (cq_chat_opts){.context = 40, .enable_thinking = 0};
    assert_int_equal(open_session(&x, g_cmf, &co, NULL), CQ_OK);
    assert_int_equal(cq_chat_add_message(x.chat, "system", SYSTEM), CQ_OK);
    assert_int_equal(cq_chat_turn(x.chat, USER, x.smp, 8, NULL, NULL, &st), CQ_ERR_BOUNDS);
    assert_non_null(strstr(cq_last_error(), "context"));
    close_session(&x);
    co = (cq_chat_opts){.context = 24};
    assert_int_equal(open_session(&x, g_cmf, &co, NULL), CQ_OK);
    assert_int_equal(cq_chat_turn(x.chat, "Hi", x.smp, 100, collect, &k, &st), CQ_OK);
    assert_true(st.context_full || st.stop_id >= 0);
    assert_int_equal(cq_chat_turn(x.chat, NULL, x.smp, 8, NULL, NULL, &st), CQ_ERR_INVALID_ARG);
    close_session(&x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_turn),
        cmocka_unit_test(test_any_causal_lm),
        cmocka_unit_test(test_reuse_is_exact),
        cmocka_unit_test(test_seeded_sampling),
        cmocka_unit_test(test_fallbacks),
        cmocka_unit_test(test_raw_and_limits),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
