/* fuzz_codec.c — libFuzzer target for the codec layer: arbitrary payloads of
 * every dtype id must validate or fail cleanly, and the row decoders must
 * stay in bounds even on payloads that did not pass validation; encoders
 * take arbitrary floats (NaN/inf included) without crashing.
 *
 * Input: [u8 dtype][u8 ndim][ndim x u16 dims][payload...]. Shapes are kept
 * small so one input never allocates much. */
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"

#define MAX_ELEMS (1u << 16)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    cq_dtype dt = (cq_dtype)(data[0] % (CQ_DTYPE_COUNT + 1));
    int ndim = data[1] % 4;
    if (size < 2 + 2 * (size_t)ndim) return 0;
    uint64_t shape[3] = {0, 0, 0}, n = 1;
    for (int i = 0; i < ndim; i++) {
        shape[i] = cq_rd16(data + 2 + 2 * i);
        n *= shape[i];
    }
    if (n > MAX_ELEMS) return 0;
    const uint8_t *payload = data + 2 + 2 * ndim;
    const uint64_t nbytes = size - 2 - 2 * (size_t)ndim;
    /* copy so ASan sees the exact payload bounds */
    uint8_t *p = malloc(nbytes ? nbytes : 1);
    memcpy(p, payload, nbytes);
    uint64_t rows, cols, want;
    cq_codec_rows(ndim, shape, &rows, &cols);
    float *out = malloc((n ? n : 1) * sizeof(float));
    (void)cq_codec_nbytes(dt, ndim, shape, &want);
    cq_status vs = cq_codec_validate(dt, ndim, shape, p, nbytes);
    cq_status ds = cq_codec_dequant_rows(dt, ndim, shape, p, nbytes, 0, rows, out);
    if (vs == CQ_OK && cq_codec_can_decode(dt) && ds != CQ_OK && dt != CQ_DTYPE_U8) abort(); /* valid must decode */
    if (rows > 1) (void)cq_codec_dequant_rows(dt, ndim, shape, p, nbytes, rows / 2, rows - rows / 2, out);

    /* encoders on the payload reinterpreted as floats */
    if (cq_codec_can_encode(dt) && cq_codec_nbytes(dt, ndim, shape, &want) == CQ_OK && nbytes >= 4 * n) {
        uint8_t *enc = malloc(want ? want : 1);
        float *src = malloc((n ? n : 1) * sizeof(float));
        memcpy(src, p, 4 * n);
        if (cq_codec_quantize(dt, ndim, shape, src, enc, want) == CQ_OK &&
            cq_codec_validate(dt, ndim, shape, enc, want) != CQ_OK)
            abort(); /* an encoder's output must validate */
        free(enc);
        free(src);
    }
    free(out);
    free(p);
    return 0;
}
