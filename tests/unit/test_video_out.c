/*
 * test_video_out.c — the video writer (src/io/video_out.h).
 *
 * The MP4 is checked by a real decoder (Debian's ffprobe and ffmpeg): a
 * synthetic 64x48 clip, 25 frames at 24 fps (a moving gradient) with a 1 kHz
 * sine at 48 kHz stereo of the same length (50000 sound frames), must come
 * back as h264 + aac (or mpeg4 + aac where libx264 is missing), 25 frames at
 * 24/1, the sound's duration (its edit list, in the movie's 1/1000 s) within
 * 1 ms of the 50000 frames pushed and within one AAC frame (1024 / 48000 s)
 * of the picture's, the decoded sound no shorter than what was pushed and
 * less than one AAC frame longer (FFmpeg's demuxer drops the priming but not
 * the last frame's padding), the metadata present, the first decoded
 * frame (converted back to RGB by swscale with the BT.709 matrix, accurate
 * rounding) within a mean absolute error of 1.5 (of 255) and no value off by
 * more than 16 (measured with libx264 crf 18, preset fast: mean 1.12, max 10:
 * yuv420p's halved chroma and the codec's loss; the native MPEG-4 part 2
 * encoder at quantiser 2, forced by opts.mpeg4, is held to the same bounds:
 * measured mean 1.01, max 7), and the decoded sine's RMS
 * within 0.5 % of 0.5 / sqrt 2 (measured 0.35357 against 0.35355).
 *
 * Without ffprobe/ffmpeg the other tests run and the program exits 77
 * (skipped) with a message. The fallback writer (PNG frames and a WAV) is
 * tested in every build; built without FFmpeg, an MP4 path gives the frames
 * and the WAV beside it.
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "testutil.h"

#include "base/base.h"
#include "io/video_out.h"
#include "pipelines/png_write.h"
#include "pipelines/wav_write.h"

#define W 64
#define H 48
#define NF 25
#define RATE 48000
#define NA (NF * RATE / 24) /* 50000 sound frames: 25 frames at 24 fps */

static bool g_have_probe;
/* the MPEG-4 part 2 fallback's bounds on the first frame (of 255) */
#define MPEG4_MEAN 1.5
#define MPEG4_MAX 16

static int tri(int v) { /* a triangle wave 0..255..0, so the gradient moves without a hard edge */
    v %= 510;
    return v < 256 ? v : 509 - v;
}

static void make_frame(uint8_t *p, int w, int h, int t) {
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *q = p + ((size_t)y * (size_t)w + (size_t)x) * 3;
            q[0] = (uint8_t)tri(x * 4 + t * 6);
            q[1] = (uint8_t)(y * 255 / (h > 1 ? h - 1 : 1));
            q[2] = (uint8_t)tri(2 * (x + y) + t * 3 + 60);
        }
}

static void make_sine(float *s, size_t n, int ch, size_t first) {
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < ch; c++)
            s[i * (size_t)ch + (size_t)c] = 0.5f * (float)sin(2.0 * M_PI * 1000.0 * (double)(first + i) / RATE);
}

/* Entries of dir (less . and ..); *hidden: how many start with '.' (temporaries). */
static int count_entries(const char *dir, int *hidden) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    if (hidden) *hidden = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        n++;
        if (hidden && e->d_name[0] == '.') (*hidden)++;
    }
    closedir(d);
    return n;
}

/* The value of `key="..."` or `key=...` (ffprobe -of flat) in text, into buf ("" when absent). */
static const char *flat(const char *text, const char *key, char *buf, size_t cap) {
    char pat[200];
    snprintf(pat, sizeof pat, "%s=", key);
    buf[0] = '\0';
    const char *p = text;
    while ((p = strstr(p, pat)) != NULL && p != text && p[-1] != '\n') p++;
    if (!p) return buf;
    p += strlen(pat);
    const bool quoted = *p == '"';
    if (quoted) p++;
    const char *q = p;
    while (*q && *q != '\n' && !(quoted && *q == '"')) q++;
    snprintf(buf, cap, "%.*s", (int)(q - p), p);
    return buf;
}

static cq_video_out_opts clip_opts(const char *path) {
    cq_video_out_opts o;
    cq_video_out_opts_init(&o);
    o.path = path;
    o.width = W;
    o.height = H;
    o.fps_num = 24;
    o.fps_den = 1;
    o.audio_rate = RATE;
    o.audio_channels = 2;
    o.prompt = "a red fox runs through snow";
    o.model = "ltx-2.5-test";
    o.seed = 42;
    o.has_seed = true;
    o.preset = "fast";
    return o;
}

