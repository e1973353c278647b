/*
 * video_out_impl.h — the MP4 half of the video writer (video_out_mp4.c),
 * which alone touches FFmpeg: built without it, cq_mp4_open says so and
 * video_out.c writes PNG frames and a WAV instead.
 */
#ifndef CQ_IO_VIDEO_OUT_IMPL_H
#define CQ_IO_VIDEO_OUT_IMPL_H

#include "io/video_out.h"

typedef struct cq_mp4 cq_mp4;

bool cq_mp4_available(void);
/* The video encoder an MP4 gets ("libx264", else "mpeg4"); NULL without FFmpeg. */
const char *cq_mp4_encoder_name(void);
/* o->path is the target; o's size, rate, sound and metadata as checked by cq_video_out_open. */
cq_status cq_mp4_open(const cq_video_out_opts *o, cq_mp4 **out);
cq_status cq_mp4_push_frame(cq_mp4 *m, const uint8_t *rgb);
cq_status cq_mp4_push_audio(cq_mp4 *m, const float *samples, size_t n);
/* Flush, write the trailer, commit the file. */
cq_status cq_mp4_finish(cq_mp4 *m);
/* Remove the temporary unless finished; free. */
void cq_mp4_free(cq_mp4 *m);

#endif /* CQ_IO_VIDEO_OUT_IMPL_H */
