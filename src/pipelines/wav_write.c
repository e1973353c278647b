/*
 * wav_write.c — 16-bit PCM WAV files (wav_write.h): the 44-byte canonical
 * header (RIFF, fmt of 16 bytes, data), little-endian, then the samples in
 * blocks; and a validating reader.
 */
#include <math.h>
#include <string.h>

#include "base/base.h"
#include "base/outfile.h"
#include "format/file_read.h"
#include "pipelines/wav_write.h"

int16_t cq_wav_quantize(float v) {
    const float c = v < -1.0f ? -1.0f : v > 1.0f ? 1.0f : v;
    return (int16_t)lrintf(c * 32767.0f);
}

static void le16(uint8_t *p, uint32_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }
static void le32(uint8_t *p, uint32_t v) { le16(p, v & 0xffff), le16(p + 2, v >> 16); }
static uint32_t rd16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t rd32(const uint8_t *p) { return rd16(p) | rd16(p + 2) << 16; }

static cq_status check_args(const float *samples, int64_t n_frames, int channels, int rate, uint32_t *data_bytes) {
    if (!samples && n_frames) return cq_fail(CQ_ERR_INVALID_ARG, "wav: no samples");
    if (channels < 1 || channels > CQ_WAV_MAX_CHANNELS)
        return cq_fail(CQ_ERR_INVALID_ARG, "wav: %d channels (1 to %d)", channels, CQ_WAV_MAX_CHANNELS);
    if (rate < 1 || rate > CQ_WAV_MAX_RATE)
        return cq_fail(CQ_ERR_INVALID_ARG, "wav: sample rate %d Hz (1 to %d)", rate, CQ_WAV_MAX_RATE);
    if (n_frames < 0 || (uint64_t)n_frames * (uint64_t)channels * 2u > UINT32_MAX - 36u)
        return cq_fail(CQ_ERR_INVALID_ARG, "wav: %lld frames of %d channels do not fit a RIFF file (4 GiB)",
                       (long long)n_frames, channels);
    const int64_t n = n_frames * channels;
    for (int64_t i = 0; i < n; i++)
        if (isnan(samples[i]))
            return cq_fail(CQ_ERR_NUMERIC, "wav: sample %lld (frame %lld, channel %d) is NaN", (long long)i,
                           (long long)(i / channels), (int)(i % channels));
    *data_bytes = (uint32_t)(n * 2);
    return CQ_OK;
}

cq_status cq_wav_write_out(cq_outfile *f, const float *samples, int64_t n_frames, int channels, int rate) {
    uint32_t data;
    CQ_TRY(check_args(samples, n_frames, channels, rate, &data));
    uint8_t h[44];
    memcpy(h, "RIFF", 4);
    le32(h + 4, 36u + data);
    memcpy(h + 8, "WAVEfmt ", 8);
    le32(h + 16, 16);                                    /* fmt chunk size */
    le16(h + 20, 1);                                     /* WAVE_FORMAT_PCM */
    le16(h + 22, (uint32_t)channels);
    le32(h + 24, (uint32_t)rate);
    le32(h + 28, (uint32_t)rate * (uint32_t)channels * 2u); /* bytes per second */
    le16(h + 32, (uint32_t)channels * 2u);               /* block align */
    le16(h + 34, 16);                                    /* bits per sample */
    memcpy(h + 36, "data", 4);
    le32(h + 40, data);
    CQ_TRY(cq_outfile_write(f, h, sizeof h));
    uint8_t buf[8192];
    const int64_t n = n_frames * channels;
    for (int64_t i = 0; i < n;) {
        size_t k = 0;
        for (; i < n && k + 2 <= sizeof buf; i++, k += 2) le16(buf + k, (uint16_t)cq_wav_quantize(samples[i]));
        CQ_TRY(cq_outfile_write(f, buf, k));
    }
    return CQ_OK;
}

