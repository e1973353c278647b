/*
 * bench_pack.h — what the model benchmarks (`cortiq bench qi21`, `cortiq
 * bench imagine`) share:
 *  - packs of random weights generated directly in a codec's layout (no
 *    encoder runs over billions of floats), with scales chosen so every
 *    linear map and convolution keeps unit variance and activations stay
 *    finite through any depth;
 *  - writing such a pack to a temporary .cmf under $TMPDIR, mapping it and
 *    removing it at once, so nothing outlives the run (the file is also
 *    removed when writing fails or the process is interrupted);
 *  - the released models' weight lists, generated from their tensor tables
 *    (models/tables.h) at the released shapes;
 *  - the process measurements the reports print (CPU time, memory).
 */
#ifndef CQ_CLI_BENCH_PACK_H
#define CQ_CLI_BENCH_PACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "cortiq.h"
#include "ops/ops.h"

/* One tensor to generate. Matrices and kernels (q8_2f, q4tp: 2-D; f16: any
 * rank) get weights of standard deviation 1/sqrt(fan_in), fan_in being the
 * product of all dimensions but the first; f32 tensors are per-channel
 * vectors whose entries scatter by +-0.05 around `base`, unless `dense`: then
 * they are kernels stored in f32 (what `cortiq convert` keeps for components
 * outside the VAE, such as LTX-2.5's audio VAE and vocoder), filled as above. */
typedef struct cq_bench_weight {
    char name[160];
    cq_dtype dtype;
    int ndim;
    uint64_t shape[4];
    float base;
    bool dense;
} cq_bench_weight;

typedef struct cq_bench_pack {
    cq_bench_weight *w;
    size_t n, cap;
} cq_bench_pack;

/* Append a tensor; the name is printf-formatted. */
cq_status cq_bench_pack_add(cq_bench_pack *p, cq_dtype dt, int ndim, const uint64_t *shape, float base,
                            const char *fmt, ...) CQ_PRINTF(6, 7);
void cq_bench_pack_free(cq_bench_pack *p);
/* Payload bytes of the listed tensors (what the data section will hold). */
uint64_t cq_bench_pack_bytes(const cq_bench_pack *p);

/* Every entry of a tensor table (models/kit/tensors.h): matrices in `quant`, vectors f32 around the table's
 * base, kernels f16, as `cortiq convert` stores them. */
struct cq_tt_list;
cq_status cq_bench_pack_table(cq_bench_pack *p, const struct cq_tt_list *t, cq_dtype quant);

/* ---- the released Qwen-Image-2.1 denoiser ------------------------------------------- */
#define CQ_BENCH_DIT_LAYERS 32
#define CQ_BENCH_DIT_HEADS 32
#define CQ_BENCH_DIT_HEAD_DIM 128
#define CQ_BENCH_DIT_CTX 4096  /* context_in_dim: the text tower's width */
#define CQ_BENCH_DIT_RATIO 3   /* mlp_ratio */
#define CQ_BENCH_DIT_CH 64     /* in/out channels (the VAE's z_dim) */
#define CQ_BENCH_DIT_TPROJ 256 /* timestep projection width */

/* Its weights under "dit." (the first `layers` of the 32 blocks), matrices in `quant`. */
cq_status cq_bench_dit_weights(cq_bench_pack *p, cq_dtype quant, int layers);
/* Its config JSON (dit.config_json) with `layers` blocks; the length, or -1 when buf is too small. */
int cq_bench_dit_config(char *buf, size_t len, int layers);

/* ---- the released Z-Image denoiser (ZImageTransformer2DModel, Turbo and base alike) --------- */
#define CQ_BENCH_ZI_HEADS 30   /* x 128 = dim 3840 */
#define CQ_BENCH_ZI_LAYERS 30
#define CQ_BENCH_ZI_REFINERS 2
#define CQ_BENCH_ZI_CAP 2560   /* cap_feat_dim: Qwen3-4B's width */
struct cq_zimage_config;
/* The released config with `heads` of the 30 heads (dim 128 heads) and `layers` of the 30 main layers. */
void cq_bench_zimage_config(struct cq_zimage_config *c, int heads, int layers);
/* Its weights under "dit." (matrices in `quant`) and its config JSON (dit.config_json; the length, or -1 when
 * buf is too small). */
