/*
 * video_out.c — the video writer (video_out.h): checks the options, sends
 * frames and sound to the MP4 half (video_out_mp4.c) and/or to a directory of
 * PNG frames and a WAV, and keeps every output temporary until finish.
 *
 * The frame directory is a temporary directory beside its target
 * (".<name>.cortiq-XXXXXX", mkdtemp), each frame a PNG written into it
 * through cq_png_write; finish renames the directory over the (absent or
 * empty) target. The WAV's outfile is opened at open (so its checks come
 * before any work) and its samples, clamped, are held until finish: a clip's
 * sound is small (48 kHz stereo is 384 KB a second as floats).
 */
#include "io/video_out.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "base/outfile.h"
#include "io/video_out_impl.h"
#include "pipelines/png_write.h"
#include "pipelines/wav_write.h"

struct cq_video_out {
    cq_video_out_opts o; /* strings below are owned copies */
    cq_mp4 *mp4;
    char *mp4_path, *frames_dir, *frames_tmp, *wav_path;
    cq_outfile wav;
    bool wav_open;
    float *audio; /* clamped samples for the WAV */
    size_t audio_len, audio_cap;
    float *scratch; /* one push's clamped samples for the MP4 */
    size_t scratch_cap;
    int n_frames;
    uint64_t n_audio;
    bool failed, finished;
};

void cq_video_out_opts_init(cq_video_out_opts *o) {
    memset(o, 0, sizeof *o);
    o->fps_num = 24;
    o->fps_den = 1;
    o->audio_channels = 2;
    o->crf = -1;
}

bool cq_video_out_has_mp4(void) { return cq_mp4_available(); }
const char *cq_video_out_encoder(void) { return cq_mp4_available() ? cq_mp4_encoder_name() : NULL; }

static char *dup_or_null(const char *s, bool *oom) {
    if (!s) return NULL;
    char *d = cq_strdup(s);
    if (!d) *oom = true;
    return d;
}

/* "dir/clip.mp4" -> "dir/clip" + suffix */
static char *derive(const char *path, const char *suffix) {
    const char *slash = strrchr(path, '/');
    const char *dot = strrchr(path, '.');
    const size_t stem = dot && (!slash || dot > slash + 1) ? (size_t)(dot - path) : strlen(path);
    const size_t n = stem + strlen(suffix) + 1;
    char *d = cq_malloc(n);
    if (d) snprintf(d, n, "%.*s%s", (int)stem, path, suffix);
    return d;
}

