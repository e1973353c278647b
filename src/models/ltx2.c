/*
 * ltx2.c — LTX-2's audio-video denoiser (ltx2.h), written once against the
 * op layer. Semantics follow diffusers' LTX2VideoTransformer3DModel and
 * LTX2VideoTransformerBlock (transformer_ltx2.py at 58eb52c0), each float
 * step in the reference's order:
 *  - adaLN-single (PixArt): 256-channel sinusoid of t (cos half first) ->
 *    Linear -> SiLU -> Linear = E (the embedded timestep) -> SiLU -> Linear
 *    = the k modulation chunks of the stream's width;
 *  - a block's modulation vector = its learned table row + the chunk
 *    (shift, scale, gate of self-attention; of the FF; of the prompt
 *    attention's query; the prompt context's shift and scale; the A<->V
 *    rows scale-first, then the gate); norms are weightless RMS, modulated
 *    as norm * (1 + scale) + shift;
 *  - attention: q/k/v with biases, q and k RMS-normed with a weight across
 *    the whole inner width (eps 1e-6, not norm_eps: the reference builds its
 *    attentions with the default), split RoPE per head, softmax(q k^T /
 *    sqrt(dh)), each head's output times 2 sigmoid(gate logit) (the logits a
 *    Linear of the query input), then to_out with bias. STG replaces the
 *    attention by the values;
 *  - the A<->V attentions read norms of both streams taken after both
 *    prompt attentions and before either A<->V update, so the two
 *    directions do not see each other;
 *  - output: LayerNorm (no affine, eps 1e-6) * (1 + row1 + E) + (row0 + E),
 *    then proj_out.
 * Every activation is f32 on every backend (this first version keeps the
 * reference's precision; the bf16 activation path is not written yet).
 */
#include "models/ltx2.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "models/kit/dit.h"
#include "models/ltx2_impl.h"
#include "models/ltx2_rope.h"

#define LX_QK_EPS 1e-6f  /* the attentions' q/k RMSNorm (LTX2Attention's default norm_eps) */
#define LX_OUT_EPS 1e-6f /* the output LayerNorm */
#define LX_MAX_TOKENS (1 << 22)
#define LX_MAX_CTX (1 << 20)

/* The modulation vectors of one block, one stream and one run of timesteps, in this order. */
enum {
    M_SH_SA, M_SC_SA, M_G_SA,     /* self-attention: shift, scale, gate */
    M_SH_FF, M_SC_FF, M_G_FF,     /* feed-forward */
    M_SH_Q, M_SC_Q, M_G_Q,        /* prompt attention's query (cross_attn_mod) */
    M_SH_KV, M_SC_KV,             /* the prompt context (prompt tables) */
    M_A2V_SC, M_A2V_SH, M_V2A_SC, M_V2A_SH, M_G_CA, /* A<->V: scale-first, then the gate */
    M_1SC_SA, M_1SC_FF, M_1SC_Q, M_1SC_KV, M_1A2V, M_1V2A, /* 1 + each scale */
    M_COUNT
};

/* ------------------------------------------------------------------------ */
/* The forward                                                              */
/* ------------------------------------------------------------------------ */
/* One stream's state for a forward. */
typedef struct lx_srun {
    int64_t n, L;                        /* tokens, prompt rows */
    int G;                               /* runs of equal timesteps */
    cq_dit_group grp[CQ_LTX2_MAX_RUNS];  /* rows of each run (mod_row = the run) */
    float tval[CQ_LTX2_MAX_RUNS];        /* each run's timestep */
    cq_tensor lat, x, hn, nrm, mc, ctx, ctxm, y;
    cq_tensor mods;                      /* [G * M_COUNT, D]: one block's vectors per run */
    cq_tensor outm;                      /* [G * 2, D]: the output head's shift, scale per run */
    cq_tensor t_mod, t_emb, ss_mod, ss_emb, g_mod, g_emb, p_mod, p_emb; /* the adaLN-single tables per run */
    cq_tensor rc, rs, xc, xs;            /* RoPE: self [n, D/2], A<->V [n, audio_dim/2] */
} lx_srun;

#define LX_TABLES 4 /* adaLN-single tables per stream: main, A<->V scale-shift, A<->V gate, prompt */

/* One prompt and latent grid: the token-sized buffers (prepare) and the run-sized ones (grown by a step). */
struct cq_ltx2_cond {
    cq_ltx2 *m;
    int frames, height, width, audio_frames;
    double fps;
    lx_srun r[ST_COUNT];
    cq_tensor q, k, v, att, gl, ge, proj, ffh; /* attention and FF scratch */
    int gcap;                  /* runs the run-sized buffers hold (0: none yet) */
    cq_tensor feat, hid, embs; /* adaLN-single scratch: feat [ST_COUNT * LX_TABLES * gcap, 256] */
    float *hfeat;              /* its host side */
    /* this step's flags */
    bool isolate;
    bool *stg;                 /* [n_layers] */
    /* the last step's op layout: a change drops the recording */
    bool sig_valid, sig_isolate, *sig_stg;
    int sig_G[ST_COUNT];
    cq_dit_group sig_grp[ST_COUNT][CQ_LTX2_MAX_RUNS];
    cq_dit_stepper stepper;
};
typedef cq_ltx2_cond lx_fwd;