cq_status cq_bench_zimage_weights(cq_bench_pack *p, cq_dtype quant, const struct cq_zimage_config *c);
int cq_bench_zimage_config_json(char *buf, size_t len, const struct cq_zimage_config *c);

/* ---- the released Qwen-Image denoiser (QwenImageTransformer2DModel) ----------------------- */
#define CQ_BENCH_QIMAGE_LAYERS 60
#define CQ_BENCH_QIMAGE_HEADS 24  /* x 128 = inner 3072, MLP 4 x 3072 */
#define CQ_BENCH_QIMAGE_CTX 3584  /* joint_attention_dim: Qwen2.5-VL-7B's width */
#define CQ_BENCH_QIMAGE_Z 16      /* the VAE's z_dim; the denoiser reads its 2x2 patches (64 floats per token) */

/* Its weights under "dit." (the first `layers` of the 60 blocks), matrices in `quant`, and its config JSON
 * (dit.config_json; the length, or -1 when buf is too small). */
cq_status cq_bench_qimage_dit_weights(cq_bench_pack *p, cq_dtype quant, int layers);
int cq_bench_qimage_dit_config(char *buf, size_t len, int layers);
/* The same for `heads` of the 24 heads (inner 128 heads, MLP 4 x inner; the text rows stay 3584 wide). */
struct cq_qimage_config;
void cq_bench_qimage_config(struct cq_qimage_config *c, int heads, int layers);
cq_status cq_bench_qimage_weights(cq_bench_pack *p, cq_dtype quant, const struct cq_qimage_config *c);
int cq_bench_qimage_config_json(char *buf, size_t len, const struct cq_qimage_config *c);

/* ---- the released Qwen2.5-VL-7B vision tower (Qwen-Image's text encoder's `visual`) ---------- */
#define CQ_BENCH_VISION_DEPTH 32
#define CQ_BENCH_VISION_HIDDEN 1280
#define CQ_BENCH_VISION_HEADS 16  /* x 80 */
#define CQ_BENCH_VISION_MLP 3420
struct cq_qwen25vl_vision_config;
/* The released config with the first `depth` of its 32 blocks (full attention in 7, 15, 23, 31 where built;
 * patch 14, merge 2, temporal patch 2, window 112 px, out 3584). */
void cq_bench_vision_config(struct cq_qwen25vl_vision_config *c, int depth);
/* Its weights under "te.model.visual." (matrices in `quant`, the patch kernel f16) and its config JSON
 * (te.config_json: the Qwen2.5-VL config's vision_config; the length, or -1 when buf is too small). */
cq_status cq_bench_vision_weights(cq_bench_pack *p, cq_dtype quant, const struct cq_qwen25vl_vision_config *c);
/* The vision_config object alone (what a Qwen2.5-VL config.json holds under "vision_config"). */
int cq_bench_vision_config_object(char *buf, size_t len, const struct cq_qwen25vl_vision_config *c);
int cq_bench_vision_config_json(char *buf, size_t len, const struct cq_qwen25vl_vision_config *c);

/* ---- the released Qwen-Image-2.1 VAE (AutoencoderKLQwenImage21) ------------------------- */
#define CQ_BENCH_VAE_BASE 96      /* base_dim (encoder) */
#define CQ_BENCH_VAE_DEC_BASE 144 /* decoder_base_dim */
#define CQ_BENCH_VAE_Z 64         /* z_dim */
#define CQ_BENCH_VAE_LEVELS 5     /* dim_mult 1-2-4-8-8 */
#define CQ_BENCH_VAE_RES 2        /* num_res_blocks */
#define CQ_BENCH_VAE_IO 4         /* in/out channels (RGBA) */

