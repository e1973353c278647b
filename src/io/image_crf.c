/*
 * image_crf.c — one picture through libx264 and back (image_crf.h), the
 * FFmpeg calls PyAV makes for diffusers' apply_image_conditioning_crf: the
 * encoder's context as PyAV's add_stream leaves it (yuv420p, 1 fps, its
 * bit-rate fields; a global header, as for an MP4), the packets handed to
 * the decoder directly (the MP4 the reference writes in memory carries them
 * unchanged), both conversions by sws_scale with SWS_BILINEAR and no
 * colour-space details set.
 */
#include "io/image_crf.h"

#include <string.h>

#include "base/base.h"

#define WHO "image crf"

/* CRF 0: the reference returns the picture itself, not cropped */
static cq_status plain_copy(const uint8_t *rgb, int w, int h, uint8_t **out, int *ow, int *oh) {
    const int cw = w, ch = h;
    uint8_t *o = cq_mallocn((size_t)cw * ch, 3);
    if (!o) return CQ_ERR_NOMEM;
    for (int y = 0; y < ch; y++) memcpy(o + (size_t)y * cw * 3, rgb + (size_t)y * w * 3, (size_t)cw * 3);
    *out = o, *ow = cw, *oh = ch;
    return CQ_OK;
}

#ifndef CQ_HAVE_FFMPEG

bool cq_image_crf_available(void) { return false; }

cq_status cq_image_crf(const uint8_t *rgb, int w, int h, int crf, uint8_t **out, int *ow, int *oh) {
    *out = NULL;
    if (!rgb || w < 2 || h < 2 || crf < 0 || crf > 51)
        return cq_fail(CQ_ERR_INVALID_ARG, WHO ": a %dx%d picture at CRF %d", w, h, crf);
    if (crf == 0) return plain_copy(rgb, w, h, out, ow, oh);
    return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": this cortiq was built without FFmpeg, so the first frame cannot be "
                   "re-compressed at CRF %d (CRF 0 uses it as given)", crf);
}

#else

#include <libavcodec/avcodec.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>

bool cq_image_crf_available(void) {
    return avcodec_find_encoder_by_name("libx264") && avcodec_find_decoder(AV_CODEC_ID_H264);
}

static cq_status av_fail(int r, const char *what) {
    char msg[AV_ERROR_MAX_STRING_SIZE] = {0};
    av_strerror(r, msg, sizeof msg);
    return cq_fail(r == AVERROR(ENOMEM) ? CQ_ERR_NOMEM : CQ_ERR_INTERNAL, WHO ": %s: %s", what, msg);
}

/* src frame -> dst frame (allocated here) by sws_scale, bilinear, default colour space. */
static cq_status convert(const AVFrame *src, enum AVPixelFormat fmt, AVFrame **dst) {
    *dst = av_frame_alloc();
    if (!*dst) return CQ_ERR_NOMEM;
    (*dst)->format = fmt;
    (*dst)->width = src->width;
    (*dst)->height = src->height;
    int r = av_frame_get_buffer(*dst, 0);
    if (r < 0) return av_fail(r, "a frame");
    struct SwsContext *s = sws_getContext(src->width, src->height, src->format, src->width, src->height, fmt,
                                          SWS_BILINEAR, NULL, NULL, NULL);
    if (!s) return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": libswscale cannot convert at %dx%d", src->width, src->height);
    sws_scale(s, (const uint8_t *const *)src->data, src->linesize, 0, src->height, (*dst)->data, (*dst)->linesize);
    sws_freeContext(s);
    return CQ_OK;
}

/* Every packet the encoder has now into the decoder, and a decoded frame (if any) into *got. */
static cq_status drain(AVCodecContext *enc, AVCodecContext *dec, AVPacket *pkt, AVFrame *got, bool *have) {
    for (;;) {
        int r = avcodec_receive_packet(enc, pkt);
        if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return CQ_OK;
        if (r < 0) return av_fail(r, "encoding");
        r = avcodec_send_packet(dec, pkt);
        av_packet_unref(pkt);
        if (r < 0) return av_fail(r, "decoding");
        if (!*have) {
            r = avcodec_receive_frame(dec, got);
            if (r == 0) *have = true;
            else if (r != AVERROR(EAGAIN)) return av_fail(r, "decoding");
        }
    }
}