static void tapf(const cq_ltx2 *m, const cq_tensor *t, const char *fmt, ...) CQ_PRINTF(3, 4);
static void tapf(const cq_ltx2 *m, const cq_tensor *t, const char *fmt, ...) {
    if (!m->tap) return;
    char name[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    m->tap(m->tap_user, name, t);
}

/* The first rows x cols of a scratch tensor as a dense 2-D view (zeroed, so every op refuses it, past its end). */
static cq_tensor v2(const cq_tensor *t, int64_t rows, int64_t cols) {
    cq_tensor o;
    if (cq_tensor_subview(t, 0, 2, (const int64_t[2]){rows, cols}, &o) != CQ_OK) memset(&o, 0, sizeof o);
    return o;
}

/* rows [r0, r0 + rows) of a [*, cols] tensor as [rows, cols], from element r0 * cols */
static cq_tensor sub2(const cq_tensor *t, int64_t r0, int64_t rows, int64_t cols) {
    cq_tensor o;
    if (cq_tensor_subview(t, r0 * cols, 2, (const int64_t[2]){rows, cols}, &o) != CQ_OK) memset(&o, 0, sizeof o);
    return o;
}

static cq_tensor mvec(const lx_srun *r, int64_t D, int g, int which) {
    const cq_dit_mod md = {.t = &r->mods, .dim = D, .per_row = M_COUNT};
    return cq_dit_mod_vec(&md, g, which);
}

/* Runs of equal values in t[0..nt) (nt 1: one run over all n rows). */
static cq_status make_runs(const char *what, const float *t, int nt, int64_t n, lx_srun *r) {
    r->G = 0;
    for (int64_t i = 0; i < (nt == 1 ? 1 : n); i++) {
        if (i > 0 && t[i] == t[i - 1]) {
            r->grp[r->G - 1].n++;
            continue;
        }
        if (r->G == CQ_LTX2_MAX_RUNS)
            return cq_fail(CQ_ERR_UNSUPPORTED, "ltx2: the %s timesteps change value more than %d times along the "
                           "tokens", what, CQ_LTX2_MAX_RUNS - 1);
        r->grp[r->G] = (cq_dit_group){.r0 = i, .n = nt == 1 ? n : 1, .mod_row = r->G};
        r->tval[r->G++] = t[i];
    }
    return CQ_OK;
}

/* One adaLN-single on the features in slot `slot` of feat (G rows): mod [G, k D], emb [G, D] (the first G rows
 * of each). */
static cq_status adaln(cq_ltx2 *m, lx_fwd *f, const lx_adaln *A, int64_t D, int slot, int G, cq_tensor *mod,
                       cq_tensor *emb) {
    cq_backend *be = m->be;
    cq_tensor fe = sub2(&f->feat, (int64_t)slot * f->gcap, G, CQ_LTX2_TIMESTEP_CHANNELS);
    cq_tensor hid = v2(&f->hid, G, D), es = v2(&f->embs, G, D);
    cq_tensor mo = cq_tensor_rows_view(mod, 0, G), em = cq_tensor_rows_view(emb, 0, G);
    cq_matmul_args mm = {.y = &hid, .x = &fe, .w = &A->l1w, .bias = &A->l1b, .act = CQ_ACT_SILU};
    CQ_TRY(cq_op_matmul(be, &mm));
    CQ_TRY(cq_op_linear(be, &em, &hid, &A->l2w, &A->l2b));
    CQ_TRY(cq_op_unary(be, &es, &em, CQ_UNARY_SILU, 0.0f, 0.0f));
    return cq_op_linear(be, &mo, &es, &A->lw, &A->lb);
}

/* The timestep each table reads per run, as sinusoid features into the host side of feat (slot s * LX_TABLES +
 * table), then uploaded: main (the run's timestep), A<->V scale-shift (the other stream's sigma, or the run's
 * timestep without use_cross_timestep), A<->V gate (the same times the multipliers' ratio), prompt (the
 * stream's sigma). */
static cq_status table_features(cq_ltx2 *m, lx_fwd *f, const cq_ltx2_inputs *in) {
    const cq_dit_tproj tp = {.dim = CQ_LTX2_TIMESTEP_CHANNELS, .flip_sin_to_cos = true, .scale = 1.0f,
                             .max_period = 10000.0f};
    for (int si = 0; si < ST_COUNT; si++) {
        const lx_srun *r = &f->r[si];
        const float own = si == ST_VIDEO ? in->sigma : in->audio_sigma;
        const float other = si == ST_VIDEO ? in->audio_sigma : in->sigma;
        float tv[LX_TABLES][CQ_LTX2_MAX_RUNS];
        for (int g = 0; g < r->G; g++) {
            tv[0][g] = r->tval[g];
            tv[1][g] = in->use_cross_timestep ? other : r->tval[g];
            tv[2][g] = tv[1][g] * m->cfg.gate_factor;
            tv[3][g] = own;
        }
        for (int j = 0; j < LX_TABLES; j++)
            cq_dit_timestep_features(&tp, tv[j], r->G,
                                     f->hfeat + (size_t)(si * LX_TABLES + j) * (size_t)f->gcap *
                                                    CQ_LTX2_TIMESTEP_CHANNELS);
    }
    return cq_tensor_upload(&f->feat, f->hfeat,
                            (size_t)ST_COUNT * LX_TABLES * (size_t)f->gcap * CQ_LTX2_TIMESTEP_CHANNELS * sizeof(float));
}

/* The eight adaLN-single tables, each stream's per run. */
static cq_status table_ops(cq_ltx2 *m, lx_fwd *f) {
    static const char *const tn[ST_COUNT][LX_TABLES] = {
        {"time_embed", "av_video_ss", "av_video_gate", "prompt_adaln"},
        {"audio_time_embed", "av_audio_ss", "av_audio_gate", "audio_prompt_adaln"}};
    for (int si = 0; si < ST_COUNT; si++) {
        const lx_stream *S = &m->s[si];
        lx_srun *r = &f->r[si];
        const lx_adaln *A[LX_TABLES] = {&S->time, &S->ca_ss, &S->ca_gate, &S->prompt};
        cq_tensor *mods[LX_TABLES] = {&r->t_mod, &r->ss_mod, &r->g_mod, &r->p_mod};
        cq_tensor *embs[LX_TABLES] = {&r->t_emb, &r->ss_emb, &r->g_emb, &r->p_emb};
        for (int j = 0; j < LX_TABLES; j++) {
            if (j == 3 && !m->cfg.prompt_adaln) continue;
            CQ_TRY(adaln(m, f, A[j], S->dim, si * LX_TABLES + j, r->G, mods[j], embs[j]));
            if (m->tap) {
                cq_tensor mo = cq_tensor_rows_view(mods[j], 0, r->G), em = cq_tensor_rows_view(embs[j], 0, r->G);
                tapf(m, &mo, "%s_mod", tn[si][j]);
                tapf(m, &em, "%s_emb", tn[si][j]);
            }
        }
    }
    return CQ_OK;
}

/* One block's modulation vectors of a stream, per run: the learned rows plus the adaLN-single chunks. */
static cq_status block_mods(cq_ltx2 *m, lx_srun *r, const lx_stream *S, const lx_sblock *B) {
    cq_backend *be = m->be;
    const int64_t D = S->dim;
    for (int g = 0; g < r->G; g++) {
        const int64_t base = (int64_t)g * M_COUNT;
        cq_tensor dst = sub2(&r->mods, base, S->k, D), tb = sub2(&r->t_mod, (int64_t)g * S->k, S->k, D);
        CQ_TRY(cq_op_binary(be, &dst, &B->sst, &tb, CQ_BINARY_ADD));
        if (m->xattn) {
            dst = sub2(&r->mods, base + M_SH_KV, 2, D);
            if (m->cfg.prompt_adaln) {
                cq_tensor pb = sub2(&r->p_mod, (int64_t)g * 2, 2, D);
                CQ_TRY(cq_op_binary(be, &dst, &B->psst, &pb, CQ_BINARY_ADD));
            } else {
                CQ_TRY(cq_op_copy(be, &dst, &B->psst)); /* the static table alone (KV-cacheable prompts) */
            }
        }
        cq_tensor c4 = sub2(&B->csst, 0, 4, D), c1 = sub2(&B->csst, 4, 1, D);
        cq_tensor sb = sub2(&r->ss_mod, (int64_t)g * 4, 4, D), gb = sub2(&r->g_mod, g, 1, D);
        dst = sub2(&r->mods, base + M_A2V_SC, 4, D);
        CQ_TRY(cq_op_binary(be, &dst, &c4, &sb, CQ_BINARY_ADD));
        dst = sub2(&r->mods, base + M_G_CA, 1, D);
        CQ_TRY(cq_op_binary(be, &dst, &c1, &gb, CQ_BINARY_ADD));
        const int ones[][2] = {{M_1SC_SA, M_SC_SA}, {M_1SC_FF, M_SC_FF}, {M_1SC_Q, M_SC_Q},
                               {M_1SC_KV, M_SC_KV}, {M_1A2V, M_A2V_SC}, {M_1V2A, M_V2A_SC}};
        for (size_t i = 0; i < CQ_ARRAY_LEN(ones); i++) {
            if ((ones[i][1] == M_SC_Q && !S->xmod) || (ones[i][1] == M_SC_KV && !m->xattn)) continue;
            cq_tensor o = sub2(&r->mods, base + ones[i][0], 1, D), sc = sub2(&r->mods, base + ones[i][1], 1, D);
            CQ_TRY(cq_op_unary(be, &o, &sc, CQ_UNARY_ADD_SCALAR, 1.0f, 0.0f));
        }
    }
    return CQ_OK;
}

/* y = nrm * (1 + scale) + shift per run (y may be nrm). */
static cq_status modulate(cq_ltx2 *m, const lx_srun *r, int64_t D, cq_tensor *y, const cq_tensor *nrm, int onep,
                          int shift) {
    for (int g = 0; g < r->G; g++) {
        cq_tensor yv = cq_tensor_rows_view(y, r->grp[g].r0, r->grp[g].n);
        cq_tensor nv = cq_tensor_rows_view(nrm, r->grp[g].r0, r->grp[g].n);
        cq_tensor a = mvec(r, D, g, onep), b = mvec(r, D, g, shift);
        CQ_TRY(cq_op_binary(m->be, &yv, &nv, &a, CQ_BINARY_MUL));
        CQ_TRY(cq_op_binary(m->be, &yv, &yv, &b, CQ_BINARY_ADD));
    }
    return CQ_OK;
}

/* x += gate ⊙ y per run (which < 0: no gate). */
static cq_status gated_res(cq_ltx2 *m, const lx_srun *r, int64_t D, cq_tensor *x, const cq_tensor *y, int which) {
    if (which < 0) return cq_op_gated_add(m->be, x, y, NULL);
    for (int g = 0; g < r->G; g++) {
        cq_tensor xv = cq_tensor_rows_view(x, r->grp[g].r0, r->grp[g].n);
        cq_tensor yv = cq_tensor_rows_view(y, r->grp[g].r0, r->grp[g].n);
        cq_tensor gate = mvec(r, D, g, which);
        CQ_TRY(cq_op_gated_add(m->be, &xv, &yv, &gate));
    }
    return CQ_OK;
}

/* Split RoPE per head on t [n, heads * dh] with the tables [n, heads * dh / 2]: the rows viewed as n * heads heads
 * of one head each (ltx2_rope.h). */
static cq_status rope(cq_backend *be, const cq_tensor *t, int heads, int dh, const cq_tensor *c, const cq_tensor *s) {
    const int64_t n = cq_tensor_rows(t);
    cq_tensor tv, cv, sv;
    CQ_TRY(cq_tensor_reshape(t, 2, (const int64_t[2]){n * heads, dh}, &tv));
    CQ_TRY(cq_tensor_reshape(c, 2, (const int64_t[2]){n * heads, dh / 2}, &cv));
    CQ_TRY(cq_tensor_reshape(s, 2, (const int64_t[2]){n * heads, dh / 2}, &sv));
    return cq_op_qk_norm_rope(be, &tv, 1, dh, NULL, 0.0f, &cv, &sv, CQ_ROPE_HALF, 0);
}

/* One attention: queries from xq, keys and values from xkv (NULL: xq), RoPE on q and k where tables are given;
 * perturbed (STG): the values stand in for the attention. *heads = the gated heads [rows of xq, inner] (to_out's
 * input, which proj_res applies). */
static cq_status attend(cq_ltx2 *m, lx_fwd *f, const lx_attn *A, const cq_tensor *gidx, const cq_tensor *xq,
                        const cq_tensor *xkv, const cq_tensor *qc, const cq_tensor *qs, const cq_tensor *kc,
                        const cq_tensor *ks, bool perturbed, cq_tensor *heads) {
    cq_backend *be = m->be;
    if (!xkv) xkv = xq;
    const int64_t nq = cq_tensor_rows(xq), nk = cq_tensor_rows(xkv), I = A->inner;
    cq_tensor q = v2(&f->q, nq, I), k = v2(&f->k, nk, I), v = v2(&f->v, nk, I), att = v2(&f->att, nq, I);
    cq_tensor *o = &att;
    CQ_TRY(cq_op_linear(be, &v, xkv, &A->v, &A->vb));
    if (perturbed) {
        o = &v; /* self-attention only: the value rows are the query rows */
    } else {
        CQ_TRY(cq_op_linear(be, &q, xq, &A->q, &A->qb));
        CQ_TRY(cq_op_linear(be, &k, xkv, &A->k, &A->kb));
        CQ_TRY(cq_op_rmsnorm(be, &q, &q, &A->nq, NULL, false, LX_QK_EPS));
        CQ_TRY(cq_op_rmsnorm(be, &k, &k, &A->nk, NULL, false, LX_QK_EPS));
        if (qc) CQ_TRY(rope(be, &q, A->heads, A->dh, qc, qs));
        if (kc) CQ_TRY(rope(be, &k, A->heads, A->dh, kc, ks));
        cq_attn_args at = {.o = &att, .q = &q, .k = &k, .v = &v, .n_heads = A->heads, .n_kv_heads = A->heads,
                           .head_dim = A->dh};
        CQ_TRY(cq_op_attention(be, &at));
    }
    if (A->gated) {
        /* gates = 2 sigmoid(logits) per head, spread over the head's columns by a column gather */
        cq_tensor gl = v2(&f->gl, nq, A->heads), ge = v2(&f->ge, nq, I);
        CQ_TRY(cq_op_linear(be, &gl, xq, &A->gw, &A->gb));
        CQ_TRY(cq_op_unary(be, &gl, &gl, CQ_UNARY_SIGMOID, 0.0f, 0.0f));
        CQ_TRY(cq_op_unary(be, &gl, &gl, CQ_UNARY_SCALE, 2.0f, 0.0f));
        CQ_TRY(cq_op_gather_cols(be, &ge, &gl, gidx, 1, 1.0f));
        CQ_TRY(cq_op_binary(be, o, o, &ge, CQ_BINARY_MUL));
    }
    *heads = *o;
    return CQ_OK;
}

/* x += gate ⊙ (in W + b) per run (which < 0: no gate). While a tap is set the projection lands in the scratch
 * first, tapped as `name`; otherwise the matmul adds it to x in its epilogue. */
static cq_status proj_res(cq_ltx2 *m, lx_fwd *f, const lx_srun *r, int64_t D, cq_tensor *x, const cq_tensor *in,
                          const cq_tensor *w, const cq_tensor *b, int which, const char *name) {
    if (m->tap) {
        cq_tensor out = v2(&f->proj, cq_tensor_rows(in), D);
        CQ_TRY(cq_op_linear(m->be, &out, in, w, b));
        tapf(m, &out, "%s", name);
        return gated_res(m, r, D, x, &out, which);
    }
    const int G = which < 0 ? 1 : r->G;
    for (int g = 0; g < G; g++) {
        const int64_t r0 = which < 0 ? 0 : r->grp[g].r0, n = which < 0 ? cq_tensor_rows(in) : r->grp[g].n;
        cq_tensor xv = cq_tensor_rows_view(x, r0, n), iv = cq_tensor_rows_view(in, r0, n);
        cq_tensor gate = which < 0 ? (cq_tensor){0} : mvec(r, D, g, which);
        cq_matmul_args a = {.y = &xv, .x = &iv, .w = w, .bias = b, .gate = which < 0 ? NULL : &gate,
                            .accumulate = true};
        CQ_TRY(cq_op_matmul(m->be, &a));
    }
    return CQ_OK;
}

/* The RoPE tables of both streams: self (video 3 axes, audio 1) and the time-only A<->V ones. */
static cq_status ropes(cq_ltx2 *m, lx_fwd *f) {
    const cq_ltx2_config *c = &m->cfg;
    const int64_t nv = f->r[ST_VIDEO].n, na = f->r[ST_AUDIO].n, wmax = c->dim > c->audio_dim ? c->dim : c->audio_dim;
    float *pv = cq_mallocn((size_t)nv * 4 + (size_t)na, sizeof(float));
    float *tab = cq_mallocn((size_t)(nv > na ? nv : na) * (size_t)wmax, sizeof(float));
    cq_status s = pv && tab ? CQ_OK : CQ_ERR_NOMEM;
    float *pt = pv ? pv + nv * 3 : NULL, *pa = pv ? pt + nv : NULL;
    if (s == CQ_OK)
        s = cq_ltx2_video_positions(f->frames, f->height, f->width, c->vae_scale, c->causal_offset, f->fps, pv);
    if (s == CQ_OK)
        s = cq_ltx2_audio_positions((int)na, 0, c->audio_scale, c->causal_offset, c->audio_hop, c->audio_rate, pa);
    for (int64_t t = 0; s == CQ_OK && t < nv; t++) pt[t] = pv[t * 3]; /* the A<->V tables read the time alone */
    const struct {
        cq_ltx2_rope r;
        const float *pos;
        int64_t n;
        cq_tensor *c, *s;
        const char *name;
    } jobs[4] = {
        {{c->dim, 3, {c->max_pos[0], c->max_pos[1], c->max_pos[2]}, c->rope_theta, c->rope_f64}, pv, nv,
         &f->r[ST_VIDEO].rc, &f->r[ST_VIDEO].rs, "video"},
        {{c->audio_dim, 1, {c->audio_max_pos}, c->rope_theta, c->rope_f64}, pa, na, &f->r[ST_AUDIO].rc,
         &f->r[ST_AUDIO].rs, "audio"},
        {{c->audio_dim, 1, {c->cross_max_pos}, c->rope_theta, c->rope_f64}, pt, nv, &f->r[ST_VIDEO].xc,
         &f->r[ST_VIDEO].xs, "xvideo"},
        {{c->audio_dim, 1, {c->cross_max_pos}, c->rope_theta, c->rope_f64}, pa, na, &f->r[ST_AUDIO].xc,
         &f->r[ST_AUDIO].xs, "xaudio"},
    };
    for (int j = 0; s == CQ_OK && j < 4; j++) {
        const size_t cells = (size_t)jobs[j].n * (size_t)(jobs[j].r.dim / 2);
        float *cs = tab, *sn = tab + cells;
        s = cq_ltx2_rope_tables(&jobs[j].r, jobs[j].pos, jobs[j].n, cs, sn);
        if (s == CQ_OK) s = cq_tensor_upload(jobs[j].c, cs, cells * sizeof(float));
        if (s == CQ_OK) s = cq_tensor_upload(jobs[j].s, sn, cells * sizeof(float));
        if (s == CQ_OK) {
            tapf(m, jobs[j].c, "rope_%s_cos", jobs[j].name);
            tapf(m, jobs[j].s, "rope_%s_sin", jobs[j].name);
        }
    }
    cq_free(pv);
    cq_free(tab);
    return s;
}

static void free_runs(lx_fwd *f) {
    for (int si = 0; si < ST_COUNT; si++) {
        lx_srun *r = &f->r[si];
        cq_tensor *t[] = {&r->mods, &r->outm, &r->t_mod, &r->t_emb, &r->ss_mod, &r->ss_emb, &r->g_mod, &r->g_emb,
                          &r->p_mod, &r->p_emb};
        for (size_t i = 0; i < CQ_ARRAY_LEN(t); i++) cq_tensor_free(t[i]);
    }
    cq_tensor_free(&f->feat);
    cq_tensor_free(&f->hid);
    cq_tensor_free(&f->embs);
    cq_free(f->hfeat);
    f->hfeat = NULL;
    f->gcap = 0;
}

void cq_ltx2_cond_free(cq_ltx2_cond *f) {
    if (!f) return;
    cq_dit_stepper_free(&f->stepper);
    free_runs(f);
    for (int si = 0; si < ST_COUNT; si++) {
        lx_srun *r = &f->r[si];
        cq_tensor *t[] = {&r->lat, &r->x, &r->hn, &r->nrm, &r->mc, &r->ctx, &r->ctxm, &r->y,
                          &r->rc, &r->rs, &r->xc, &r->xs};
        for (size_t i = 0; i < CQ_ARRAY_LEN(t); i++) cq_tensor_free(t[i]);
    }
    cq_tensor *t[] = {&f->q, &f->k, &f->v, &f->att, &f->gl, &f->ge, &f->proj, &f->ffh};
    for (size_t i = 0; i < CQ_ARRAY_LEN(t); i++) cq_tensor_free(t[i]);
    cq_free(f->stg);
    cq_free(f->sig_stg);
    cq_free(f);
}

static int64_t max2(int64_t a, int64_t b) { return a > b ? a : b; }

/* The buffers of the token rows and prompt rows (prepare). */
static cq_status alloc_tokens(cq_ltx2 *m, lx_fwd *f) {
    cq_backend *be = m->be;
    const cq_dtype F = CQ_DTYPE_F32;
    int64_t rq = 0, rk = 0, w = 0, h = 0;
    for (int si = 0; si < ST_COUNT; si++) {
        const lx_stream *S = &m->s[si];
        lx_srun *r = &f->r[si];
        const int64_t D = S->dim, n = r->n, xd = m->cfg.audio_dim;
#define A(t, rows, cols) CQ_TRY(cq_tensor_alloc_2d(be, F, rows, cols, &r->t))
        A(lat, n, S->cin);
        A(x, n, D);
        A(hn, n, D);
        A(nrm, n, D);
        A(mc, n, D);
        A(ctx, r->L, D);
        if (m->xattn) A(ctxm, r->L, D);
        A(y, n, S->cout);
        A(rc, n, D / 2);
        A(rs, n, D / 2);
        A(xc, n, xd / 2);
        A(xs, n, xd / 2);
#undef A
        rq = max2(rq, n);
        rk = max2(rk, max2(n, r->L));
        w = max2(w, D);
        h = max2(h, S->heads);
    }
    h = max2(h, m->cfg.audio_heads);
#define A(t, rows, cols) CQ_TRY(cq_tensor_alloc_2d(be, F, rows, cols, &f->t))
    A(q, rq, w);
    A(k, rk, w);
    A(v, rk, w);
    A(att, rq, w);
    A(gl, rq, h);
    A(ge, rq, w);
    A(proj, rq, w);
    A(ffh, rq, 4 * w);
#undef A
    return CQ_OK;
}

/* The buffers sized by the runs of timesteps, for up to gcap runs per stream (a step, when they grow). */
static cq_status alloc_runs(cq_ltx2 *m, lx_fwd *f, int gcap) {
    cq_backend *be = m->be;
    const cq_dtype F = CQ_DTYPE_F32;
    free_runs(f);
    int64_t w = 0;
    for (int si = 0; si < ST_COUNT; si++) {
        const lx_stream *S = &m->s[si];
        lx_srun *r = &f->r[si];
        const int64_t D = S->dim, G = gcap;
#define A(t, rows, cols) CQ_TRY(cq_tensor_alloc_2d(be, F, rows, cols, &r->t))
        A(mods, G * M_COUNT, D);
        A(outm, G * 2, D);
        A(t_mod, G, S->k * D);
        A(t_emb, G, D);
        A(ss_mod, G, 4 * D);
        A(ss_emb, G, D);
        A(g_mod, G, D);
        A(g_emb, G, D);
        if (m->cfg.prompt_adaln) {
            A(p_mod, G, 2 * D);
            A(p_emb, G, D);
        }
#undef A
        w = max2(w, D);
    }
    const int64_t slots = (int64_t)ST_COUNT * LX_TABLES * gcap;
    CQ_TRY(cq_tensor_alloc_2d(be, F, slots, CQ_LTX2_TIMESTEP_CHANNELS, &f->feat));
    CQ_TRY(cq_tensor_alloc_2d(be, F, gcap, w, &f->hid));
    CQ_TRY(cq_tensor_alloc_2d(be, F, gcap, w, &f->embs));
    if (!(f->hfeat = cq_calloc((size_t)slots * CQ_LTX2_TIMESTEP_CHANNELS, sizeof(float)))) return CQ_ERR_NOMEM;
    f->gcap = gcap;
    return CQ_OK;
}

/* The grid and the prompts must be what the reference takes: sizes in range, finite rows. */
static cq_status check_grid(const cq_ltx2 *m, const cq_ltx2_inputs *in) {
    const cq_ltx2_config *c = &m->cfg;
    if (!in) return cq_fail(CQ_ERR_INVALID_ARG, "ltx2: prepare needs inputs");
    if (!in->ctx || !in->audio_ctx) return cq_fail(CQ_ERR_INVALID_ARG, "ltx2: prepare needs both prompts");
    if (in->frames < 1 || in->height < 1 || in->width < 1 || in->frames > CQ_LTX2_MAX_SIDE ||
        in->height > CQ_LTX2_MAX_SIDE || in->width > CQ_LTX2_MAX_SIDE ||
        (int64_t)in->frames * in->height * in->width > LX_MAX_TOKENS)
        return cq_fail(CQ_ERR_SHAPE, "ltx2: a %d x %d x %d latent grid (each side at least 1, at most %d tokens)",
                       in->frames, in->height, in->width, LX_MAX_TOKENS);
    if (in->audio_frames < 1 || in->audio_frames > LX_MAX_TOKENS)
        return cq_fail(CQ_ERR_SHAPE, "ltx2: %d audio frames (1 .. %d)", in->audio_frames, LX_MAX_TOKENS);
    if (in->n_ctx < 1 || in->n_ctx > LX_MAX_CTX || in->n_audio_ctx < 1 || in->n_audio_ctx > LX_MAX_CTX)
        return cq_fail(CQ_ERR_SHAPE, "ltx2: prompts of %d video and %d audio rows (1 .. %d each)", in->n_ctx,
                       in->n_audio_ctx, LX_MAX_CTX);
    if (!(in->fps > 0.0) || !isfinite(in->fps)) return cq_fail(CQ_ERR_INVALID_ARG, "ltx2: fps %g", in->fps);
    CQ_TRY(cq_dit_check_finite("ltx2", "video prompt", in->ctx, (size_t)in->n_ctx, (size_t)c->dim));
    return cq_dit_check_finite("ltx2", "audio prompt", in->audio_ctx, (size_t)in->n_audio_ctx, (size_t)c->audio_dim);
}

/* A step's inputs: the prepared grid, counts that match, finite values, STG blocks of the model. */
static cq_status check_step(const lx_fwd *f, const cq_ltx2_inputs *in, const float *vo, const float *ao) {
    const cq_ltx2_config *c = &f->m->cfg;
    if (!in || !vo || !ao) return cq_fail(CQ_ERR_INVALID_ARG, "ltx2: a step needs inputs and two outputs");
    if (!in->video || !in->audio || !in->timestep || !in->audio_timestep)
        return cq_fail(CQ_ERR_INVALID_ARG, "ltx2: a step needs the video and audio tokens and both timesteps");
    if (in->frames != f->frames || in->height != f->height || in->width != f->width ||
        in->audio_frames != f->audio_frames)
        return cq_fail(CQ_ERR_SHAPE, "ltx2: a step on a %d x %d x %d grid with %d audio frames; the state was "
                       "prepared for %d x %d x %d with %d", in->frames, in->height, in->width, in->audio_frames,
                       f->frames, f->height, f->width, f->audio_frames);
    const int64_t nv = f->r[ST_VIDEO].n;
    if (in->n_timestep != 1 && in->n_timestep != nv)
        return cq_fail(CQ_ERR_SHAPE, "ltx2: %d video timesteps for %lld tokens (1 or one per token)", in->n_timestep,
                       (long long)nv);
    if (in->n_audio_timestep != 1 && in->n_audio_timestep != in->audio_frames)
        return cq_fail(CQ_ERR_SHAPE, "ltx2: %d audio timesteps for %d tokens (1 or one per token)",
                       in->n_audio_timestep, in->audio_frames);
    if (in->n_stg_blocks < 0 || (in->n_stg_blocks > 0 && !in->stg_blocks))
        return cq_fail(CQ_ERR_INVALID_ARG, "ltx2: %d STG blocks without a list", in->n_stg_blocks);
    for (int i = 0; i < in->n_stg_blocks; i++)
        if (in->stg_blocks[i] < 0 || in->stg_blocks[i] >= c->n_layers)
            return cq_fail(CQ_ERR_INVALID_ARG, "ltx2: STG block %d of a %d-block model", in->stg_blocks[i],
                           c->n_layers);
    if (!isfinite(in->sigma) || !isfinite(in->audio_sigma))
        return cq_fail(CQ_ERR_NUMERIC, "ltx2: sigma %g / audio sigma %g", (double)in->sigma, (double)in->audio_sigma);
    CQ_TRY(cq_dit_check_finite("ltx2", "video timesteps", in->timestep, 1, (size_t)in->n_timestep));
    CQ_TRY(cq_dit_check_finite("ltx2", "audio timesteps", in->audio_timestep, 1, (size_t)in->n_audio_timestep));
    CQ_TRY(cq_dit_check_finite("ltx2", "video tokens", in->video, (size_t)nv, (size_t)c->in_channels));
    return cq_dit_check_finite("ltx2", "audio tokens", in->audio, (size_t)in->audio_frames,
                               (size_t)c->audio_in_channels);
}

/* Block l on both streams. */
static cq_status block(cq_ltx2 *m, lx_fwd *f, int l) {
    cq_backend *be = m->be;
    const bool pert = f->stg[l];
    const float eps = m->cfg.norm_eps;
    cq_tensor heads;
    char tn[64];
    for (int si = 0; si < ST_COUNT; si++) {
        const lx_stream *S = &m->s[si];
        lx_srun *r = &f->r[si];
        CQ_TRY(block_mods(m, r, S, &S->blk[l]));
        if (m->xattn) { /* the prompt rows modulated by this step's table (one per sample: the first run's) */
            cq_tensor a = mvec(r, S->dim, 0, M_1SC_KV), b = mvec(r, S->dim, 0, M_SH_KV);
            CQ_TRY(cq_op_binary(be, &r->ctxm, &r->ctx, &a, CQ_BINARY_MUL));
            CQ_TRY(cq_op_binary(be, &r->ctxm, &r->ctxm, &b, CQ_BINARY_ADD));
        }
    }
    /* 1. self-attention */
    for (int si = 0; si < ST_COUNT; si++) {
        const lx_stream *S = &m->s[si];
        const lx_sblock *B = &S->blk[l];
        lx_srun *r = &f->r[si];
        CQ_TRY(cq_op_rmsnorm(be, &r->hn, &r->x, NULL, NULL, false, eps));
        CQ_TRY(modulate(m, r, S->dim, &r->hn, &r->hn, M_1SC_SA, M_SH_SA));
        tapf(m, &r->hn, "b%d_%sattn1_q", l, S->tp);
        CQ_TRY(attend(m, f, &B->self, &S->gidx, &r->hn, NULL, &r->rc, &r->rs, &r->rc, &r->rs, pert, &heads));
        snprintf(tn, sizeof tn, "b%d_%sattn1_out", l, S->tp);
        CQ_TRY(proj_res(m, f, r, S->dim, &r->x, &heads, &B->self.o, &B->self.ob, M_G_SA, tn));
    }
    /* 2. prompt cross-attention (no RoPE) */
    for (int si = 0; si < ST_COUNT; si++) {
        const lx_stream *S = &m->s[si];
        const lx_sblock *B = &S->blk[l];
        lx_srun *r = &f->r[si];
        const cq_tensor *ctx = m->xattn ? &r->ctxm : &r->ctx;
        CQ_TRY(cq_op_rmsnorm(be, &r->hn, &r->x, NULL, NULL, false, eps));
        if (S->xmod) CQ_TRY(modulate(m, r, S->dim, &r->hn, &r->hn, M_1SC_Q, M_SH_Q));
        tapf(m, &r->hn, "b%d_%sattn2_q", l, S->tp);
        tapf(m, ctx, "b%d_%sattn2_kv", l, S->tp);
        CQ_TRY(attend(m, f, &B->text, &S->gidx, &r->hn, ctx, NULL, NULL, NULL, NULL, false, &heads));
        snprintf(tn, sizeof tn, "b%d_%sattn2_out", l, S->tp);
        CQ_TRY(proj_res(m, f, r, S->dim, &r->x, &heads, &B->text.o, &B->text.ob, S->xmod ? M_G_Q : -1, tn));
    }
    /* 3. audio <-> video, both directions reading the norms of the streams as they are now */
    if (!f->isolate) {
        lx_srun *rv = &f->r[ST_VIDEO], *ra = &f->r[ST_AUDIO];
        const lx_stream *Sv = &m->s[ST_VIDEO], *Sa = &m->s[ST_AUDIO];
        CQ_TRY(cq_op_rmsnorm(be, &rv->nrm, &rv->x, NULL, NULL, false, eps));
        CQ_TRY(cq_op_rmsnorm(be, &ra->nrm, &ra->x, NULL, NULL, false, eps));
        /* a2v: video queries, audio keys and values */
        CQ_TRY(modulate(m, rv, Sv->dim, &rv->mc, &rv->nrm, M_1A2V, M_A2V_SH));
        CQ_TRY(modulate(m, ra, Sa->dim, &ra->mc, &ra->nrm, M_1A2V, M_A2V_SH));
        tapf(m, &rv->mc, "b%d_a2v_q", l);
        tapf(m, &ra->mc, "b%d_a2v_kv", l);
        CQ_TRY(attend(m, f, &Sv->blk[l].cross, &Sa->gidx, &rv->mc, &ra->mc, &rv->xc, &rv->xs, &ra->xc, &ra->xs, false,
                      &heads));
        snprintf(tn, sizeof tn, "b%d_a2v_out", l);
        CQ_TRY(proj_res(m, f, rv, Sv->dim, &rv->x, &heads, &Sv->blk[l].cross.o, &Sv->blk[l].cross.ob, M_G_CA, tn));
        /* v2a: audio queries, video keys and values */
        CQ_TRY(modulate(m, ra, Sa->dim, &ra->mc, &ra->nrm, M_1V2A, M_V2A_SH));
        CQ_TRY(modulate(m, rv, Sv->dim, &rv->mc, &rv->nrm, M_1V2A, M_V2A_SH));
        tapf(m, &ra->mc, "b%d_v2a_q", l);
        tapf(m, &rv->mc, "b%d_v2a_kv", l);
        CQ_TRY(attend(m, f, &Sa->blk[l].cross, &Sa->gidx, &ra->mc, &rv->mc, &ra->xc, &ra->xs, &rv->xc, &rv->xs, false,
                      &heads));
        snprintf(tn, sizeof tn, "b%d_v2a_out", l);
        CQ_TRY(proj_res(m, f, ra, Sa->dim, &ra->x, &heads, &Sa->blk[l].cross.o, &Sa->blk[l].cross.ob, M_G_CA, tn));
    }
    /* 4. feed-forward */
    for (int si = 0; si < ST_COUNT; si++) {
        const lx_stream *S = &m->s[si];
        const lx_sblock *B = &S->blk[l];
        lx_srun *r = &f->r[si];
        CQ_TRY(cq_op_rmsnorm(be, &r->hn, &r->x, NULL, NULL, false, eps));
        CQ_TRY(modulate(m, r, S->dim, &r->hn, &r->hn, M_1SC_FF, M_SH_FF));
        tapf(m, &r->hn, "b%d_%sff_in", l, S->tp);
        cq_tensor h = v2(&f->ffh, r->n, 4 * S->dim);
        cq_matmul_args mm = {.y = &h, .x = &r->hn, .w = &B->ff1, .bias = S->ffb ? &B->ff1b : NULL,
                             .act = CQ_ACT_GELU_TANH};
        CQ_TRY(cq_op_matmul(be, &mm));
        snprintf(tn, sizeof tn, "b%d_%sff_out", l, S->tp);
        CQ_TRY(proj_res(m, f, r, S->dim, &r->x, &h, &B->ff2, S->ffb ? &B->ff2b : NULL, M_G_FF, tn));
        tapf(m, &r->x, "block%d_%s", l, S->name);
    }
    return CQ_OK;
}

/* LayerNorm * (1 + row 1 + E) + (row 0 + E) per run, then proj_out. */
static cq_status head(cq_ltx2 *m, lx_srun *r, const lx_stream *S) {
    cq_backend *be = m->be;
    const int64_t D = S->dim;
    for (int g = 0; g < r->G; g++) {
        cq_tensor om = sub2(&r->outm, (int64_t)g * 2, 2, D), e = sub2(&r->t_emb, g, 1, D);
        CQ_TRY(cq_op_binary(be, &om, &S->sst_out, &e, CQ_BINARY_ADD));
        cq_tensor sh = sub2(&r->outm, (int64_t)g * 2, 1, D), sc = sub2(&r->outm, (int64_t)g * 2 + 1, 1, D);
        cq_tensor xv = cq_tensor_rows_view(&r->x, r->grp[g].r0, r->grp[g].n);
        cq_tensor hv = cq_tensor_rows_view(&r->hn, r->grp[g].r0, r->grp[g].n);
        CQ_TRY(cq_op_layernorm(be, &hv, &xv, &sc, &sh, LX_OUT_EPS));
    }
    return cq_op_linear(be, &r->y, &r->hn, &S->pout, &S->poutb);
}

/* Every device op of a step (the inputs and the features already uploaded): run directly or recorded. */
static cq_status step_ops(lx_fwd *f) {
    cq_ltx2 *m = f->m;
    for (int si = 0; si < ST_COUNT; si++) {
        const lx_stream *S = &m->s[si];
        lx_srun *r = &f->r[si];
        CQ_TRY(cq_op_linear(m->be, &r->x, &r->lat, &S->pin, &S->pinb));
        tapf(m, &r->x, "%sproj_in", S->tp);
    }
    CQ_TRY(table_ops(m, f));
    for (int l = 0; l < m->cfg.n_layers; l++) CQ_TRY(block(m, f, l));
    for (int si = 0; si < ST_COUNT; si++) {
        lx_srun *r = &f->r[si];
        CQ_TRY(head(m, r, &m->s[si]));
        tapf(m, &r->y, si == ST_VIDEO ? "sample" : "audio_sample");
    }
    return CQ_OK;
}

static cq_status step_ops_cb(void *user) { return step_ops(user); }

cq_status cq_ltx2_prepare(cq_ltx2 *m, const cq_ltx2_inputs *in, cq_ltx2_cond **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "ltx2: prepare needs somewhere to put the state");
    *out = NULL;
    if (!m) return cq_fail(CQ_ERR_INVALID_ARG, "ltx2: prepare needs a model");
    CQ_TRY(check_grid(m, in));
    lx_fwd *f = cq_calloc(1, sizeof *f);
    if (!f) return CQ_ERR_NOMEM;
    f->m = m;
    f->frames = in->frames;
    f->height = in->height;
    f->width = in->width;
    f->fps = in->fps;
    f->audio_frames = in->audio_frames;
    f->r[ST_VIDEO].n = (int64_t)in->frames * in->height * in->width;
    f->r[ST_AUDIO].n = in->audio_frames;
    f->r[ST_VIDEO].L = in->n_ctx;
    f->r[ST_AUDIO].L = in->n_audio_ctx;
    const size_t nl = (size_t)m->cfg.n_layers;
    cq_status s = (f->stg = cq_calloc(nl, sizeof(bool))) && (f->sig_stg = cq_calloc(nl, sizeof(bool))) ? CQ_OK
                                                                                                    : CQ_ERR_NOMEM;
    if (s == CQ_OK) s = alloc_tokens(m, f);
    const float *ctx[ST_COUNT] = {in->ctx, in->audio_ctx};
    for (int si = 0; s == CQ_OK && si < ST_COUNT; si++)
        s = cq_tensor_upload(&f->r[si].ctx, ctx[si], (size_t)(f->r[si].L * m->s[si].dim) * sizeof(float));
    if (s == CQ_OK) s = ropes(m, f);
    if (s == CQ_OK) s = cq_backend_sync(m->be);
    if (s != CQ_OK) {
        cq_ltx2_cond_free(f);
        return s;
    }
    *out = f;
    return CQ_OK;
}

