/*
 * image_read.c — PNG (through the reader of pipelines/png_write.c) and JPEG
 * (libjpeg) input to 8-bit RGB. libjpeg reports errors through its error
 * manager; ours longjmps back to a small function whose locals are not
 * modified after its setjmp, and whatever must survive the jump lives in a
 * struct reached through a pointer (the same discipline as the PNG reader).
 */
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "format/file_read.h"
#include "image/image_read.h"

#ifdef CQ_HAVE_JPEG
#include <jpeglib.h>
#endif

void cq_image8_drop_alpha(cq_image8 *img) {
    if (!img || img->channels != 4 || !img->pixels) return;
    const size_t n = (size_t)img->width * (size_t)img->height;
    for (size_t i = 0; i < n; i++) {
        img->pixels[3 * i + 0] = img->pixels[4 * i + 0];
        img->pixels[3 * i + 1] = img->pixels[4 * i + 1];
        img->pixels[3 * i + 2] = img->pixels[4 * i + 2];
    }
    img->channels = 3; /* the buffer keeps its size; cq_image8_free frees it */
}

/* ---- JPEG --------------------------------------------------------------- */

#ifdef CQ_HAVE_JPEG

bool cq_jpeg_available(void) { return true; }

typedef struct jpeg_err {
    struct jpeg_error_mgr mgr;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX + 32];
    bool truncated; /* the source ran out of bytes */
} jpeg_err;

static void on_jpeg_error(j_common_ptr cinfo) {
    jpeg_err *e = (jpeg_err *)cinfo->err;
    char buf[JMSG_LENGTH_MAX];
    (*cinfo->err->format_message)(cinfo, buf);
    snprintf(e->msg, sizeof e->msg, "%s", buf);
    longjmp(e->jump, 1);
}

static void on_jpeg_message(j_common_ptr cinfo, int level) {
    /* warnings (level -1) on corrupt entropy data: PIL decodes on, so do we;
     * a premature end of data is caught by the source manager instead */
    (void)cinfo;
    (void)level;
}

/* The memory source: at the end of the buffer libjpeg would read a fake EOI
 * and decode on with grey blocks; PIL fails there ("image file is
 * truncated"), so the reader remembers it and the decode fails. */
typedef struct jpeg_src {
    struct jpeg_source_mgr mgr;
    jpeg_err *err;
} jpeg_src;

static const JOCTET k_fake_eoi[2] = {0xFF, JPEG_EOI};

static void src_init(j_decompress_ptr cinfo) { (void)cinfo; }

static boolean src_fill(j_decompress_ptr cinfo) {
    jpeg_src *s = (jpeg_src *)cinfo->src;
    s->err->truncated = true;
    s->mgr.next_input_byte = k_fake_eoi;
    s->mgr.bytes_in_buffer = 2;
    return TRUE;
}

static void src_skip(j_decompress_ptr cinfo, long n) {
    jpeg_src *s = (jpeg_src *)cinfo->src;
    if (n <= 0) return;
    if ((size_t)n > s->mgr.bytes_in_buffer) {
        s->mgr.bytes_in_buffer = 0;
        src_fill(cinfo);
        return;
    }
    s->mgr.next_input_byte += n;
    s->mgr.bytes_in_buffer -= (size_t)n;
}

static void src_term(j_decompress_ptr cinfo) { (void)cinfo; }

typedef struct jpeg_reader {
    const uint8_t *data;
    size_t len;
    jpeg_src src;
    uint8_t *pixels; /* owned until handed to the image */
    JDIMENSION width, height;
    cq_status status;
} jpeg_reader;