cq_status cq_wav_write(const char *path, const float *samples, int64_t n_frames, int channels, int rate) {
    if (!path || !*path) return cq_fail(CQ_ERR_INVALID_ARG, "wav: no path");
    uint32_t data;
    CQ_TRY(check_args(samples, n_frames, channels, rate, &data)); /* before anything is created */
    cq_outfile f;
    const cq_outfile_opts o = {.format = "WAV", .allow_stdout = true, .size_hint = 44u + (uint64_t)data};
    CQ_TRY(cq_outfile_open(path, &o, &f));
    cq_status s = cq_wav_write_out(&f, samples, n_frames, channels, rate);
    if (s == CQ_OK) return cq_outfile_commit(&f);
    cq_outfile_abort(&f);
    return s;
}

void cq_wav16_free(cq_wav16 *w) {
    if (!w) return;
    cq_free(w->samples);
    memset(w, 0, sizeof *w);
}

cq_status cq_wav_read_mem(const uint8_t *d, size_t len, cq_wav16 *out) {
    memset(out, 0, sizeof *out);
    if (!d || len < 12 || memcmp(d, "RIFF", 4) != 0 || memcmp(d + 8, "WAVE", 4) != 0)
        return cq_fail(CQ_ERR_PARSE, "wav: not a RIFF/WAVE file");
    if ((uint64_t)rd32(d + 4) + 8u > len) return cq_fail(CQ_ERR_PARSE, "wav: truncated (the RIFF size is %u bytes)",
                                                       (unsigned)rd32(d + 4));
    bool have_fmt = false;
    size_t at = 12;
    while (at + 8 <= len) {
        const uint32_t sz = rd32(d + at + 4);
        if ((uint64_t)sz > len - at - 8) return cq_fail(CQ_ERR_PARSE, "wav: chunk at byte %zu runs past the end", at);
        const uint8_t *p = d + at + 8;
        if (!memcmp(d + at, "fmt ", 4)) {
            if (sz < 16) return cq_fail(CQ_ERR_PARSE, "wav: fmt chunk of %u bytes", (unsigned)sz);
            if (rd16(p) != 1 || rd16(p + 14) != 16)
                return cq_fail(CQ_ERR_UNSUPPORTED, "wav: format %u with %u bits; only 16-bit PCM is read",
                               (unsigned)rd16(p), (unsigned)rd16(p + 14));
            out->channels = (int)rd16(p + 2);
            out->rate = (int)rd32(p + 4);
            if (out->channels < 1 || out->channels > CQ_WAV_MAX_CHANNELS || out->rate < 1 ||
                rd16(p + 12) != 2u * (uint32_t)out->channels || rd32(p + 8) != (uint32_t)out->rate * rd16(p + 12))
                return cq_fail(CQ_ERR_PARSE, "wav: inconsistent fmt chunk (%d channels, %d Hz)", out->channels,
                               out->rate);
            have_fmt = true;
        } else if (!memcmp(d + at, "data", 4)) {
            if (!have_fmt) return cq_fail(CQ_ERR_PARSE, "wav: data chunk before the fmt chunk");
            if (sz % (2u * (uint32_t)out->channels))
                return cq_fail(CQ_ERR_PARSE, "wav: data of %u bytes is not whole frames", (unsigned)sz);
            out->n_frames = sz / (2u * (uint32_t)out->channels);
            out->samples = cq_mallocn(sz / 2 ? sz / 2 : 1, sizeof(int16_t));
            if (!out->samples) return CQ_ERR_NOMEM;
            for (uint32_t i = 0; i < sz / 2; i++) out->samples[i] = (int16_t)(uint16_t)rd16(p + 2 * i);
            return CQ_OK;
        }
        at += 8 + (size_t)sz + (sz & 1u);
    }
    return cq_fail(CQ_ERR_PARSE, "wav: no %s chunk", have_fmt ? "data" : "fmt");
}

cq_status cq_wav_read(const char *path, cq_wav16 *out) {
    uint8_t *buf;
    size_t len;
    CQ_TRY(cq_file_read_all(path, (size_t)UINT32_MAX + 8u, &buf, &len));
    cq_status s = cq_wav_read_mem(buf, len, out);
    cq_free(buf);
    return s;
}
