/*
 * video_out_mp4.c — the MP4 half of the video writer (video_out_impl.h): the
 * only file that touches FFmpeg. Bytes go through an AVIOContext whose write
 * and seek land in a cq_outfile (base/outfile.h), so the MP4 is a temporary
 * beside its target until finish renames it, and a write error is the file
 * system's own (ENOSPC, EDQUOT, EFBIG) naming the target.
 *
 * Video: RGB24 -> yuv420p by libswscale with the BT.709 matrix, limited
 * range (tagged so in the stream), encoded by libx264 (crf, preset) or, when
 * this libavcodec has no libx264, by the native MPEG-4 part 2 encoder at a
 * fixed quantiser. Audio: interleaved f32 -> planar f32 at the encoder's rate
 * by libswresample, into an AVAudioFifo, coded by the native AAC encoder in
 * frames of its frame size; the last frame is sent short (the encoder has
 * AV_CODEC_CAP_SMALL_LAST_FRAME), so the container's edit list trims the
 * stream to the samples pushed.
 */
#include "io/video_out_impl.h"

#include "base/base.h"
#include "base/outfile.h"

#ifndef CQ_HAVE_FFMPEG

bool cq_mp4_available(void) { return false; }
const char *cq_mp4_encoder_name(void) { return NULL; }
cq_status cq_mp4_open(const cq_video_out_opts *o, cq_mp4 **out) {
    (void)o;
    *out = NULL;
    return cq_fail(CQ_ERR_UNSUPPORTED, "this cortiq was built without FFmpeg (CORTIQ_FFMPEG=OFF or not found)");
}
cq_status cq_mp4_push_frame(cq_mp4 *m, const uint8_t *rgb) {
    (void)m, (void)rgb;
    return CQ_ERR_UNSUPPORTED;
}
cq_status cq_mp4_push_audio(cq_mp4 *m, const float *samples, size_t n) {
    (void)m, (void)samples, (void)n;
    return CQ_ERR_UNSUPPORTED;
}
cq_status cq_mp4_finish(cq_mp4 *m) {
    (void)m;
    return CQ_ERR_UNSUPPORTED;
}
void cq_mp4_free(cq_mp4 *m) { (void)m; }

#else

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/audio_fifo.h>
#include <libavutil/channel_layout.h>
#include <libavutil/opt.h>
#include <libswresample/swresample.h>
#include <libswscale/swscale.h>

#define CQ_MP4_IO_BUF 65536

struct cq_mp4 {
    cq_outfile file;
    uint64_t pos, size; /* the AVIO position and the file's length */
    cq_status io_err;   /* the first write error (its message recorded) */
    AVIOContext *io;
    AVFormatContext *fmt;
    AVCodecContext *venc, *aenc;
    AVStream *vst, *ast;
    struct SwsContext *sws;
    SwrContext *swr;
    AVAudioFifo *fifo;
    AVFrame *vframe, *aframe;
    AVPacket *pkt;
    int width, height, channels, in_rate;
    int64_t vpts, apts;
};

static cq_status av_fail(int err, const char *what, const char *path) {
    char buf[AV_ERROR_MAX_STRING_SIZE] = "";
    av_strerror(err, buf, sizeof buf);
    return cq_fail(CQ_ERR_IO, "writing '%s': %s: %s", path, what, buf);
}

/* ---- the AVIO over cq_outfile ---------------------------------------------- */
/* libavformat 61 (FFmpeg 7) made the write callback's buffer const */
#if LIBAVFORMAT_VERSION_MAJOR >= 61
#define CQ_AVIO_CONST const
#else
#define CQ_AVIO_CONST
#endif
static int io_write(void *opaque, CQ_AVIO_CONST uint8_t *buf, int len) {
    cq_mp4 *m = opaque;
    if (m->io_err != CQ_OK) return AVERROR(EIO);
    const cq_status s = cq_outfile_pwrite(&m->file, buf, (size_t)len, m->pos);
    if (s != CQ_OK) {
        m->io_err = s; /* cq_outfile's message says what the file system said */
        return AVERROR(EIO);
    }
    m->pos += (uint64_t)len;
    if (m->pos > m->size) m->size = m->pos;
    return len;
}