/* Everything that can longjmp. Returns 0, or -1 with e->msg / r->status set. */
static int jpeg_decode(struct jpeg_decompress_struct *cinfo, jpeg_err *e, jpeg_reader *r) {
    if (setjmp(e->jump)) return -1;
    jpeg_create_decompress(cinfo);
    /* libjpeg's own buffers (a progressive file keeps every coefficient) */
    cinfo->mem->max_memory_to_use = 1L << 30;
    r->src.mgr.init_source = src_init;
    r->src.mgr.fill_input_buffer = src_fill;
    r->src.mgr.skip_input_data = src_skip;
    r->src.mgr.resync_to_restart = jpeg_resync_to_restart;
    r->src.mgr.term_source = src_term;
    r->src.mgr.next_input_byte = r->data;
    r->src.mgr.bytes_in_buffer = r->len;
    r->src.err = e;
    cinfo->src = &r->src.mgr;
    jpeg_read_header(cinfo, TRUE);
    if (e->truncated) {
        snprintf(e->msg, sizeof e->msg, "file is truncated in its header");
        return -1;
    }
    const J_COLOR_SPACE cs = cinfo->jpeg_color_space;
    if (cs == JCS_CMYK || cs == JCS_YCCK) {
        r->status = CQ_ERR_UNSUPPORTED;
        snprintf(e->msg, sizeof e->msg, "CMYK/YCCK files are not supported (convert the picture to RGB)");
        return -1;
    }
    if (cinfo->num_components != 1 && cinfo->num_components != 3) {
        snprintf(e->msg, sizeof e->msg, "%d colour components (1 or 3 expected)", cinfo->num_components);
        return -1;
    }
    if (cinfo->image_width == 0 || cinfo->image_height == 0 || cinfo->image_width > CQ_JPEG_MAX_SIDE ||
        cinfo->image_height > CQ_JPEG_MAX_SIDE ||
        (uint64_t)cinfo->image_width * cinfo->image_height > CQ_JPEG_MAX_PIXELS) {
        r->status = CQ_ERR_BOUNDS;
        snprintf(e->msg, sizeof e->msg, "image of %ux%u pixels is outside the limits (%d per side, %llu in all)",
                 (unsigned)cinfo->image_width, (unsigned)cinfo->image_height, CQ_JPEG_MAX_SIDE,
                 (unsigned long long)CQ_JPEG_MAX_PIXELS);
        return -1;
    }
    cinfo->out_color_space = JCS_RGB; /* grey is replicated, as PIL's L -> RGB */
    jpeg_start_decompress(cinfo);
    if (cinfo->output_components != 3 || cinfo->output_width != cinfo->image_width ||
        cinfo->output_height != cinfo->image_height) {
        snprintf(e->msg, sizeof e->msg, "unexpected output layout");
        return -1;
    }
    r->width = cinfo->output_width;
    r->height = cinfo->output_height;
    const size_t stride = (size_t)r->width * 3;
    r->pixels = cq_mallocn(stride, r->height);
    if (!r->pixels) {
        r->status = CQ_ERR_NOMEM;
        snprintf(e->msg, sizeof e->msg, "out of memory for %ux%u pixels", (unsigned)r->width, (unsigned)r->height);
        return -1;
    }
    while (cinfo->output_scanline < cinfo->output_height) {
        JSAMPROW row = r->pixels + (size_t)cinfo->output_scanline * stride;
        if (jpeg_read_scanlines(cinfo, &row, 1) != 1) {
            snprintf(e->msg, sizeof e->msg, "decoder stopped at row %u", (unsigned)cinfo->output_scanline);
            return -1;
        }
        if (e->truncated) {
            snprintf(e->msg, sizeof e->msg, "file is truncated (image data ends before row %u of %u)",
                     (unsigned)cinfo->output_scanline, (unsigned)r->height);
            return -1;
        }
    }
    jpeg_finish_decompress(cinfo); /* reads up to the end-of-image marker */
    if (e->truncated) {
        snprintf(e->msg, sizeof e->msg, "file is truncated (no end-of-image marker)");
        return -1;
    }
    return 0;
}

cq_status cq_jpeg_read_mem(const uint8_t *data, size_t len, cq_image8 *out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "jpeg: no output image");
    memset(out, 0, sizeof *out);
    if (!data || len < 3 || data[0] != 0xFF || data[1] != 0xD8 || data[2] != 0xFF)
        return cq_fail(CQ_ERR_MAGIC, "jpeg: not a JPEG file");
    struct jpeg_decompress_struct cinfo;
    memset(&cinfo, 0, sizeof cinfo);
    jpeg_err e;
    memset(&e, 0, sizeof e);
    cinfo.err = jpeg_std_error(&e.mgr);
    e.mgr.error_exit = on_jpeg_error;
    e.mgr.emit_message = on_jpeg_message;
    jpeg_reader r = {.data = data, .len = len, .status = CQ_ERR_PARSE};
    const int rc = jpeg_decode(&cinfo, &e, &r);
    jpeg_destroy_decompress(&cinfo);
    if (rc != 0) {
        cq_free(r.pixels);
        return cq_fail(r.status, "jpeg: %s", e.msg);
    }
    out->width = (int)r.width;
    out->height = (int)r.height;
    out->channels = 3;
    out->pixels = r.pixels;
    return CQ_OK;
}

