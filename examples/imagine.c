/*
 * imagine.c — draw a picture through the public API alone (include/cortiq.h).
 *
 *   cc imagine.c $(pkg-config --cflags --libs cortiq) -o imagine
 *   ./imagine models/shapes.cmf "a red circle on a blue background" out.png [SIZE [STEPS [SEED]]]
 *
 * The same pack, prompt, size, steps and seed give the same PNG, byte for
 * byte, as `cortiq imagine ... --size SIZExSIZE --steps STEPS --seed SEED`.
 */
#include <stdio.h>
#include <stdlib.h>

#include <cortiq.h>

static int progress(cq_image_phase phase, int step, int n_steps, void *user) {
    (void)user;
    if (phase == CQ_IMAGE_PHASE_STEPS && step > 0) fprintf(stderr, "\rstep %d/%d", step, n_steps);
    if (phase == CQ_IMAGE_PHASE_DECODE) fprintf(stderr, "\n");
    return 0; /* non-zero would stop the generation */
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s PACK.cmf PROMPT OUT.png [SIZE [STEPS [SEED]]]\n", argv[0]);
        return 2;
    }
    cq_image_opts o;
    cq_image_opts_init(&o);
    o.prompt = argv[2];
    o.width = o.height = argc > 4 ? atoi(argv[4]) : 256;
    o.steps = argc > 5 ? atoi(argv[5]) : 20;
    o.seed = argc > 6 ? strtoull(argv[6], NULL, 10) : 0;
    o.progress = progress;

    cq_model *model = NULL;
    cq_image *img = NULL;
    const cq_model_opts mo = {.backend = "cpu"};
    cq_status s = cq_model_open(argv[1], &mo, &model);
    if (s == CQ_OK) s = cq_image_generate(model, &o, &img);
    if (s == CQ_OK) s = cq_image_write_png(img, argv[3], NULL);
    if (s == CQ_OK) {
        int w, h, c;
        cq_image_pixels(img, &w, &h, &c);
        cq_image_timings t = cq_image_get_timings(img);
        printf("wrote %s (%dx%d, %d channels) on %s: %.2fs of steps\n", argv[3], w, h, c,
               cq_model_backend_name(model), t.steps);
    } else {
        fprintf(stderr, "imagine: %s (%s)\n", cq_last_error(), cq_status_str(s));
    }
    cq_image_free(img);
    cq_model_free(model);
    return s == CQ_OK ? 0 : 1;
}