static int64_t io_seek(void *opaque, int64_t off, int whence) {
    cq_mp4 *m = opaque;
    int64_t base = 0;
    switch (whence & ~AVSEEK_FORCE) {
    case SEEK_SET: base = 0; break;
    case SEEK_CUR: base = (int64_t)m->pos; break;
    case SEEK_END: base = (int64_t)m->size; break;
    case AVSEEK_SIZE: return (int64_t)m->size;
    default: return AVERROR(EINVAL);
    }
    if (base + off < 0) return AVERROR(EINVAL);
    m->pos = (uint64_t)(base + off);
    return (int64_t)m->pos;
}

/* ---- encoders ---------------------------------------------------------------- */
static const AVCodec *video_encoder(void) {
    const AVCodec *c = avcodec_find_encoder_by_name("libx264");
    return c ? c : avcodec_find_encoder(AV_CODEC_ID_MPEG4);
}

bool cq_mp4_available(void) { return video_encoder() && avcodec_find_encoder(AV_CODEC_ID_AAC); }

const char *cq_mp4_encoder_name(void) {
    const AVCodec *c = video_encoder();
    return c ? c->name : NULL;
}

/* The AAC rate for `rate`: itself when the encoder lists it, else 48 kHz. */
static int aac_rate(const AVCodec *c, int rate) {
    if (!c->supported_samplerates) return rate;
    for (const int *r = c->supported_samplerates; *r; r++)
        if (*r == rate) return rate;
    return 48000;
}

/* Send `frame` (NULL: flush) to `enc` and write every packet it gives. */
static cq_status encode(cq_mp4 *m, AVCodecContext *enc, AVStream *st, AVFrame *frame) {
    int r = avcodec_send_frame(enc, frame);
    if (r < 0) return av_fail(r, "the encoder refused a frame", m->file.target);
    for (;;) {
        r = avcodec_receive_packet(enc, m->pkt);
        if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return CQ_OK;
        if (r < 0) return av_fail(r, "encoding", m->file.target);
        av_packet_rescale_ts(m->pkt, enc->time_base, st->time_base);
        m->pkt->stream_index = st->index;
        r = av_interleaved_write_frame(m->fmt, m->pkt); /* takes the packet's reference */
        if (m->io_err != CQ_OK) return m->io_err;
        if (r < 0) return av_fail(r, "muxing", m->file.target);
    }
}