/* Push the clip: frames in two chunks with sound between, so the muxer interleaves. */
static cq_status push_clip(cq_video_out *v, uint8_t *frames, float *sound) {
    const size_t fb = (size_t)W * H * 3;
    CQ_TRY(cq_video_out_push_frames(v, frames, 10));
    CQ_TRY(cq_video_out_push_audio(v, sound, 7000));
    CQ_TRY(cq_video_out_push_frames(v, frames + 10 * fb, NF - 10));
    return cq_video_out_push_audio(v, sound + 7000 * 2, NA - 7000);
}

static void fill_clip(uint8_t **frames, float **sound) {
    *frames = malloc((size_t)W * H * 3 * NF);
    *sound = malloc(sizeof(float) * NA * 2);
    assert_non_null(*frames);
    assert_non_null(*sound);
    for (int t = 0; t < NF; t++) make_frame(*frames + (size_t)t * W * H * 3, W, H, t);
    make_sine(*sound, NA, 2, 0);
}

/* mpeg4: the native MPEG-4 part 2 encoder (what a libavcodec without libx264 gets), with its own bounds */
static void check_mp4(bool mpeg4, double mean_bound, int max_bound) {
    if (!cq_video_out_has_mp4() || !g_have_probe) skip();
    const char *dir = tu_tmpdir(mpeg4 ? "video_mpeg4" : "video_mp4");
    const char *mp4 = tu_path(dir, "clip.mp4");
    uint8_t *frames;
    float *sound;
    fill_clip(&frames, &sound);
    cq_video_out_opts o = clip_opts(mp4);
    o.mpeg4 = mpeg4;
    cq_video_out *v = NULL;
    assert_int_equal(cq_video_out_open(&o, &v), CQ_OK);
    assert_int_equal(push_clip(v, frames, sound), CQ_OK);
    assert_int_equal(cq_video_out_frames(v), NF);
    assert_int_equal((int)cq_video_out_audio_frames(v), NA);
    assert_int_equal(cq_video_out_finish(v), CQ_OK);
    cq_video_out_free(v);
    int hidden = -1;
    assert_int_equal(count_entries(dir, &hidden), 1);
    assert_int_equal(hidden, 0);

    const char *probe = tu_path(dir, "probe.txt");
    assert_int_equal(tu_system("ffprobe -v error -count_frames -show_entries "
                               "stream=codec_type,codec_name,nb_read_frames,r_frame_rate,duration,sample_rate,channels"
                               ":format_tags=title,comment,description -of flat '%s' > '%s'",
                               mp4, probe),
                     0);
    size_t len = 0;
    char *text = (char *)tu_read_file(probe, &len);
    assert_non_null(text);
    text = realloc(text, len + 1);
    text[len] = '\0';
    char b[256];
    const char *venc = cq_video_out_encoder();
    assert_non_null(venc);
    const char *want_v = !mpeg4 && strcmp(venc, "libx264") == 0 ? "h264" : "mpeg4";
    assert_string_equal(flat(text, "streams.stream.0.codec_type", b, sizeof b), "video");
    assert_string_equal(flat(text, "streams.stream.0.codec_name", b, sizeof b), want_v);
    assert_string_equal(flat(text, "streams.stream.0.nb_read_frames", b, sizeof b), "25");
    assert_string_equal(flat(text, "streams.stream.0.r_frame_rate", b, sizeof b), "24/1");
    const double vdur = atof(flat(text, "streams.stream.0.duration", b, sizeof b));
    assert_string_equal(flat(text, "streams.stream.1.codec_type", b, sizeof b), "audio");
    assert_string_equal(flat(text, "streams.stream.1.codec_name", b, sizeof b), "aac");
    assert_string_equal(flat(text, "streams.stream.1.sample_rate", b, sizeof b), "48000");
    assert_string_equal(flat(text, "streams.stream.1.channels", b, sizeof b), "2");
    const double adur = atof(flat(text, "streams.stream.1.duration", b, sizeof b));
    printf("video_out: %s: video %.6f s, audio %.6f s (pushed %.6f s)\n", want_v, vdur, adur, (double)NF / 24);
    assert_true(fabs(vdur - (double)NF / 24) < 1e-3);
    assert_true(fabs(adur - vdur) <= 1024.0 / RATE);
    /* the edit list (in the movie's 1/1000 s) trims the sound to what was pushed */
    assert_true(fabs(adur - (double)NA / RATE) <= 1e-3);
    assert_string_equal(flat(text, "format.tags.title", b, sizeof b), "cortiq video");
    assert_string_equal(flat(text, "format.tags.description", b, sizeof b), o.prompt);
    assert_string_equal(flat(text, "format.tags.comment", b, sizeof b), "seed 42, model ltx-2.5-test");
    free(text);

    /* the first frame as the decoder gives it back */
    const char *raw = tu_path(dir, "first.rgb");
    assert_int_equal(tu_system("ffmpeg -v error -y -i '%s' -frames:v 1 -vf "
                               "scale=in_color_matrix=bt709:in_range=tv:flags=bicubic+accurate_rnd+full_chroma_int "
                               "-f rawvideo -pix_fmt rgb24 '%s'", mp4, raw), 0);
    uint8_t *got = tu_read_file(raw, &len);
    assert_non_null(got);
    assert_int_equal(len, (size_t)W * H * 3);
    double sum = 0;
    int worst = 0;
    for (size_t i = 0; i < len; i++) {
        const int d = abs((int)got[i] - (int)frames[i]);
        sum += d;
        worst = d > worst ? d : worst;
    }
    const double mean = sum / (double)len;
    printf("video_out: first frame mean |err| %.3f, max %d (of 255)\n", mean, worst);
    assert_true(mean <= mean_bound);
    assert_true(worst <= max_bound);
    free(got);

    /* the sound: exactly what was pushed, trimmed, and the sine's level */
    const char *pcm = tu_path(dir, "sound.f32");
    assert_int_equal(tu_system("ffmpeg -v error -y -i '%s' -vn -f f32le -acodec pcm_f32le '%s'", mp4, pcm), 0);
    float *dec = (float *)tu_read_file(pcm, &len);
    assert_non_null(dec);
    printf("video_out: %zu sound frames decoded (pushed %d)\n", len / 8, NA);
    /* FFmpeg's MP4 demuxer drops the encoder's priming (the edit list's start) but hands out the last AAC
     * frame whole: at most one frame beyond what was pushed, never less */
    assert_int_equal(len % (2 * sizeof(float)), 0);
    assert_true(len / 8 >= (size_t)NA && len / 8 < (size_t)NA + 1024);
    double ss = 0;
    for (size_t i = 2 * 2048; i < (size_t)NA * 2 - 2 * 2048; i++) ss += (double)dec[i] * dec[i];
    const double rms = sqrt(ss / (double)((size_t)NA * 2 - 4 * 2048));
    printf("video_out: decoded sine RMS %.5f (pushed %.5f)\n", rms, 0.5 / sqrt(2.0));
    assert_true(fabs(rms - 0.5 / sqrt(2.0)) <= 0.005 * 0.5 / sqrt(2.0));
    free(dec);
    free(frames);
    free(sound);
}

