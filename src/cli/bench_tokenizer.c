/*
 * bench_tokenizer.c — `cortiq bench tokenizer`: encoding speed (MB/s and
 * tokens/s) of a tokenizer from a .cmf pack, a tokenizer.json or a gzipped
 * tokenizer.json, on a text file or on built-in samples of English prose,
 * CJK and source code.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/gz.h"
#include "cli/cli.h"
#include "format/file_read.h"
#include "tokenizer/tokenizer.h"

static const char k_english[] =
    "The quick brown fox jumps over the lazy dog while a red circle sits on a blue background. "
    "Inference runtimes read their weights in place and stream the answer token by token; "
    "numbers like 3.14159 and 2026 appear, as do contractions such as don't, we'll and it's.\n";
static const char k_cjk[] = "猫在窗台上睡觉，阳光照在它的背上。今天的天气很好，我们去公园散步吧。"
                            "東京の春は桜がきれいです。서울의 가을 하늘은 높고 맑습니다。\n";
static const char k_code[] = "static int add(int a, int b) {\n\treturn a + b;    // sum\n}\n"
                             "for (size_t i = 0; i < n; i++) { out[i] = in[i] * 2.0f + bias[i]; }\n";

static void usage(FILE *f) {
    fprintf(f, "usage: cortiq bench tokenizer SOURCE [TEXT_FILE] [--seconds S]\n\n"
               "Encoding speed (MB/s, tokens/s) of a tokenizer. SOURCE is a .cmf pack (its tokenizer\n"
               "section), a tokenizer.json or a tokenizer.json.gz. Without TEXT_FILE, built-in English, CJK and code\n"
               "samples (each repeated to about 1 MB) are measured separately. Each measurement encodes\n"
               "for at least S seconds (default 2) after a cold start of the word cache.\n");
}

static cq_status load(const char *src, cq_tokenizer **tok) {
    size_t n = strlen(src);
    if (n > 4 && !strcmp(src + n - 4, ".cmf")) {
        cq_cmf *cmf;
        CQ_TRY(cq_cmf_open(src, &cmf));
        size_t tl;
        const uint8_t *tj = cq_cmf_tokenizer_json(cmf, &tl);
        cq_status s = tj ? cq_tokenizer_load(tj, tl, tok) : cq_fail(CQ_ERR_MISSING, "%s has no tokenizer section", src);
        cq_cmf_close(cmf);
        return s;
    }
    if (cq_path_is_gz(src)) {
        size_t len;
        uint8_t *js;
        CQ_TRY(cq_file_read_gz(src, (size_t)1 << 30, &js, &len));
        cq_status s = cq_tokenizer_load(js, len, tok);
        cq_free(js);
        return s;
    }
    return cq_tokenizer_load_file(src, tok);
}

static int measure(const char *cmd, cq_tokenizer *t, const char *label, const char *text, size_t len, double secs) {
    cq_tokenizer_bench_result r;
    cq_status s = cq_tokenizer_bench_encode(t, text, len, secs, &r);
    if (s != CQ_OK) return cq_cli_fail(cmd, s, label);
    printf("%-8s %9.2f MB/s %12.0f tokens/s  (%zu bytes -> %zu tokens per pass, %zu passes in %.2f s)\n", label,
           r.mb_per_s, r.tokens_per_s, len, r.tokens, r.passes, r.seconds);
    return 0;
}

static char *repeat_to(const char *sample, size_t want, size_t *len) {
    size_t sl = strlen(sample), reps = want / sl + 1;
    char *b = cq_mallocn(reps, sl);
    if (!b) return NULL;
    for (size_t i = 0; i < reps; i++) memcpy(b + i * sl, sample, sl);
    *len = reps * sl;
    return b;
}

int cq_bench_tokenizer(int argc, char **argv) {
    const char *cmd = "bench tokenizer", *src = NULL, *text_file = NULL;
    double secs = 2.0;
    for (int i = 1; i < argc; i++) {
        if (cq_cli_is_help(argv[i])) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--seconds")) {
            char *end;
            if (i + 1 >= argc) return cq_cli_usage_error(cmd, "--seconds needs a value");
            secs = strtod(argv[++i], &end);
            if (*end || !(secs > 0 && secs <= 600)) return cq_cli_usage_error(cmd, "--seconds wants (0, 600]");
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cq_cli_usage_error(cmd, "unknown option '%s'", argv[i]);
        } else if (!src) {
            src = argv[i];
        } else if (!text_file) {
            text_file = argv[i];
        } else {
            return cq_cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
        }
    }
    if (!src) {
        usage(stderr);
        return 2;
    }
    cq_tokenizer *t;
    cq_status s = load(src, &t);
    if (s != CQ_OK) return cq_cli_fail(cmd, s, src);
    printf("tokenizer %s (%zu ids), single thread\n", src, cq_tokenizer_vocab_size(t));
    int rc = 0;
    if (text_file) {
        size_t len;
        char *text = NULL;
        s = cq_file_read_all(text_file, (size_t)1 << 30, (uint8_t **)&text, &len);
        if (s != CQ_OK) rc = cq_cli_fail(cmd, s, text_file);
        else rc = measure(cmd, t, "file", text, len, secs);
        cq_free(text);
    } else {
        const struct {
            const char *label, *sample;
        } sets[] = {{"english", k_english}, {"cjk", k_cjk}, {"code", k_code}};
        for (size_t i = 0; i < CQ_ARRAY_LEN(sets) && rc == 0; i++) {
            size_t len;
            char *text = repeat_to(sets[i].sample, 1 << 20, &len);
            if (!text) {
                rc = cq_cli_fail(cmd, CQ_ERR_NOMEM, sets[i].label);
                break;
            }
            rc = measure(cmd, t, sets[i].label, text, len, secs);
            cq_free(text);
        }
    }
    cq_tokenizer_free(t);
    return rc;
}