static cq_status open_video(cq_mp4 *m, const cq_video_out_opts *o) {
    const AVCodec *c = o->mpeg4 ? avcodec_find_encoder(AV_CODEC_ID_MPEG4) : video_encoder();
    if (!c) return cq_fail(CQ_ERR_UNSUPPORTED, "this FFmpeg has neither libx264 nor an MPEG-4 encoder");
    m->venc = avcodec_alloc_context3(c);
    if (!m->venc) return CQ_ERR_NOMEM;
    AVCodecContext *e = m->venc;
    e->width = o->width;
    e->height = o->height;
    e->pix_fmt = AV_PIX_FMT_YUV420P;
    e->time_base = (AVRational){o->fps_den, o->fps_num};
    e->framerate = (AVRational){o->fps_num, o->fps_den};
    e->sample_aspect_ratio = (AVRational){1, 1};
    e->color_range = AVCOL_RANGE_MPEG;
    e->colorspace = AVCOL_SPC_BT709;
    e->color_primaries = AVCOL_PRI_BT709;
    e->color_trc = AVCOL_TRC_BT709;
    e->gop_size = 2 * (o->fps_num / o->fps_den + 1);
    if (m->fmt->oformat->flags & AVFMT_GLOBALHEADER) e->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    if (strcmp(c->name, "libx264") == 0) {
        char crf[16];
        snprintf(crf, sizeof crf, "%d", o->crf < 0 ? 18 : o->crf);
        av_opt_set(e->priv_data, "crf", crf, 0);
        av_opt_set(e->priv_data, "preset", o->preset ? o->preset : "medium", 0);
    } else {
        /* MPEG-4 part 2: a fixed quantiser, 2 (of 1..31) keeps a generated clip close to its frames */
        e->flags |= AV_CODEC_FLAG_QSCALE;
        e->global_quality = FF_QP2LAMBDA * 2;
    }
    int r = avcodec_open2(e, c, NULL);
    if (r < 0) return av_fail(r, "cannot open the video encoder", o->path);
    m->vst = avformat_new_stream(m->fmt, NULL);
    if (!m->vst) return CQ_ERR_NOMEM;
    m->vst->time_base = e->time_base;
    m->vst->avg_frame_rate = e->framerate;
    r = avcodec_parameters_from_context(m->vst->codecpar, e);
    if (r < 0) return av_fail(r, "video stream parameters", o->path);

    m->sws = sws_getContext(o->width, o->height, AV_PIX_FMT_RGB24, o->width, o->height, AV_PIX_FMT_YUV420P,
                            SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INP, NULL, NULL, NULL);
    if (!m->sws) return cq_fail(CQ_ERR_UNSUPPORTED, "libswscale cannot convert RGB24 to yuv420p at %dx%d", o->width,
                                o->height);
    /* BT.709 coefficients, full-range RGB in, limited-range YUV out */
    const int *k = sws_getCoefficients(SWS_CS_ITU709);
    sws_setColorspaceDetails(m->sws, k, 1, k, 0, 0, 1 << 16, 1 << 16);
    m->vframe = av_frame_alloc();
    if (!m->vframe) return CQ_ERR_NOMEM;
    m->vframe->format = AV_PIX_FMT_YUV420P;
    m->vframe->width = o->width;
    m->vframe->height = o->height;
    m->vframe->color_range = AVCOL_RANGE_MPEG;
    m->vframe->colorspace = AVCOL_SPC_BT709;
    r = av_frame_get_buffer(m->vframe, 0);
    if (r < 0) return CQ_ERR_NOMEM;
    return CQ_OK;
}

static cq_status open_audio(cq_mp4 *m, const cq_video_out_opts *o) {
    const AVCodec *c = avcodec_find_encoder(AV_CODEC_ID_AAC);
    if (!c) return cq_fail(CQ_ERR_UNSUPPORTED, "this FFmpeg has no AAC encoder");
    m->aenc = avcodec_alloc_context3(c);
    if (!m->aenc) return CQ_ERR_NOMEM;
    AVCodecContext *e = m->aenc;
    e->sample_fmt = AV_SAMPLE_FMT_FLTP;
    e->sample_rate = aac_rate(c, o->audio_rate);
    av_channel_layout_default(&e->ch_layout, o->audio_channels);
    e->bit_rate = 96000 * o->audio_channels;
    e->time_base = (AVRational){1, e->sample_rate};
    if (m->fmt->oformat->flags & AVFMT_GLOBALHEADER) e->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    int r = avcodec_open2(e, c, NULL);
    if (r < 0) return av_fail(r, "cannot open the AAC encoder", o->path);
    m->ast = avformat_new_stream(m->fmt, NULL);
    if (!m->ast) return CQ_ERR_NOMEM;
    m->ast->time_base = e->time_base;
    r = avcodec_parameters_from_context(m->ast->codecpar, e);
    if (r < 0) return av_fail(r, "audio stream parameters", o->path);

    AVChannelLayout in;
    av_channel_layout_default(&in, o->audio_channels);
    r = swr_alloc_set_opts2(&m->swr, &e->ch_layout, AV_SAMPLE_FMT_FLTP, e->sample_rate, &in, AV_SAMPLE_FMT_FLT,
                            o->audio_rate, 0, NULL);
    av_channel_layout_uninit(&in);
    if (r < 0 || !m->swr || swr_init(m->swr) < 0)
        return cq_fail(CQ_ERR_UNSUPPORTED, "libswresample cannot convert %d Hz to %d Hz", o->audio_rate,
                       e->sample_rate);
    m->fifo = av_audio_fifo_alloc(AV_SAMPLE_FMT_FLTP, o->audio_channels, e->frame_size > 0 ? e->frame_size : 1024);
    m->aframe = av_frame_alloc();
    if (!m->fifo || !m->aframe) return CQ_ERR_NOMEM;
    return CQ_OK;
}