static void test_mp4_decoded(void **state) {
    (void)state;
    check_mp4(false, 1.5, 16);
}

static void test_mpeg4_decoded(void **state) {
    (void)state;
    check_mp4(true, MPEG4_MEAN, MPEG4_MAX);
}

static void test_mp4_refusals(void **state) {
    (void)state;
    const char *dir = tu_tmpdir("video_bad");
    cq_video_out_opts o = clip_opts(tu_path(dir, "no/such/dir/clip.mp4"));
    o.wav_path = NULL;
    cq_video_out *v = (cq_video_out *)1;
    tu_expect_err(cq_video_out_open(&o, &v), CQ_ERR_IO, "does not exist");
    assert_null(v);
    o = clip_opts(tu_path(dir, "clip.mp4"));
    o.fps_num = 0;
    tu_expect_err(cq_video_out_open(&o, &v), CQ_ERR_INVALID_ARG, "frame rate");
    o = clip_opts(tu_path(dir, "clip.mp4"));
    o.audio_channels = 3;
    tu_expect_err(cq_video_out_open(&o, &v), CQ_ERR_INVALID_ARG, "channels");
    if (cq_video_out_has_mp4()) {
        o = clip_opts(tu_path(dir, "clip.mp4"));
        o.width = 63;
        tu_expect_err(cq_video_out_open(&o, &v), CQ_ERR_INVALID_ARG, "even width and height");
    }
    assert_int_equal(count_entries(dir, NULL), 0);
}