cq_status cq_image_crf(const uint8_t *rgb, int w, int h, int crf, uint8_t **out, int *ow, int *oh) {
    *out = NULL;
    if (!rgb || w < 2 || h < 2 || crf < 0 || crf > 51)
        return cq_fail(CQ_ERR_INVALID_ARG, WHO ": a %dx%d picture at CRF %d", w, h, crf);
    if (crf == 0) return plain_copy(rgb, w, h, out, ow, oh);
    const AVCodec *ec = avcodec_find_encoder_by_name("libx264"), *dc = avcodec_find_decoder(AV_CODEC_ID_H264);
    if (!ec || !dc)
        return cq_fail(CQ_ERR_UNSUPPORTED, WHO ": this FFmpeg has no libx264 encoder or H.264 decoder, so the first "
                       "frame cannot be re-compressed at CRF %d (CRF 0 uses it as given)", crf);
    const int cw = w & ~1, ch = h & ~1;
    av_log_set_level(AV_LOG_ERROR); /* libx264's statistics are not news */
    AVCodecContext *enc = avcodec_alloc_context3(ec), *dec = avcodec_alloc_context3(dc);
    AVFrame *in = av_frame_alloc(), *yuv = NULL, *got = av_frame_alloc(), *back = NULL;
    AVPacket *pkt = av_packet_alloc();
    cq_status s = enc && dec && in && got && pkt ? CQ_OK : CQ_ERR_NOMEM;
    int r = 0;
    if (s == CQ_OK) {
        in->format = AV_PIX_FMT_RGB24;
        in->width = cw;
        in->height = ch;
        r = av_frame_get_buffer(in, 0);
        if (r < 0) s = av_fail(r, "a frame");
    }
    if (s == CQ_OK) {
        for (int y = 0; y < ch; y++) memcpy(in->data[0] + (size_t)y * in->linesize[0], rgb + (size_t)y * w * 3,
                                            (size_t)cw * 3);
        s = convert(in, AV_PIX_FMT_YUV420P, &yuv);
    }
    if (s == CQ_OK) {
        /* PyAV's add_stream("libx264", rate=1) in an MP4 */
        enc->pix_fmt = AV_PIX_FMT_YUV420P;
        enc->width = cw;
        enc->height = ch;
        enc->bit_rate = 1024000;
        enc->bit_rate_tolerance = 128000;
        enc->framerate = (AVRational){1, 1};
        enc->time_base = (AVRational){1, 1};
        enc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
        char v[16];
        snprintf(v, sizeof v, "%d", crf);
        av_opt_set(enc->priv_data, "crf", v, 0);
        av_opt_set(enc->priv_data, "preset", "veryfast", 0);
        r = avcodec_open2(enc, ec, NULL);
        if (r < 0) s = av_fail(r, "cannot open libx264");
    }
    if (s == CQ_OK) {
        if (enc->extradata_size > 0) {
            dec->extradata = av_mallocz((size_t)enc->extradata_size + AV_INPUT_BUFFER_PADDING_SIZE);
            if (!dec->extradata) s = CQ_ERR_NOMEM;
            else {
                memcpy(dec->extradata, enc->extradata, (size_t)enc->extradata_size);
                dec->extradata_size = enc->extradata_size;
            }
        }
        if (s == CQ_OK && (r = avcodec_open2(dec, dc, NULL)) < 0) s = av_fail(r, "cannot open the H.264 decoder");
    }
    bool have = false;
    if (s == CQ_OK) {
        yuv->pts = 0;
        r = avcodec_send_frame(enc, yuv);
        if (r < 0) s = av_fail(r, "encoding");
    }
    if (s == CQ_OK) s = drain(enc, dec, pkt, got, &have);
    if (s == CQ_OK && (r = avcodec_send_frame(enc, NULL)) < 0) s = av_fail(r, "flushing the encoder");
    if (s == CQ_OK) s = drain(enc, dec, pkt, got, &have);
    if (s == CQ_OK && !have) {
        r = avcodec_send_packet(dec, NULL);
        if (r >= 0) r = avcodec_receive_frame(dec, got);
        if (r == 0) have = true;
    }
    if (s == CQ_OK && !have) s = cq_fail(CQ_ERR_INTERNAL, WHO ": the decoder gave no frame");
    if (s == CQ_OK && (got->width != cw || got->height != ch))
        s = cq_fail(CQ_ERR_INTERNAL, WHO ": the decoder gave %dx%d, not %dx%d", got->width, got->height, cw, ch);
    if (s == CQ_OK) s = convert(got, AV_PIX_FMT_RGB24, &back);
    if (s == CQ_OK) {
        uint8_t *o = cq_mallocn((size_t)cw * ch, 3);
        if (!o) s = CQ_ERR_NOMEM;
        else {
            for (int y = 0; y < ch; y++)
                memcpy(o + (size_t)y * cw * 3, back->data[0] + (size_t)y * back->linesize[0], (size_t)cw * 3);
            *out = o, *ow = cw, *oh = ch;
        }
    }
    av_frame_free(&in);
    av_frame_free(&yuv);
    av_frame_free(&got);
    av_frame_free(&back);
    av_packet_free(&pkt);
    avcodec_free_context(&enc);
    avcodec_free_context(&dec);
    return s;
}

#endif
