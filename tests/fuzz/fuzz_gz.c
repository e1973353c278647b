/* fuzz_gz.c — the gzip reader (cq_gz_inflate: tokenizer.json.gz and other
 * compressed side files) on arbitrary bytes: it must return the inflated
 * bytes within the cap or an error, never crash, leak or read out of bounds. */
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "base/gz.h"

static volatile unsigned sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* a small cap and a roomy one, so both the limit's refusal and whole members are reached */
    static const size_t caps[] = {64, 1 << 20};
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        uint8_t *out = NULL;
        size_t len = 0;
        if (cq_gz_inflate(data, size, caps[c], "fuzz input", &out, &len) == CQ_OK) {
            if (len > caps[c]) __builtin_trap();
            for (size_t i = 0; i < len; i++) sink += out[i];
            cq_free(out);
        }
        cq_clear_error();
    }
    return 0;
}