/* Its weights under "vae." as `cortiq convert` stores them (f16 kernels, f32 biases and gammas; the temporal
 * convolutions too, which a single frame never runs, so the file has the real size). */
cq_status cq_bench_vae_weights(cq_bench_pack *p);
/* Its config JSON (vae.config_json), with random latent statistics; malloc'd by cJSON (cJSON_free), NULL when
 * out of memory. */
char *cq_bench_vae_config(void);

/* ---- LTX-2.5's audio-video denoiser (LTX2VideoTransformer3DModel) ----------------------- */
#define CQ_BENCH_LTX2_LAYERS 48
#define CQ_BENCH_LTX2_HEADS 32 /* video 32 x 128 = 4096, audio 32 x 64 = 2048 */
/* The released LTX-2.5 config.json (diffusers' converter, "2.5") with `layers` blocks; -1 when it does not fit. */
int cq_bench_ltx2_config_json(char *buf, size_t len, int layers);
struct cq_ltx2_config;
/* Its weights under "dit." from the model's tensor table, the matrices in `quant`. */
cq_status cq_bench_ltx2_weights(cq_bench_pack *p, cq_dtype quant, const struct cq_ltx2_config *c);

/* ---- the released Qwen-Image VAE (AutoencoderKLQwenImage) ------------------------------- */
/* base_dim 96, z_dim 16, dim_mult 1-2-4-4, 2 residual blocks, RGB: its weights under "vae." as `cortiq convert`
 * stores them (the causal kernels as their last temporal tap) and its config JSON, as above but with the
 * published latent statistics. */
cq_status cq_bench_qimage_vae_weights(cq_bench_pack *p);
char *cq_bench_qimage_vae_config(void);

/* ---- the Flux VAE (AutoencoderKL as Z-Image and Flux ship it) ----------------------------- */
#define CQ_BENCH_FLUX_VAE_LEVELS 4 /* block_out_channels 128-256-512-512 */
#define CQ_BENCH_FLUX_VAE_LAYERS 2 /* layers_per_block */
#define CQ_BENCH_FLUX_VAE_GROUPS 32
#define CQ_BENCH_FLUX_VAE_Z 16     /* latent_channels */

/* Its weights under "vae." as `cortiq convert` stores them (f16 kernels and matrices, f32 norms and biases). */
cq_status cq_bench_flux_vae_weights(cq_bench_pack *p);
/* Its config JSON (vae.config_json, the released one); malloc'd by cJSON (cJSON_free), NULL when out of memory. */
char *cq_bench_flux_vae_config(void);

/* ---- the temporary file ---------------------------------------------------------------- */
typedef struct cq_bench_blob {
    const char *name; /* stored as a u8 tensor (configs) */
    const void *data;
    size_t len;
} cq_bench_blob;

typedef struct cq_bench_file {
    const char *tag;         /* part of the file's name: $TMPDIR/cortiq-bench-<tag>-<pid>.cmf */
    const char *header;      /* the header JSON */
    const void *tokenizer;   /* tokenizer.json bytes, or NULL */
    size_t tokenizer_len;
    const cq_bench_blob *blobs;
    size_t n_blobs;
    const cq_bench_pack *weights;
    uint64_t seed;           /* of the weights' generator */
    bool no_verify;          /* open without the per-tensor hash check (--no-verify) */
    int threads;             /* hashing threads of the open (cq_cmf_open_opts.threads) */
    bool cold;               /* drop the file's pages from the page cache once written, so the load reads the disk */
} cq_bench_file;

/* Write the file (after checking the free space under $TMPDIR, default
 * /tmp), re-open it as a model is opened (mapped; each tensor's hash checked
 * when the model binds it, unless no_verify) and remove it: the mapping
 * keeps the data and nothing stays on disk. A progress bar on stderr follows
 * the writing. *file_bytes receives the size the file had. */