#else /* !CQ_HAVE_JPEG */

bool cq_jpeg_available(void) { return false; }

cq_status cq_jpeg_read_mem(const uint8_t *data, size_t len, cq_image8 *out) {
    (void)data;
    (void)len;
    if (out) memset(out, 0, sizeof *out);
    return cq_fail(CQ_ERR_UNSUPPORTED, "jpeg: this build has no JPEG support (configure with libjpeg)");
}

#endif /* CQ_HAVE_JPEG */

/* ---- either ------------------------------------------------------------- */

static const uint8_t k_png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};

/* A PNG or JPEG file: RGB, or RGBA when `rgba` (alpha 255 where the file has none). */
static cq_status read_mem(const uint8_t *data, size_t len, bool rgba, cq_image8 *out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "image: no output image");
    memset(out, 0, sizeof *out);
    if (!data) return cq_fail(CQ_ERR_INVALID_ARG, "image: no data");
    if (len >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) {
        CQ_TRY(cq_jpeg_read_mem(data, len, out));
        if (!rgba) return CQ_OK;
        const size_t n = (size_t)out->width * (size_t)out->height;
        uint8_t *px = cq_mallocn(n, 4);
        if (!px) {
            cq_image8_free(out);
            return CQ_ERR_NOMEM;
        }
        for (size_t i = 0; i < n; i++) {
            memcpy(px + 4 * i, out->pixels + 3 * i, 3);
            px[4 * i + 3] = 255;
        }
        cq_free(out->pixels);
        out->pixels = px;
        out->channels = 4;
        return CQ_OK;
    }
    if (len < 8 || memcmp(data, k_png_sig, 8) != 0)
        return cq_fail(CQ_ERR_MAGIC, "image: neither a PNG nor a JPEG file");
    /* 16-bit grey: PIL opens it as I;16 and convert("RGB") clips every value
     * above 255, a picture no one means; refuse it rather than guess. The
     * IHDR must be the first chunk (the PNG reader checks the rest). */
    if (len >= 8 + 8 + 13 && memcmp(data + 12, "IHDR", 4) == 0 && data[24] == 16 && data[25] == 0)
        return cq_fail(CQ_ERR_UNSUPPORTED, "image: 16-bit greyscale PNG files are not supported "
                                           "(convert the picture to 8-bit)");
    CQ_TRY(cq_png_read_mem(data, len, rgba, out));
    if (!rgba) cq_image8_drop_alpha(out);
    return CQ_OK;
}

cq_status cq_image_read_rgb_mem(const uint8_t *data, size_t len, cq_image8 *out) {
    return read_mem(data, len, false, out);
}

cq_status cq_image_read_rgba_mem(const uint8_t *data, size_t len, cq_image8 *out) {
    return read_mem(data, len, true, out);
}

static cq_status read_file(const char *path, bool rgba, cq_image8 *out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "image: no output image");
    memset(out, 0, sizeof *out);
    if (!path) return cq_fail(CQ_ERR_INVALID_ARG, "image: no path");
    uint8_t *buf = NULL;
    size_t len = 0;
    cq_status s = cq_file_read_all(path, (size_t)1 << 31, &buf, &len);
    if (s != CQ_OK) return cq_fail_prefix(s, "image: ");
    s = read_mem(buf, len, rgba, out);
    if (s != CQ_OK) cq_fail_prefix(s, "'%s': ", path);
    cq_free(buf);
    return s;
}

cq_status cq_image_read_rgba(const char *path, cq_image8 *out) { return read_file(path, true, out); }

cq_status cq_image_read_rgb(const char *path, cq_image8 *out) { return read_file(path, false, out); }
