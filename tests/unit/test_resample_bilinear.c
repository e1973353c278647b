/*
 * test_resample_bilinear.c — CQ_RESAMPLE_PIL_BILINEAR (image/resample.h)
 * against Pillow's own Image.resize(BILINEAR) on the cases of
 * tests/golden/resample_bilinear (tools/golden_resample_bilinear.py):
 * enlarging, shrinking by ~1.25x and ~3x (the filter's support widens with
 * the scale), and one dimension only. Byte for byte, as PIL's fixed-point
 * arithmetic is followed step by step.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#include "image/image_read.h"
#include "image/resample.h"

#define GOLD CQ_SOURCE_DIR "/tests/golden/resample_bilinear"

static void test_golden(void **st) {
    (void)st;
    cJSON *index = tu_read_json(GOLD "/index.json");
    assert_non_null(index);
    const cJSON *cs;
    int k = 0;
    cJSON_ArrayForEach(cs, cJSON_GetObjectItemCaseSensitive(index, "cases")) {
        char a[1024], b[1024];
        snprintf(a, sizeof a, GOLD "/%s_in.png", cs->string);
        snprintf(b, sizeof b, GOLD "/%s_out.png", cs->string);
        cq_image8 in = {0}, want = {0};
        if (cq_image_read_rgb(a, &in) != CQ_OK || cq_image_read_rgb(b, &want) != CQ_OK)
            fail_msg("%s: %s", cs->string, cq_last_error());
        const size_t n = (size_t)want.width * want.height * 3;
        uint8_t *got = malloc(n);
        assert_non_null(got);
        assert_int_equal(cq_resample_u8(CQ_RESAMPLE_PIL_BILINEAR, in.pixels, in.width, in.height, 3, got, want.width,
                                        want.height),
                         CQ_OK);
        size_t diff = 0;
        int worst = 0;
        for (size_t i = 0; i < n; i++)
            if (got[i] != want.pixels[i]) {
                diff++;
                const int d = abs((int)got[i] - (int)want.pixels[i]);
                if (d > worst) worst = d;
            }
        printf("  %-14s %dx%d -> %dx%d: %zu of %zu bytes differ (largest %d)\n", cs->string, in.width, in.height,
               want.width, want.height, diff, n, worst);
        assert_int_equal(diff, 0);
        free(got);
        cq_image8_free(&in);
        cq_image8_free(&want);
        k++;
    }
    assert_int_equal(k, 4);
    cJSON_Delete(index);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_golden)};
    return cmocka_run_group_tests_name("test_resample_bilinear", tests, NULL, NULL);
}