cq_status cq_bench_pack_map(const cq_bench_file *f, cq_cmf **out, uint64_t *file_bytes);

/* Uniform in [-0.5, 0.5) from the generator state *s (xorshift64*; *s != 0). */
float cq_bench_rng_unit(uint64_t *s);

/* ---- measurements ---------------------------------------------------------------------- */
double cq_bench_cpu_seconds(void);  /* user + system time of the process, all threads */
uint64_t cq_bench_peak_rss(void);   /* peak resident bytes (mapped file pages included) */
/* Restart the peak from the present (Linux 4.0+); false when the system cannot. */
bool cq_bench_reset_peak_rss(void);
uint64_t cq_bench_rss(void);        /* resident bytes now; 0 when the system does not say */
uint64_t cq_bench_ram(void);        /* physical memory of the machine; 0 when unknown */
/* The median of v[0..n) (n >= 1; v is sorted in place). */
double cq_bench_median(double *v, int n);

/* The device time per op class and per op over `runs` runs ("step", "decode"), from a backend that times its
 * ops (st->timed: CORTIQ_CUDA_PROFILE=1); nothing when it did not. */
void cq_bench_print_op_classes(const cq_backend_stats *st, int runs, const char *per);

/* ---- the options the model benchmarks share ------------------------------------------- */
typedef struct cq_bench_model_opts {
    int size;            /* --size: image side in pixels, 256, 512, 1024 or 2048 */
    bool any_size;       /* set by the caller: --size takes any side of 28 .. 4096 pixels (a picture to encode) */
    bool own_size;       /* set by the caller: --size is the benchmark's own option (its opt() parses it) */
    int threads;         /* --threads N (0: CORTIQ_THREADS or all cores) */
    const char *backend; /* --backend cpu, cuda or cuda:N */
    bool no_verify;      /* --no-verify: load without checking each tensor's hash */
    bool cold;           /* --cold: the pack's pages dropped from the page cache before the load */
} cq_bench_model_opts;
/* One of them at argv[*i], its value consumed (*i advanced): 1; not one of them: 0; a bad value: the usage
 * error printed, 2 (the exit code). CQ_BENCH_NO_VERIFY_HELP is the help text of --no-verify. */
#define CQ_BENCH_NO_VERIFY_HELP                                                                              \
    "  --no-verify   load without checking each tensor's hash (compare the load time with and without it to\n" \
    "                see what the check costs)\n"                                                               \
    "  --cold        drop the pack's pages from the page cache after writing it, so the load reads the disk\n" \
    "                (a cold start; needs TMPDIR on a disk: tmpfs such as /dev/shm keeps its pages)\n"
int cq_bench_model_opt(const char *cmd, int argc, char **argv, int *i, cq_bench_model_opts *o);
/* One of a benchmark's own options: argv[*i] is `a`, its value (or NULL) `v`; returns as cq_bench_model_opt does. */
typedef int (*cq_bench_arg_fn)(const char *cmd, const char *a, const char *v, int *i, void *ctx);
/* A model benchmark's whole command line: the shared options into *m, -h / --help (help() printed, *done
 * set), the rest through opt(..., ctx); an argument none of them knows is a usage error. Returns 0 or the
 * exit code. */
int cq_bench_model_args(const char *cmd, int argc, char **argv, cq_bench_model_opts *m, void (*help)(void),
                        cq_bench_arg_fn opt, void *ctx, bool *done);
/* The clip options of the video benchmarks: --frames (8k + 1, at most max_frames) into *frames and --fps (a number in
 * [1, 240]) into *fps; 1 with *i advanced past the value, 0 when `a` is neither, or the usage error printed and 2. */
int cq_bench_clip_arg(const char *cmd, const char *a, const char *v, int max_frames, int *i, int *frames, double *fps);
/* --quant's value v into *out: q8_2f or q4tp, and bf16 where with_bf16; 1 with *i advanced past it, or the
 * usage error printed and 2. */