/* Failures after open leave nothing: no frames, an interrupt, a write error. */
static void test_mp4_nothing_partial(void **state) {
    (void)state;
    const char *dir = tu_tmpdir("video_fail");
    const char *mp4 = tu_path(dir, "clip.mp4");
    uint8_t *frames;
    float *sound;
    fill_clip(&frames, &sound);
    cq_video_out_opts o = clip_opts(mp4);
    cq_video_out *v = NULL;

    /* finish without frames */
    assert_int_equal(cq_video_out_open(&o, &v), CQ_OK);
    assert_true(count_entries(dir, NULL) >= 1); /* the temporaries exist while it is open */
    tu_expect_err(cq_video_out_finish(v), CQ_ERR_INVALID_ARG, "no frames");
    cq_video_out_free(v);
    assert_int_equal(count_entries(dir, NULL), 0);

    /* interrupted between frames */
    assert_int_equal(cq_video_out_open(&o, &v), CQ_OK);
    assert_int_equal(cq_video_out_push_frames(v, frames, 3), CQ_OK);
    cq_cancel_request();
    tu_expect_err(cq_video_out_push_frames(v, frames, 3), CQ_ERR_INTERRUPTED, "interrupted");
    cq_cancel_clear();
    cq_video_out_free(v);
    assert_int_equal(count_entries(dir, NULL), 0);

    /* a write error: a file size limit of 4 KiB (EFBIG, as a full disk's ENOSPC would be reported) */
    if (cq_video_out_has_mp4()) {
        struct rlimit old, lim;
        assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
        void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
        assert_int_equal(cq_video_out_open(&o, &v), CQ_OK);
        lim = old;
        lim.rlim_cur = 4096;
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
        cq_status s = push_clip(v, frames, sound);
        if (s == CQ_OK) s = cq_video_out_finish(v);
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
        signal(SIGXFSZ, prev);
        printf("video_out: with a 4 KiB file size limit: %s\n", cq_last_error());
        tu_expect_err(s, CQ_ERR_IO, "too large");
        tu_expect_err(s, CQ_ERR_IO, "clip.mp4");
        cq_video_out_free(v);
        assert_int_equal(count_entries(dir, NULL), 0);
    }
    free(frames);
    free(sound);
}

/* The PNG frames and the WAV (what a build without FFmpeg writes for an MP4). */
static void check_fallback(const char *frames_dir, const char *wav, int w, int h, int nf, int ch, int rate,
                           const uint8_t *pix, const float *sound, int na) {
    assert_int_equal(count_entries(frames_dir, NULL), nf);
    for (int t = 0; t < nf; t++) {
        char leaf[64];
        snprintf(leaf, sizeof leaf, "frame_%05d.png", t);
        cq_image8 img = {0};
        assert_int_equal(cq_png_read(tu_path(frames_dir, leaf), false, &img), CQ_OK);
        assert_int_equal(img.width, w);
        assert_int_equal(img.height, h);
        assert_memory_equal(img.pixels, pix + (size_t)t * (size_t)w * (size_t)h * 3, (size_t)w * (size_t)h * 3);
        if (t == 0) {
            assert_non_null(cq_image8_text(&img, "prompt"));
            assert_string_equal(cq_image8_text(&img, "prompt"), "a red fox runs through snow");
            assert_string_equal(cq_image8_text(&img, "seed"), "42");
        }
        cq_image8_free(&img);
    }
    cq_wav16 wv = {0};
    assert_int_equal(cq_wav_read(wav, &wv), CQ_OK);
    assert_int_equal(wv.channels, ch);
    assert_int_equal(wv.rate, rate);
    assert_int_equal((int)wv.n_frames, na);
    for (size_t i = 0; i < (size_t)na * (size_t)ch; i++) assert_int_equal(wv.samples[i], cq_wav_quantize(sound[i]));
    cq_wav16_free(&wv);
}