/* Whether this step's op layout (runs, flags) is the last step's; records it for the next. */
static bool same_layout(lx_fwd *f) {
    const int nl = f->m->cfg.n_layers;
    bool same = f->sig_valid && f->sig_isolate == f->isolate && memcmp(f->sig_stg, f->stg, (size_t)nl) == 0;
    for (int si = 0; si < ST_COUNT; si++) {
        const lx_srun *r = &f->r[si];
        same = same && f->sig_G[si] == r->G;
        for (int g = 0; g < r->G; g++) {
            same = same && f->sig_grp[si][g].r0 == r->grp[g].r0 && f->sig_grp[si][g].n == r->grp[g].n;
            f->sig_grp[si][g] = r->grp[g];
        }
        f->sig_G[si] = r->G;
    }
    f->sig_isolate = f->isolate;
    memcpy(f->sig_stg, f->stg, (size_t)nl);
    f->sig_valid = true;
    return same;
}

cq_status cq_ltx2_step(cq_ltx2_cond *f, const cq_ltx2_inputs *in, float *video_out, float *audio_out) {
    if (!f) return cq_fail(CQ_ERR_INVALID_ARG, "ltx2: a step needs a prepared state");
    CQ_TRY(check_step(f, in, video_out, audio_out));
    cq_ltx2 *m = f->m;
    lx_srun *rv = &f->r[ST_VIDEO], *ra = &f->r[ST_AUDIO];
    CQ_TRY(make_runs("video", in->timestep, in->n_timestep, rv->n, rv));
    CQ_TRY(make_runs("audio", in->audio_timestep, in->n_audio_timestep, ra->n, ra));
    const int need = rv->G > ra->G ? rv->G : ra->G;
    if (need > f->gcap) {
        cq_dit_stepper_free(&f->stepper); /* a recording refers to the buffers replaced here */
        cq_status s = alloc_runs(m, f, need);
        if (s != CQ_OK) {
            free_runs(f);
            return s;
        }
    }
    f->isolate = in->isolate_modalities;
    memset(f->stg, 0, (size_t)m->cfg.n_layers);
    if (m->cfg.perturbed_attn) /* the reference's processors ignore STG without it */
        for (int i = 0; i < in->n_stg_blocks; i++) f->stg[in->stg_blocks[i]] = true;
    if (!same_layout(f)) cq_dit_stepper_free(&f->stepper); /* another op sequence: record it anew */
    CQ_TRY(table_features(m, f, in));
    const float *lat[ST_COUNT] = {in->video, in->audio};
    for (int si = 0; si < ST_COUNT; si++)
        CQ_TRY(cq_tensor_upload(&f->r[si].lat, lat[si], (size_t)(f->r[si].n * m->s[si].cin) * sizeof(float)));
    if (m->tap) CQ_TRY(step_ops(f)); /* taps download between ops: never recorded */
    else CQ_TRY(cq_dit_stepper_run(&f->stepper, m->be, step_ops_cb, f, "ltx2"));
    float *outs[ST_COUNT] = {video_out, audio_out};
    for (int si = 0; si < ST_COUNT; si++)
        CQ_TRY(cq_tensor_download(&f->r[si].y, outs[si], (size_t)(f->r[si].n * m->s[si].cout) * sizeof(float)));
    return cq_backend_sync(m->be);
}

cq_status cq_ltx2_forward(cq_ltx2 *m, const cq_ltx2_inputs *in, float *video_out, float *audio_out) {
    if (!m || !in || !video_out || !audio_out)
        return cq_fail(CQ_ERR_INVALID_ARG, "ltx2: forward needs a model, inputs and two outputs");
    cq_ltx2_cond *c = NULL;
    CQ_TRY(cq_ltx2_prepare(m, in, &c));
    cq_status s = cq_ltx2_step(c, in, video_out, audio_out);
    cq_ltx2_cond_free(c);
    return s;
}
