/*
 * wav_write.h — the soundtrack's last mile: interleaved float samples to a
 * 16-bit PCM WAV file (RIFF, WAVE_FORMAT_PCM), written through cq_outfile
 * (base/outfile.h) like every file the user names: only a regular file (or
 * "-", standard output) is written, through a temporary renamed over it, so
 * nothing but a file is replaced and a reader never sees half a file.
 *
 * Sample values: s = round_half_even(clamp(v, -1, 1) * 32767) (LTX's WAV:
 * clamp, times 32767; rounded to the nearest integer rather than truncated),
 * so -1 -> -32767, 0 -> 0, 1 -> 32767. NaN has no sample value:
 * CQ_ERR_NUMERIC, and nothing is written.
 */
#ifndef CQ_PIPELINES_WAV_WRITE_H
#define CQ_PIPELINES_WAV_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "cortiq.h"

#define CQ_WAV_MAX_CHANNELS 16
#define CQ_WAV_MAX_RATE 768000

/* One float sample as the file stores it (see above). */
int16_t cq_wav_quantize(float v);

/* Write samples [n_frames][channels] (interleaved) at `rate` Hz to path. The data must fit a RIFF file
 * (under 4 GiB). */
cq_status cq_wav_write(const char *path, const float *samples, int64_t n_frames, int channels, int rate);
/* The same into an outfile the caller opened (before its work) and commits. */
struct cq_outfile;
cq_status cq_wav_write_out(struct cq_outfile *f, const float *samples, int64_t n_frames, int channels, int rate);

/* A 16-bit PCM WAV read back (tests, tools): samples [n_frames][channels]. */
typedef struct cq_wav16 {
    int channels, rate;
    int64_t n_frames;
    int16_t *samples;
} cq_wav16;
void cq_wav16_free(cq_wav16 *w);
/* Parse a RIFF/WAVE file of 16-bit PCM (chunks other than fmt and data skipped); rejects truncated or
 * inconsistent files and other encodings with a message. */
cq_status cq_wav_read_mem(const uint8_t *data, size_t len, cq_wav16 *out);
cq_status cq_wav_read(const char *path, cq_wav16 *out);

#endif /* CQ_PIPELINES_WAV_WRITE_H */
