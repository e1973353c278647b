/*
 * video_out.h — where a generated clip goes: an MP4 (H.264 video, AAC
 * sound) made through FFmpeg's libraries, and/or a directory of PNG frames
 * and a WAV of the sound. One streaming writer for all of them, so a decoder
 * can hand over frames chunk by chunk and nothing but the compressed stream
 * is held.
 *
 *   cq_video_out *v;
 *   cq_video_out_open(&opts, &v);          every check; temporaries created
 *   cq_video_out_push_frames(v, rgb, n);   n frames of width*height*3 bytes
 *   cq_video_out_push_audio(v, lr, n);     n frames of interleaved floats
 *   cq_video_out_finish(v);                flush, put every file in place
 *   cq_video_out_free(v);                  removes whatever was not finished
 *
 * Promises:
 *  - every output is written under a temporary name beside its target
 *    (base/outfile.h for the MP4, the WAV and each PNG; the frame directory
 *    is a temporary directory) and renamed only by finish, after the last
 *    byte is out; a failure, an interrupt (the library's cancellation flag,
 *    polled by every push and by finish) or free before finish leaves
 *    nothing behind and the old target as it was;
 *  - every FFmpeg call is checked; a write error (a full disk, a quota, a
 *    file size limit) is reported as the file system said it, naming the
 *    target;
 *  - the MP4: H.264 by libx264 (MPEG-4 part 2, qscale 2, where libx264 is missing) in yuv420p (limited range, BT.709 matrix,
 *    tagged so), constant rate factor `crf` (default 18), x264 preset
 *    `preset` (default "medium"); the sound resampled (libswresample) to the
 *    AAC encoder's rate (the pushed rate when AAC has it, else 48 kHz) and
 *    coded by libavcodec's native AAC at 96 kb/s per channel; both muxed
 *    by libavformat, interleaved by time whatever order they are pushed in
 *    (the compressed packets are held until both streams have some). The
 *    container carries the prompt (description), "seed S, model M"
 *    (comment) and the title "cortiq video";
 *  - sizes: yuv420p halves the chroma, so an MP4 needs even width and
 *    height; an odd side is refused at open, before anything is written
 *    (the PNG frames and the WAV take any size);
 *  - built without FFmpeg (CORTIQ_FFMPEG=OFF, or not found), asking for an
 *    MP4 writes what can be written instead: the PNG frames into
 *    "<name>_frames/" and the sound into "<name>.wav" beside it (unless
 *    frames_dir / wav_path name others); cq_video_out_mux_hint gives the
 *    ffmpeg command that makes the MP4 from them.
 * A frame directory must not exist yet, or be empty: the writer replaces
 * only an empty directory. Frames are named frame_00000.png, ... (0-based,
 * ffmpeg's image2 default; at most 99999); the first carries the prompt, seed and model as text
 * chunks.
 */
#ifndef CQ_IO_VIDEO_OUT_H
#define CQ_IO_VIDEO_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cortiq.h"

#define CQ_VIDEO_MAX_FRAMES 99999
#define CQ_VIDEO_MAX_SIDE 16384
#define CQ_VIDEO_MAX_FPS 240

typedef struct cq_video_out_opts {
    const char *path;       /* the MP4 to write; NULL: none */
    const char *frames_dir; /* a directory of PNG frames; NULL: none (or derived, see above) */
    const char *wav_path;   /* a WAV of the sound; NULL: none (or derived) */
    int width, height;      /* pixels, 1..CQ_VIDEO_MAX_SIDE (even for an MP4) */
    int fps_num, fps_den;   /* the frame rate as a fraction, num/den in (0, CQ_VIDEO_MAX_FPS] */
    int audio_rate;         /* Hz of the pushed sound, 0: no sound */
    int audio_channels;     /* 1 or 2 */
    int frames_hint;        /* frames expected, 0: unknown (checked against CQ_VIDEO_MAX_FRAMES) */
    const char *prompt;     /* metadata; NULL: none */
    const char *model;      /* metadata; NULL: none */
    uint64_t seed;
    bool has_seed;
    int crf;                /* 0..51, -1: 18 */
    const char *preset;     /* x264 preset, NULL: "medium" */
    bool mpeg4;             /* MPEG-4 part 2 (libavcodec's mpeg4) even where libx264 is present */
} cq_video_out_opts;

typedef struct cq_video_out cq_video_out;

/* Defaults: no outputs, 24 fps, stereo, crf 18. */
void cq_video_out_opts_init(cq_video_out_opts *o);
/* Whether this build writes MP4 files (built with FFmpeg, an H.264 or MPEG-4
 * encoder and AAC present), and which video encoder it uses ("libx264", or
 * "mpeg4" where this libavcodec lacks libx264; NULL without FFmpeg). */
bool cq_video_out_has_mp4(void);
const char *cq_video_out_encoder(void);

/* Check everything, create the temporaries. On error *out is NULL and
 * nothing is left behind. */
cq_status cq_video_out_open(const cq_video_out_opts *o, cq_video_out **out);
/* n frames, each height rows of width RGB triples (8 bits), back to back. */
cq_status cq_video_out_push_frames(cq_video_out *v, const uint8_t *rgb, int n);
/* n frames of audio_channels interleaved floats in [-1, 1] (clamped; NaN is
 * refused) at audio_rate. */
cq_status cq_video_out_push_audio(cq_video_out *v, const float *samples, size_t n);
/* Flush and put every output in place. After a failure nothing is left. */
cq_status cq_video_out_finish(cq_video_out *v);
/* Remove what was not finished and free v (NULL is fine). */
void cq_video_out_free(cq_video_out *v);

/* What it writes (NULL for none): the MP4, the frame directory, the WAV. */
const char *cq_video_out_mp4_path(const cq_video_out *v);
const char *cq_video_out_frames_dir(const cq_video_out *v);
const char *cq_video_out_wav_path(const cq_video_out *v);
/* Frames and sound frames pushed so far. */
int cq_video_out_frames(const cq_video_out *v);
uint64_t cq_video_out_audio_frames(const cq_video_out *v);
/* The ffmpeg command that muxes the frame directory and the WAV into `mp4`
 * ("" when there is no frame directory). */
const char *cq_video_out_mux_hint(const cq_video_out *v, const char *mp4, char *buf, size_t cap);

#endif /* CQ_IO_VIDEO_OUT_H */
