/* fuzz_tokenizer_json.c — libFuzzer target for the tokenizer.json loader.
 *
 * Input: [u8 flags][tokenizer.json...]. A tokenizer that loads encodes a
 * fixed probe text (spaces, digits, an added-token look-alike, CJK, an
 * emoji, an ill-formed byte) and the first bytes of the input itself with
 * the flags, and decodes and streams the result: ids must be inside the
 * vocabulary and decoded text valid UTF-8. The inputs are small JSON files
 * (the seeds are a few hundred bytes; see fuzz_tokenizer_json.options), so
 * an execution is one cheap load, not a big tokenizer's. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "tokenizer/tokenizer.h"
#include "tok_check.h"

static const char k_probe[] = "Hello  world 12345 <a><b> [L] \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80 \xff\tx\n";

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    cq_set_log(NULL, NULL, CQ_LOG_NONE);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    unsigned flags = data[0] & 7;
    cq_tokenizer *t = NULL;
    if (cq_tokenizer_load(data + 1, size - 1, &t) != CQ_OK) return 0;
    tok_exercise(t, k_probe, sizeof k_probe - 1, flags, 64);
    tok_exercise(t, (const char *)data + 1, size - 1 < 256 ? size - 1 : 256, flags, 64);
    cq_tokenizer_free(t);
    return 0;
}