int cq_bench_quant_arg(const char *cmd, const char *v, bool with_bf16, int *i, cq_dtype *out);

/* ---- the run the component benchmarks share (zimage, qwen_image, vision) ------------------- */
/* The fields of a pack header's "arch" object that the format requires. */
typedef struct cq_bench_arch {
    const char *name; /* arch_name */
    int hidden, intermediate, layers, heads, kv_heads, head_dim;
    const char *eps;  /* rms_norm_eps, as JSON ("1e-06") */
} cq_bench_arch;
/* One component's pack: its weights, one config blob (a JSON text), written to the temporary file and mapped
 * (cq_bench_pack_map) with the model options' --no-verify and --threads. */
typedef struct cq_bench_component {
    const char *tag;                 /* the temporary file's tag */
    const char *tool;                /* provenance: "cortiq bench zimage" */
    cq_bench_arch arch;
    cq_dtype quant;                  /* the matrices' codec (the header's quant_type) */
    const cq_bench_pack *weights;
    const char *blob_name, *blob;    /* "dit.config_json" and its text */
    const cq_bench_blob *more;       /* further config blobs (a pack of several components), or NULL */
    size_t n_more;
} cq_bench_component;

/* A component benchmark's backend and mapped pack. */
typedef struct cq_bench_model {
    const char *cmd;  /* "bench zimage", for messages */
    bool gpu;         /* a device backend (CUDA, Vulkan): device memory and ms in the report */
    int threads;      /* the CPU's worker threads (the CPU share's divisor) */
    cq_backend *be;
    cq_cmf *cmf;
} cq_bench_model;

/* Open the backend of m (before any weight is written, so a machine without the device fails at once), write
 * and map c's pack and print the weights line. `listed` is the status of making c's weights and blob: an error
 * there is reported and nothing is opened. Returns 0 or the exit code (the message printed; nothing left
 * open). */
int cq_bench_model_open(cq_bench_model *bm, const char *cmd, const cq_bench_model_opts *m,
                        const cq_bench_component *c, cq_status listed);
/* The line after the model's load: the backend, its threads on the CPU, the load's seconds. */
void cq_bench_model_loaded(const cq_bench_model *bm, double load_s);
void cq_bench_model_close(cq_bench_model *bm);

/* One call of a timed operation; i counts the calls from 0, warm-ups included. */
typedef cq_status (*cq_bench_call_fn)(void *ctx, int i);
/* warm untimed calls, then n timed ones (n <= 100): the medians of their wall and process CPU seconds. With
 * be and after_warm, the backend's statistics are read (and reset: op times of the timed calls only) once
 * the warm-ups are done. */
cq_status cq_bench_repeat(cq_bench_call_fn fn, void *ctx, int warm, int n, cq_backend *be,
                          cq_backend_stats *after_warm, double *wall, double *cpu);

/* The report's table: a header, then one row per timed operation (ms, GFLOP and TFLOP/s on a GPU; wall s,
 * GFLOP, GFLOP/s, CPU s and the CPU share on the CPU; "-" for work not counted in FLOPs, flops 0); `width` is
 * the label column's. */
void cq_bench_table_head(const cq_bench_model *bm, int width);
void cq_bench_table_row(const cq_bench_model *bm, int width, const char *label, double wall, double cpu,
                        double flops);
/* The closing lines: the device memory (peak of st0 and st, the weights, the device's use) and the per-op
 * times where the backend timed them, or the peak resident memory and what the CPU share means; `runs` timed
 * runs of what `per` names after `warm` warm-ups. */
void cq_bench_memory_lines(const cq_bench_model *bm, const cq_backend_stats *st0, const cq_backend_stats *st,
                           int runs, int warm, const char *per);

#endif /* CQ_CLI_BENCH_PACK_H */