/* Remove the temporary frame directory and what is in it (only names this writer made). */
static void remove_frames_tmp(cq_video_out *v) {
    if (!v->frames_tmp) return;
    DIR *d = opendir(v->frames_tmp);
    if (d) {
        struct dirent *e;
        char p[4096];
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
            snprintf(p, sizeof p, "%s/%s", v->frames_tmp, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(v->frames_tmp);
    cq_free(v->frames_tmp);
    v->frames_tmp = NULL;
}

static bool dir_is_empty(const char *path) {
    DIR *d = opendir(path);
    if (!d) return false;
    struct dirent *e;
    bool empty = true;
    while (empty && (e = readdir(d)) != NULL)
        if (!(e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))) empty = false;
    closedir(d);
    return empty;
}

static cq_status open_frames_dir(cq_video_out *v) {
    const char *t = v->frames_dir;
    struct stat st;
    if (lstat(t, &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            return cq_fail(CQ_ERR_IO, "'%s' exists and is not a directory; name a new frame directory", t);
        if (!dir_is_empty(t))
            return cq_fail(CQ_ERR_IO, "the frame directory '%s' is not empty; cortiq replaces only an empty one", t);
    } else if (errno != ENOENT) {
        return cq_fail(CQ_ERR_IO, "cannot use '%s' as the frame directory: %s", t, strerror(errno));
    }
    size_t len = strlen(t);
    while (len > 1 && t[len - 1] == '/') len--;
    const char *slash = memrchr(t, '/', len);
    const size_t n = len + 32;
    v->frames_tmp = cq_malloc(n);
    if (!v->frames_tmp) return CQ_ERR_NOMEM;
    if (slash)
        snprintf(v->frames_tmp, n, "%.*s/.%.*s.cortiq-XXXXXX", (int)(slash - t), t, (int)(len - (size_t)(slash - t) - 1),
                 slash + 1);
    else snprintf(v->frames_tmp, n, ".%.*s.cortiq-XXXXXX", (int)len, t);
    if (!mkdtemp(v->frames_tmp)) {
        const int e = errno;
        cq_free(v->frames_tmp);
        v->frames_tmp = NULL;
        return cq_fail(CQ_ERR_IO, "cannot create the frame directory '%s': %s", t,
                       e == ENOENT ? "its parent directory does not exist"
                       : e == EACCES ? "permission denied"
                                     : strerror(e));
    }
    return CQ_OK;
}

static cq_status check_opts(const cq_video_out_opts *o) {
    if (!o->path && !o->frames_dir && !o->wav_path)
        return cq_fail(CQ_ERR_INVALID_ARG, "video: no output (an MP4, a frame directory or a WAV)");
    if (o->width < 1 || o->height < 1 || o->width > CQ_VIDEO_MAX_SIDE || o->height > CQ_VIDEO_MAX_SIDE)
        return cq_fail(CQ_ERR_INVALID_ARG, "video: size %dx%d is outside 1..%d", o->width, o->height,
                       CQ_VIDEO_MAX_SIDE);
    if (o->fps_num < 1 || o->fps_den < 1 || o->fps_num > (int64_t)CQ_VIDEO_MAX_FPS * o->fps_den)
        return cq_fail(CQ_ERR_INVALID_ARG, "video: frame rate %d/%d is outside (0, %d]", o->fps_num, o->fps_den,
                       CQ_VIDEO_MAX_FPS);
    if (o->audio_rate < 0 || o->audio_rate > CQ_WAV_MAX_RATE)
        return cq_fail(CQ_ERR_INVALID_ARG, "video: sound rate %d Hz is outside 0..%d", o->audio_rate, CQ_WAV_MAX_RATE);
    if (o->audio_rate && o->audio_channels != 1 && o->audio_channels != 2)
        return cq_fail(CQ_ERR_INVALID_ARG, "video: %d sound channels; 1 or 2 are written", o->audio_channels);
    if (o->frames_hint < 0 || o->frames_hint > CQ_VIDEO_MAX_FRAMES)
        return cq_fail(CQ_ERR_INVALID_ARG, "video: %d frames; at most %d are written", o->frames_hint,
                       CQ_VIDEO_MAX_FRAMES);
    if (o->crf > 51) return cq_fail(CQ_ERR_INVALID_ARG, "video: crf %d is outside 0..51", o->crf);
    if (o->prompt) CQ_TRY(cq_png_check_text("prompt", o->prompt));
    return CQ_OK;
}

cq_status cq_video_out_open(const cq_video_out_opts *o_in, cq_video_out **out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "cq_video_out_open: out is NULL");
    *out = NULL;
    if (!o_in) return cq_fail(CQ_ERR_INVALID_ARG, "cq_video_out_open: no options");
    CQ_TRY(check_opts(o_in));
    const bool mp4 = o_in->path && cq_mp4_available();
    if (mp4 && (o_in->width % 2 || o_in->height % 2))
        return cq_fail(CQ_ERR_INVALID_ARG,
                       "video: %dx%d has an odd side; an MP4 (yuv420p, chroma at half size) needs an even width and "
                       "height",
                       o_in->width, o_in->height);
    cq_video_out *v = cq_calloc(1, sizeof *v);
    if (!v) return CQ_ERR_NOMEM;
    v->wav.fd = -1;
    v->wav.slot = -1;
    v->o = *o_in;
    bool oom = false;
    v->o.prompt = dup_or_null(o_in->prompt, &oom);
    v->o.model = dup_or_null(o_in->model, &oom);
    v->o.preset = dup_or_null(o_in->preset, &oom);
    v->mp4_path = mp4 ? dup_or_null(o_in->path, &oom) : NULL;
    v->frames_dir = dup_or_null(o_in->frames_dir, &oom);
    v->wav_path = o_in->audio_rate ? dup_or_null(o_in->wav_path, &oom) : NULL;
    if (o_in->path && !mp4) { /* built without FFmpeg: the frames and the sound beside the MP4's name */
        if (!v->frames_dir && !(v->frames_dir = derive(o_in->path, "_frames"))) oom = true;
        if (o_in->audio_rate && !v->wav_path && !(v->wav_path = derive(o_in->path, ".wav"))) oom = true;
    }
    v->o.path = v->mp4_path;
    v->o.frames_dir = v->frames_dir;
    v->o.wav_path = v->wav_path;
    cq_status s = oom ? CQ_ERR_NOMEM : CQ_OK;
    if (s == CQ_OK && v->wav_path) {
        const cq_outfile_opts fo = {.format = "WAV"};
        s = cq_outfile_open(v->wav_path, &fo, &v->wav);
        v->wav_open = s == CQ_OK;
    }
    if (s == CQ_OK && v->frames_dir) s = open_frames_dir(v);
    if (s == CQ_OK && mp4) s = cq_mp4_open(&v->o, &v->mp4);
    if (s != CQ_OK) {
        cq_video_out_free(v);
        return s;
    }
    *out = v;
    return CQ_OK;
}

static cq_status usable(cq_video_out *v, const char *what) {
    if (!v) return cq_fail(CQ_ERR_INVALID_ARG, "%s: no writer", what);
    if (v->finished) return cq_fail(CQ_ERR_INVALID_ARG, "%s: the video is already finished", what);
    if (v->failed) return cq_fail(CQ_ERR_INVALID_ARG, "%s: the video writer failed earlier", what);
    return cq_check_cancel("writing the video");
}

static cq_status write_png(cq_video_out *v, const uint8_t *rgb) {
    char name[4200];
    snprintf(name, sizeof name, "%s/frame_%05d.png", v->frames_tmp, v->n_frames);
    cq_png_text texts[4];
    size_t nt = 0;
    char seed[32];
    if (v->n_frames == 0) {
        texts[nt++] = (cq_png_text){.key = "Software", .value = "cortiq video"};
        if (v->o.prompt) texts[nt++] = (cq_png_text){.key = "prompt", .value = (char *)v->o.prompt};
        if (v->o.has_seed) {
            snprintf(seed, sizeof seed, "%" PRIu64, v->o.seed);
            texts[nt++] = (cq_png_text){.key = "seed", .value = seed};
        }
        if (v->o.model) texts[nt++] = (cq_png_text){.key = "model", .value = (char *)v->o.model};
    }
    const cq_status s = cq_png_write(name, rgb, v->o.width, v->o.height, 3, texts, nt);
    if (s != CQ_OK) return cq_fail_prefix(s, "frame directory '%s': ", v->frames_dir);
    return CQ_OK;
}

cq_status cq_video_out_push_frames(cq_video_out *v, const uint8_t *rgb, int n) {
    CQ_TRY(usable(v, "cq_video_out_push_frames"));
    if (!rgb || n < 0) return cq_fail(CQ_ERR_INVALID_ARG, "cq_video_out_push_frames: no pixels");
    if (n > CQ_VIDEO_MAX_FRAMES - v->n_frames)
        return cq_fail(CQ_ERR_INVALID_ARG, "video: more than %d frames", CQ_VIDEO_MAX_FRAMES);
    const size_t frame = (size_t)v->o.width * (size_t)v->o.height * 3;
    for (int i = 0; i < n; i++) {
        cq_status s = cq_check_cancel("writing the video");
        if (s == CQ_OK && v->mp4) s = cq_mp4_push_frame(v->mp4, rgb + (size_t)i * frame);
        if (s == CQ_OK && v->frames_tmp) s = write_png(v, rgb + (size_t)i * frame);
        if (s != CQ_OK) {
            v->failed = true;
            return s;
        }
        v->n_frames++;
    }
    return CQ_OK;
}

cq_status cq_video_out_push_audio(cq_video_out *v, const float *samples, size_t n) {
    CQ_TRY(usable(v, "cq_video_out_push_audio"));
    if (!v->o.audio_rate) return cq_fail(CQ_ERR_INVALID_ARG, "video: sound pushed to a video opened without sound");
    if (!samples && n) return cq_fail(CQ_ERR_INVALID_ARG, "cq_video_out_push_audio: no samples");
    size_t count;
    if (!cq_mul_size(n, (size_t)v->o.audio_channels, &count))
        return cq_fail(CQ_ERR_INVALID_ARG, "video: %zu sound frames overflow", n);
    float *dst = NULL;
    if (v->wav_open) { /* held for the WAV */
        if (v->audio_len + count > v->audio_cap) {
            size_t cap = v->audio_cap ? v->audio_cap : 65536;
            while (cap < v->audio_len + count) cap *= 2;
            float *p = cq_mallocn(cap, sizeof *p);
            if (!p) return CQ_ERR_NOMEM;
            if (v->audio_len) memcpy(p, v->audio, v->audio_len * sizeof *p);
            cq_free(v->audio);
            v->audio = p;
            v->audio_cap = cap;
        }
        dst = v->audio + v->audio_len;
    } else {
        if (count > v->scratch_cap) {
            cq_free(v->scratch);
            v->scratch_cap = 0;
            if (!(v->scratch = cq_mallocn(count, sizeof *v->scratch))) return CQ_ERR_NOMEM;
            v->scratch_cap = count;
        }
        dst = v->scratch;
    }
    for (size_t i = 0; i < count; i++) {
        const float x = samples[i];
        if (isnan(x))
            return cq_fail(CQ_ERR_NUMERIC, "video: sound sample %zu (frame %" PRIu64 ") is NaN", i,
                           v->n_audio + i / (size_t)v->o.audio_channels);
        dst[i] = x < -1.f ? -1.f : x > 1.f ? 1.f : x;
    }
    if (v->mp4) {
        const cq_status s = cq_mp4_push_audio(v->mp4, dst, n);
        if (s != CQ_OK) {
            v->failed = true;
            return s;
        }
    }
    if (v->wav_open) v->audio_len += count;
    v->n_audio += n;
    return CQ_OK;
}

cq_status cq_video_out_finish(cq_video_out *v) {
    CQ_TRY(usable(v, "cq_video_out_finish"));
    cq_status s = CQ_OK;
    if (v->n_frames == 0 && (v->mp4 || v->frames_tmp))
        s = cq_fail(CQ_ERR_INVALID_ARG, "video: no frames were pushed; nothing written");
    if (s == CQ_OK && v->mp4) s = cq_mp4_finish(v->mp4);
    if (s == CQ_OK && v->wav_open) {
        s = cq_wav_write_out(&v->wav, v->audio, (int64_t)(v->audio_len / (size_t)v->o.audio_channels),
                             v->o.audio_channels, v->o.audio_rate);
        if (s == CQ_OK) s = cq_outfile_commit(&v->wav);
        v->wav_open = false;
    }
    if (s == CQ_OK && v->frames_tmp) {
        if (rename(v->frames_tmp, v->frames_dir) != 0)
            s = cq_fail(CQ_ERR_IO, "cannot put the frame directory '%s' in place: %s", v->frames_dir,
                        errno == ENOTEMPTY || errno == EEXIST ? "it is no longer empty" : strerror(errno));
        else {
            cq_free(v->frames_tmp);
            v->frames_tmp = NULL;
        }
    }
    if (s != CQ_OK) {
        /* what was not committed is removed by free (an MP4 committed before a WAV that then failed stays) */
        v->failed = true;
        return s;
    }
    v->finished = true;
    return CQ_OK;
}

void cq_video_out_free(cq_video_out *v) {
    if (!v) return;
    cq_mp4_free(v->mp4);
    if (v->wav_open) cq_outfile_abort(&v->wav);
    remove_frames_tmp(v);
    cq_free((void *)v->o.prompt);
    cq_free((void *)v->o.model);
    cq_free((void *)v->o.preset);
    cq_free(v->mp4_path);
    cq_free(v->frames_dir);
    cq_free(v->wav_path);
    cq_free(v->audio);
    cq_free(v->scratch);
    cq_free(v);
}

const char *cq_video_out_mp4_path(const cq_video_out *v) { return v ? v->mp4_path : NULL; }
const char *cq_video_out_frames_dir(const cq_video_out *v) { return v ? v->frames_dir : NULL; }
const char *cq_video_out_wav_path(const cq_video_out *v) { return v ? v->wav_path : NULL; }
int cq_video_out_frames(const cq_video_out *v) { return v ? v->n_frames : 0; }
uint64_t cq_video_out_audio_frames(const cq_video_out *v) { return v ? v->n_audio : 0; }

const char *cq_video_out_mux_hint(const cq_video_out *v, const char *mp4, char *buf, size_t cap) {
    if (!buf || !cap) return "";
    buf[0] = '\0';
    if (!v || !v->frames_dir) return buf;
    char audio[4200] = "";
    if (v->wav_path) snprintf(audio, sizeof audio, " -i '%s' -c:a aac -b:a %dk", v->wav_path, 96 * v->o.audio_channels);
    /* pad to even sides: yuv420p halves the chroma */
    snprintf(buf, cap,
             "ffmpeg -framerate %d/%d -i '%s/frame_%%05d.png'%s -c:v libx264 -crf 18 -pix_fmt yuv420p "
             "-vf 'pad=ceil(iw/2)*2:ceil(ih/2)*2' '%s'",
             v->o.fps_num, v->o.fps_den, v->frames_dir, audio, mp4 ? mp4 : "out.mp4");
    return buf;
}