static void test_fallback(void **state) {
    (void)state;
    const char *dir = tu_tmpdir("video_frames");
    enum { FW = 31, FH = 21, FN = 5, FA = 16000 * FN / 8 };
    uint8_t *pix = malloc((size_t)FW * FH * 3 * FN);
    float *sound = malloc(sizeof(float) * FA);
    assert_non_null(pix);
    assert_non_null(sound);
    for (int t = 0; t < FN; t++) make_frame(pix + (size_t)t * FW * FH * 3, FW, FH, t);
    for (int i = 0; i < FA; i++) sound[i] = 1.2f * (float)sin(i * 0.05); /* beyond full scale: clamped */

    char frames_dir[1200], wav[1200];
    snprintf(frames_dir, sizeof frames_dir, "%s", tu_path(dir, "frames"));
    snprintf(wav, sizeof wav, "%s", tu_path(dir, "sound.wav"));
    cq_video_out_opts o = clip_opts(NULL);
    o.frames_dir = frames_dir;
    o.wav_path = wav;
    o.width = FW; /* odd sizes are fine for PNG frames */
    o.height = FH;
    o.fps_num = 8;
    o.audio_rate = 16000;
    o.audio_channels = 1;
    cq_video_out *v = NULL;
    assert_int_equal(cq_video_out_open(&o, &v), CQ_OK);
    assert_int_equal(cq_video_out_push_frames(v, pix, FN), CQ_OK);
    assert_int_equal(cq_video_out_push_audio(v, sound, 700), CQ_OK);
    assert_int_equal(cq_video_out_push_audio(v, sound + 700, FA - 700), CQ_OK);
    assert_int_equal(count_entries(dir, NULL), 2); /* both still temporaries */
    assert_int_equal(cq_video_out_finish(v), CQ_OK);
    char hint[9000];
    cq_video_out_mux_hint(v, "clip.mp4", hint, sizeof hint);
    printf("video_out: mux hint: %s\n", hint);
    assert_non_null(strstr(hint, "frame_%05d.png"));
    assert_non_null(strstr(hint, "-framerate 8/1"));
    assert_non_null(strstr(hint, "sound.wav"));
    cq_video_out_free(v);
    int hidden = -1;
    assert_int_equal(count_entries(dir, &hidden), 2);
    assert_int_equal(hidden, 0);
    check_fallback(frames_dir, wav, FW, FH, FN, 1, 16000, pix, sound, FA);

    /* a frame directory that is not empty is refused; a failure leaves nothing new */
    tu_expect_err(cq_video_out_open(&o, &v), CQ_ERR_IO, "not empty");
    assert_int_equal(count_entries(dir, NULL), 2);
    /* freed before finish (an error or an interrupt on the caller's side): the temporaries go */
    snprintf(frames_dir, sizeof frames_dir, "%s", tu_path(dir, "frames2"));
    snprintf(wav, sizeof wav, "%s", tu_path(dir, "sound2.wav"));
    assert_int_equal(cq_video_out_open(&o, &v), CQ_OK);
    assert_int_equal(cq_video_out_push_frames(v, pix, 2), CQ_OK);
    assert_int_equal(cq_video_out_push_audio(v, sound, 100), CQ_OK);
    assert_int_equal(count_entries(dir, NULL), 4);
    cq_video_out_free(v);
    int hid = -1;
    assert_int_equal(count_entries(dir, &hid), 2);
    assert_int_equal(hid, 0);
    free(pix);
    free(sound);
}

/* Built without FFmpeg: an MP4 path gives <name>_frames/ and <name>.wav. */
static void test_no_mp4_derived(void **state) {
    (void)state;
    if (cq_video_out_has_mp4()) skip();
    const char *dir = tu_tmpdir("video_derived");
    uint8_t *frames;
    float *sound;
    fill_clip(&frames, &sound);
    cq_video_out_opts o = clip_opts(tu_path(dir, "clip.mp4"));
    cq_video_out *v = NULL;
    assert_int_equal(cq_video_out_open(&o, &v), CQ_OK);
    assert_null(cq_video_out_mp4_path(v));
    assert_int_equal(push_clip(v, frames, sound), CQ_OK);
    assert_int_equal(cq_video_out_finish(v), CQ_OK);
    char fd[1200], wav[1200];
    snprintf(fd, sizeof fd, "%s", cq_video_out_frames_dir(v));
    snprintf(wav, sizeof wav, "%s", cq_video_out_wav_path(v));
    assert_non_null(strstr(fd, "clip_frames"));
    assert_non_null(strstr(wav, "clip.wav"));
    cq_video_out_free(v);
    check_fallback(fd, wav, W, H, NF, 2, RATE, frames, sound, NA);
    free(frames);
    free(sound);
}

int main(void) {
    g_have_probe = tu_system("command -v ffprobe >/dev/null 2>&1 && command -v ffmpeg >/dev/null 2>&1") == 0;
    printf("video_out: MP4 %s (video encoder %s); ffprobe %s\n", cq_video_out_has_mp4() ? "built" : "not built",
           cq_video_out_encoder() ? cq_video_out_encoder() : "none", g_have_probe ? "found" : "not found");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mp4_decoded),    cmocka_unit_test(test_mpeg4_decoded), cmocka_unit_test(test_mp4_refusals),
        cmocka_unit_test(test_mp4_nothing_partial), cmocka_unit_test(test_fallback),
        cmocka_unit_test(test_no_mp4_derived),
    };
    const int r = cmocka_run_group_tests(tests, NULL, NULL);
    if (r == 0 && cq_video_out_has_mp4() && !g_have_probe) {
        printf("test_video_out: skipped: ffprobe/ffmpeg not installed (Debian: ffmpeg); the MP4 was not decoded\n");
        return TU_SKIP;
    }
    return r;
}