cq_status cq_mp4_open(const cq_video_out_opts *o, cq_mp4 **out) {
    *out = NULL;
    cq_mp4 *m = cq_calloc(1, sizeof *m);
    if (!m) return CQ_ERR_NOMEM;
    m->file.fd = -1;
    m->width = o->width;
    m->height = o->height;
    m->channels = o->audio_channels;
    m->in_rate = o->audio_rate;
    const cq_outfile_opts fo = {.format = "MP4"};
    cq_status s = cq_outfile_open(o->path, &fo, &m->file);
    if (s != CQ_OK) {
        cq_free(m);
        return s;
    }
    av_log_set_level(AV_LOG_ERROR);
    int r = avformat_alloc_output_context2(&m->fmt, NULL, "mp4", NULL);
    if (r < 0 || !m->fmt) s = av_fail(r, "no MP4 muxer in this FFmpeg", o->path);
    uint8_t *buf = s == CQ_OK ? av_malloc(CQ_MP4_IO_BUF) : NULL;
    if (s == CQ_OK && !buf) s = CQ_ERR_NOMEM;
    if (s == CQ_OK) {
        m->io = avio_alloc_context(buf, CQ_MP4_IO_BUF, 1, m, NULL, io_write, io_seek);
        if (!m->io) {
            av_free(buf);
            s = CQ_ERR_NOMEM;
        } else {
            m->fmt->pb = m->io;
            m->fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
        }
    }
    if (s == CQ_OK) s = open_video(m, o);
    if (s == CQ_OK && o->audio_rate > 0) s = open_audio(m, o);
    if (s == CQ_OK && !(m->pkt = av_packet_alloc())) s = CQ_ERR_NOMEM;
    if (s == CQ_OK) {
        AVDictionary **md = &m->fmt->metadata;
        av_dict_set(md, "title", "cortiq video", 0);
        if (o->prompt) av_dict_set(md, "description", o->prompt, 0);
        char comment[512];
        int k = 0;
        if (o->has_seed) k = snprintf(comment, sizeof comment, "seed %" PRIu64, o->seed);
        if (o->model && k >= 0 && (size_t)k < sizeof comment)
            snprintf(comment + k, sizeof comment - (size_t)k, "%smodel %s", k ? ", " : "", o->model);
        if (o->has_seed || o->model) av_dict_set(md, "comment", comment, 0);
        r = avformat_write_header(m->fmt, NULL);
        if (m->io_err != CQ_OK) s = m->io_err;
        else if (r < 0) s = av_fail(r, "cannot write the MP4 header", o->path);
    }
    if (s != CQ_OK) {
        cq_mp4_free(m);
        return s;
    }
    *out = m;
    return CQ_OK;
}

cq_status cq_mp4_push_frame(cq_mp4 *m, const uint8_t *rgb) {
    int r = av_frame_make_writable(m->vframe);
    if (r < 0) return CQ_ERR_NOMEM;
    const uint8_t *src[1] = {rgb};
    const int stride[1] = {3 * m->width};
    sws_scale(m->sws, src, stride, 0, m->height, m->vframe->data, m->vframe->linesize);
    m->vframe->pts = m->vpts++;
    return encode(m, m->venc, m->vst, m->vframe);
}

