/*
 * wav.c — 16-bit PCM WAV writing (see wav.h): a 44-byte canonical header
 * (fmt chunk of 16 bytes, PCM format 1) whose two sizes are patched once
 * the sample count is known.
 */
#include "io/wav.h"

#include <math.h>
#include <string.h>

#include "base/base.h"

#define WAV_HEADER 44u
/* RIFF sizes are 32-bit: the data chunk may hold at most this many bytes */
#define WAV_DATA_MAX (UINT64_C(0xFFFFFFFF) - WAV_HEADER)

int16_t cq_wav_sample(float v) {
    if (v > 1.0f) v = 1.0f;
    if (v < -1.0f) v = -1.0f;
    return (int16_t)lrintf(v * 32767.0f);
}

static void put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void header(uint8_t h[WAV_HEADER], int channels, int rate, uint32_t data_bytes) {
    memcpy(h, "RIFF", 4);
    put32(h + 4, 36u + data_bytes);
    memcpy(h + 8, "WAVEfmt ", 8);
    put32(h + 16, 16);
    put16(h + 20, 1); /* PCM */
    put16(h + 22, (uint16_t)channels);
    put32(h + 24, (uint32_t)rate);
    put32(h + 28, (uint32_t)rate * (uint32_t)channels * 2u);
    put16(h + 32, (uint16_t)(channels * 2));
    put16(h + 34, 16);
    memcpy(h + 36, "data", 4);
    put32(h + 40, data_bytes);
}

static cq_status check_format(int channels, int rate) {
    if (channels < 1 || channels > CQ_WAV_MAX_CHANNELS)
        return cq_fail(CQ_ERR_INVALID_ARG, "wav: %d channels (1..%d)", channels, CQ_WAV_MAX_CHANNELS);
    if (rate < 1 || rate > CQ_WAV_MAX_RATE)
        return cq_fail(CQ_ERR_INVALID_ARG, "wav: a rate of %d Hz (1..%d)", rate, CQ_WAV_MAX_RATE);
    return CQ_OK;
}

cq_status cq_wav_writer_open(cq_wav_writer *w, const char *path, int channels, int rate, uint64_t size_hint_frames) {
    if (!w) return cq_fail(CQ_ERR_INVALID_ARG, "wav: no writer");
    memset(w, 0, sizeof *w);
    w->out.fd = -1;
    w->out.slot = -1;
    CQ_TRY(check_format(channels, rate));
    if (size_hint_frames > WAV_DATA_MAX / (2u * (uint64_t)channels))
        return cq_fail(CQ_ERR_INVALID_ARG, "wav: %llu frames of %d channels are more than a WAV file holds (4 GiB)",
                       (unsigned long long)size_hint_frames, channels);
    const cq_outfile_opts oo = {.format = "WAV",
                                .size_hint = size_hint_frames ? WAV_HEADER + size_hint_frames * 2u * (uint64_t)channels
                                                              : 0};
    CQ_TRY(cq_outfile_open(path, &oo, &w->out));
    w->channels = channels;
    w->rate = rate;
    uint8_t h[WAV_HEADER];
    header(h, channels, rate, 0);
    cq_status s = cq_outfile_write(&w->out, h, sizeof h);
    if (s != CQ_OK) cq_outfile_abort(&w->out);
    return s;
}

cq_status cq_wav_writer_push(cq_wav_writer *w, const float *samples, size_t n_frames) {
    if (!w || w->out.fd < 0) return cq_fail(CQ_ERR_INVALID_ARG, "wav: the writer is not open");
    if (n_frames && !samples) return cq_fail(CQ_ERR_INVALID_ARG, "wav: no samples");
    const uint64_t per = 2u * (uint64_t)w->channels;
    if (n_frames > (WAV_DATA_MAX / per) - w->frames)
        return cq_fail(CQ_ERR_INVALID_ARG, "wav: '%s' would pass 4 GiB, the most a WAV file holds", w->out.target);
    const size_t total = n_frames * (size_t)w->channels;
    for (size_t i = 0; i < total;) {
        const size_t k = CQ_MIN(total - i, CQ_ARRAY_LEN(w->buf));
        for (size_t j = 0; j < k; j++) {
            const float v = samples[i + j];
            if (isnan(v))
                return cq_fail(CQ_ERR_NUMERIC, "wav: sample %zu of channel %zu is NaN",
                               (size_t)(w->frames + (i + j) / (size_t)w->channels), (i + j) % (size_t)w->channels);
            const int16_t q = cq_wav_sample(v);
            uint8_t *b = (uint8_t *)&w->buf[j];
            b[0] = (uint8_t)((uint16_t)q & 0xFF); /* little-endian on any host */
            b[1] = (uint8_t)((uint16_t)q >> 8);
        }
        CQ_TRY(cq_outfile_write(&w->out, w->buf, k * 2));
        i += k;
    }
    w->frames += n_frames;
    return CQ_OK;
}

cq_status cq_wav_writer_finish(cq_wav_writer *w) {
    if (!w || w->out.fd < 0) return cq_fail(CQ_ERR_INVALID_ARG, "wav: the writer is not open");
    uint8_t h[WAV_HEADER];
    header(h, w->channels, w->rate, (uint32_t)(w->frames * 2u * (uint64_t)w->channels));
    cq_status s = w->out.to_stdout ? CQ_OK : cq_outfile_pwrite(&w->out, h, sizeof h, 0);
    if (s != CQ_OK) {
        cq_outfile_abort(&w->out);
        return s;
    }
    return cq_outfile_commit(&w->out);
}

void cq_wav_writer_abort(cq_wav_writer *w) {
    if (w) cq_outfile_abort(&w->out);
}

cq_status cq_wav_write(const char *path, const float *samples, size_t n_frames, int channels, int rate) {
    cq_wav_writer w;
    CQ_TRY(cq_wav_writer_open(&w, path, channels, rate, n_frames));
    cq_status s = cq_wav_writer_push(&w, samples, n_frames);
    if (s == CQ_OK) return cq_wav_writer_finish(&w);
    cq_wav_writer_abort(&w);
    return s;
}
