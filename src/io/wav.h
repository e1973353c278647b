/*
 * wav.h — 16-bit PCM WAV files (RIFF/WAVE, little-endian), the form the
 * LTX-2 reference writes its sound in: sample = round(clamp(v, -1, 1)·32767).
 *
 * Written through cq_outfile (base/outfile.h): a temporary beside the target,
 * renamed over it once the whole file is out, so a reader never sees half a
 * file. Two ways in:
 *  - cq_wav_write: a whole buffer of interleaved floats, in one call;
 *  - cq_wav_writer: open (every check, nothing written but the temporary),
 *    push blocks as they come, finish (sizes patched into the header,
 *    committed) or abort (nothing left).
 * Limits: 1..8 channels, 1..768000 Hz, at most 4 GiB of samples (the RIFF
 * sizes are 32-bit). NaN is refused (CQ_ERR_NUMERIC); ±Inf clamps.
 */
#ifndef CQ_IO_WAV_H
#define CQ_IO_WAV_H

#include <stddef.h>
#include <stdint.h>

#include "base/outfile.h"
#include "cortiq.h"

#define CQ_WAV_MAX_CHANNELS 8
#define CQ_WAV_MAX_RATE 768000

/* One float in [-1, 1] as the 16-bit sample the file holds. */
int16_t cq_wav_sample(float v);

/* Write n_frames frames of `channels` interleaved floats at `rate` Hz to path. */
cq_status cq_wav_write(const char *path, const float *samples, size_t n_frames, int channels, int rate);

typedef struct cq_wav_writer {
    cq_outfile out;
    int channels, rate;
    uint64_t frames;  /* written so far */
    int16_t buf[4096];
} cq_wav_writer;

/* Check the target and the format, create the temporary, write a header with
 * placeholder sizes. size_hint_frames (0: unknown) lets the free space be
 * checked now. On error *w is closed (abort is a no-op on it). */
cq_status cq_wav_writer_open(cq_wav_writer *w, const char *path, int channels, int rate, uint64_t size_hint_frames);
/* Append n_frames interleaved frames. */
cq_status cq_wav_writer_push(cq_wav_writer *w, const float *samples, size_t n_frames);
/* Patch the sizes and put the file in place. On failure nothing is left. */
cq_status cq_wav_writer_finish(cq_wav_writer *w);
/* Remove the temporary (safe on a zeroed, finished or aborted writer). */
void cq_wav_writer_abort(cq_wav_writer *w);

#endif /* CQ_IO_WAV_H */