/* Encode the fifo's whole frames (all of it, the last one short, when `last`). */
static cq_status drain_fifo(cq_mp4 *m, bool last) {
    const int fs = m->aenc->frame_size > 0 ? m->aenc->frame_size : 1024;
    while (av_audio_fifo_size(m->fifo) >= fs || (last && av_audio_fifo_size(m->fifo) > 0)) {
        const int n = FFMIN(fs, av_audio_fifo_size(m->fifo));
        av_frame_unref(m->aframe);
        m->aframe->nb_samples = n;
        m->aframe->format = AV_SAMPLE_FMT_FLTP;
        m->aframe->sample_rate = m->aenc->sample_rate;
        if (av_channel_layout_copy(&m->aframe->ch_layout, &m->aenc->ch_layout) < 0) return CQ_ERR_NOMEM;
        if (av_frame_get_buffer(m->aframe, 0) < 0) return CQ_ERR_NOMEM;
        if (av_audio_fifo_read(m->fifo, (void **)m->aframe->data, n) != n)
            return cq_fail(CQ_ERR_INTERNAL, "mp4: the audio FIFO lost samples");
        m->aframe->pts = m->apts;
        m->apts += n;
        CQ_TRY(encode(m, m->aenc, m->ast, m->aframe));
    }
    return CQ_OK;
}

/* Resample n input frames (NULL: what swr still holds) into the fifo. */
static cq_status resample(cq_mp4 *m, const float *in, int n) {
    const int cap = swr_get_out_samples(m->swr, n);
    if (cap < 0) return cq_fail(CQ_ERR_INTERNAL, "mp4: libswresample failed");
    if (cap == 0) return CQ_OK;
    uint8_t **planes = NULL;
    if (av_samples_alloc_array_and_samples(&planes, NULL, m->channels, cap, AV_SAMPLE_FMT_FLTP, 0) < 0)
        return CQ_ERR_NOMEM;
    const uint8_t *src[1] = {(const uint8_t *)in};
    const int got = swr_convert(m->swr, planes, cap, in ? src : NULL, in ? n : 0);
    cq_status s = CQ_OK;
    if (got < 0) s = cq_fail(CQ_ERR_INTERNAL, "mp4: libswresample failed");
    else if (got > 0 && av_audio_fifo_write(m->fifo, (void **)planes, got) != got) s = CQ_ERR_NOMEM;
    av_freep(&planes[0]);
    av_freep(&planes);
    return s;
}

cq_status cq_mp4_push_audio(cq_mp4 *m, const float *samples, size_t n) {
    if (!m->aenc) return cq_fail(CQ_ERR_INVALID_ARG, "mp4: sound pushed to a video opened without sound");
    /* in pieces of at most 64k frames: swr's counts are ints */
    while (n) {
        const int k = (int)(n > 65536 ? 65536 : n);
        CQ_TRY(resample(m, samples, k));
        CQ_TRY(drain_fifo(m, false));
        samples += (size_t)k * (size_t)m->channels;
        n -= (size_t)k;
    }
    return CQ_OK;
}

cq_status cq_mp4_finish(cq_mp4 *m) {
    CQ_TRY(encode(m, m->venc, m->vst, NULL));
    if (m->aenc) {
        CQ_TRY(resample(m, NULL, 0));
        CQ_TRY(drain_fifo(m, true));
        CQ_TRY(encode(m, m->aenc, m->ast, NULL));
    }
    int r = av_write_trailer(m->fmt);
    if (m->io_err != CQ_OK) return m->io_err;
    if (r < 0) return av_fail(r, "cannot write the MP4 trailer", m->file.target);
    avio_flush(m->io);
    if (m->io_err != CQ_OK) return m->io_err;
    if (m->io->error < 0) return av_fail(m->io->error, "flushing", m->file.target);
    return cq_outfile_commit(&m->file);
}

void cq_mp4_free(cq_mp4 *m) {
    if (!m) return;
    if (m->io) {
        av_freep(&m->io->buffer);
        avio_context_free(&m->io);
    }
    if (m->fmt) {
        m->fmt->pb = NULL;
        avformat_free_context(m->fmt);
    }
    avcodec_free_context(&m->venc);
    avcodec_free_context(&m->aenc);
    sws_freeContext(m->sws);
    swr_free(&m->swr);
    if (m->fifo) av_audio_fifo_free(m->fifo);
    av_frame_free(&m->vframe);
    av_frame_free(&m->aframe);
    av_packet_free(&m->pkt);
    cq_outfile_abort(&m->file); /* a no-op once committed */
    cq_free(m);
}

#endif
