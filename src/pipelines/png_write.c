/*
 * png_write.c — decoder floats to 8-bit pixels (diffusers' rounding), alpha
 * over white, atomic PNG writing with text chunks, and a validating reader.
 * libpng reports errors by longjmp; every setjmp sits in a small function
 * whose locals are not modified after it, and the state that must survive a
 * longjmp lives in a struct reached through a pointer.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "base/outfile.h"
#include "pipelines/png_write.h"

#ifdef CQ_HAVE_PNG
#include <png.h>
#endif

/* ---- pixel values ------------------------------------------------------ */

uint8_t cq_png_quantize_unit(float y) {
    /* torch clamp(0, 1), then numpy (y * 255).round() in float32; NaN maps
     * to 0 here (the planar converter rejects NaN before it gets here) */
    if (!(y >= 0.0f)) y = 0.0f;
    if (y > 1.0f) y = 1.0f;
    const float p = y * 255.0f;
    return (uint8_t)nearbyintf(p); /* round half to even, like np.round */
}

uint8_t cq_png_quantize(float x) {
    const float h = x * 0.5f;
    const float y = h + 0.5f;
    return cq_png_quantize_unit(y);
}

uint8_t cq_png_over_white(uint8_t c, uint8_t a) {
    /* PIL's DIV255: (v + 128 + ((v + 128) >> 8)) >> 8 == floor(v/255 + 1/2) */
    const uint32_t v = (uint32_t)c * a + 255u * (255u - a) + 128u;
    return (uint8_t)((v + (v >> 8)) >> 8);
}

void cq_image8_free(cq_image8 *img) {
    if (!img) return;
    for (size_t i = 0; i < img->n_texts; i++) {
        cq_free(img->texts[i].key);
        cq_free(img->texts[i].value);
    }
    cq_free(img->texts);
    cq_free(img->pixels);
    memset(img, 0, sizeof *img);
}

const char *cq_image8_text(const cq_image8 *img, const char *key) {
    if (!img || !key) return NULL;
    for (size_t i = 0; i < img->n_texts; i++)
        if (strcmp(img->texts[i].key, key) == 0) return img->texts[i].value;
    return NULL;
}

cq_status cq_png_from_planar(const float *planes, int channels, int width, int height, int out_channels,
                             cq_image8 *out) {
    if (!planes || !out) return cq_fail(CQ_ERR_INVALID_ARG, "png: no planes or output image");
    memset(out, 0, sizeof *out);
    if ((channels != 3 && channels != 4) || (out_channels != 3 && out_channels != 4))
        return cq_fail(CQ_ERR_INVALID_ARG, "png: %d planes to %d channels (need 3 or 4 each)", channels,
                       out_channels);
    if (width < 1 || height < 1 || width > CQ_PNG_MAX_SIDE || height > CQ_PNG_MAX_SIDE)
        return cq_fail(CQ_ERR_INVALID_ARG, "png: image size %dx%d out of range", width, height);
    const size_t hw = (size_t)width * (size_t)height;
    uint8_t *px = cq_mallocn(hw, (size_t)out_channels);
    if (!px) return CQ_ERR_NOMEM;
    for (size_t i = 0; i < hw; i++) {
        uint8_t q[4] = {0, 0, 0, 255};
        for (int c = 0; c < channels; c++) {
            const float v = planes[(size_t)c * hw + i];
            if (isnan(v)) {
                cq_free(px);
                return cq_fail(CQ_ERR_NUMERIC, "png: NaN in decoder output (channel %d, pixel %zu)", c, i);
            }
            q[c] = cq_png_quantize(v);
        }
        uint8_t *o = px + i * (size_t)out_channels;
        if (out_channels == 3 && channels == 4) {
            for (int c = 0; c < 3; c++) o[c] = cq_png_over_white(q[c], q[3]);
        } else {
            for (int c = 0; c < out_channels; c++) o[c] = q[c];
        }
    }
    out->width = width;
    out->height = height;
    out->channels = out_channels;
    out->pixels = px;
    return CQ_OK;
}

#ifndef CQ_HAVE_PNG

cq_status cq_png_write(const char *path, const uint8_t *pixels, int width, int height, int channels,
                       const cq_png_text *texts, size_t n_texts) {
    (void)pixels, (void)width, (void)height, (void)channels, (void)texts, (void)n_texts;
    return cq_fail(CQ_ERR_UNSUPPORTED, "png: cannot write '%s': built without libpng", path ? path : "");
}
cq_status cq_png_write_out(struct cq_outfile *f, const uint8_t *pixels, int width, int height, int channels,
                           const cq_png_text *texts, size_t n_texts) {
    (void)f, (void)pixels, (void)width, (void)height, (void)channels, (void)texts, (void)n_texts;
    return cq_fail(CQ_ERR_UNSUPPORTED, "png: built without libpng");
}
cq_status cq_png_check_text(const char *key, const char *value) {
    (void)key, (void)value;
    return cq_fail(CQ_ERR_UNSUPPORTED, "png: built without libpng");
}
cq_status cq_png_read(const char *path, bool force_rgba, cq_image8 *out) {
    (void)force_rgba, (void)out;
    return cq_fail(CQ_ERR_UNSUPPORTED, "png: cannot read '%s': built without libpng", path ? path : "");
}
cq_status cq_png_read_mem(const uint8_t *data, size_t len, bool force_rgba, cq_image8 *out) {
    (void)data, (void)len, (void)force_rgba, (void)out;
    return cq_fail(CQ_ERR_UNSUPPORTED, "png: built without libpng");
}

#else

typedef struct png_err {
    char msg[200];
} png_err;

static void on_png_error(png_structp png, png_const_charp msg) {
    png_err *e = png_get_error_ptr(png);
    if (e) snprintf(e->msg, sizeof e->msg, "%s", msg ? msg : "libpng error");
    png_longjmp(png, 1);
}

static void on_png_warning(png_structp png, png_const_charp msg) {
    (void)png;
    CQ_DEBUG("libpng: %s", msg ? msg : "");
}

/* ---- writing ----------------------------------------------------------- */

static bool is_ascii_text(const char *s) {
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        if (c >= 0x80 || (c < 0x20 && c != '\n')) return false;
    }
    return true;
}

/* PNG keywords: 1-79 printable Latin-1 characters, no leading, trailing or
 * doubled spaces. We allow the ASCII subset. */
static bool is_keyword(const char *k) {
    const size_t n = strlen(k);
    if (n < 1 || n > 79 || k[0] == ' ' || k[n - 1] == ' ') return false;
    for (size_t i = 0; i < n; i++) {
        if (k[i] < 0x20 || k[i] > 0x7e) return false;
        if (k[i] == ' ' && k[i + 1] == ' ') return false;
    }
    return true;
}

typedef struct png_writer {
    cq_outfile *f;
    cq_status io;     /* the first write error, kept past libpng's longjmp */
    const uint8_t *pixels;
    int width, height, channels;
    png_text *text;
    int n_text;
} png_writer;

static void on_png_write(png_structp png, png_bytep data, size_t n) {
    png_writer *w = png_get_io_ptr(png);
    if (w->io == CQ_OK) w->io = cq_outfile_write(w->f, data, n);
    if (w->io != CQ_OK) png_error(png, "write failed");
}

static void on_png_flush(png_structp png) { (void)png; }

static int write_png_rows(png_structp png, png_infop info, png_writer *w) {
    if (setjmp(png_jmpbuf(png))) return -1;
    png_set_write_fn(png, w, on_png_write, on_png_flush);
    png_set_IHDR(png, info, (png_uint_32)w->width, (png_uint_32)w->height, 8,
                 w->channels == 4 ? PNG_COLOR_TYPE_RGB_ALPHA : PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (w->n_text > 0) png_set_text(png, info, w->text, w->n_text);
    png_write_info(png, info);
    const size_t stride = (size_t)w->width * (size_t)w->channels;
    for (int y = 0; y < w->height; y++) png_write_row(png, (png_const_bytep)(w->pixels + (size_t)y * stride));
    png_write_end(png, info);
    return 0;
}

cq_status cq_png_check_text(const char *k, const char *v) {
    if (!k || !is_keyword(k)) return cq_fail(CQ_ERR_INVALID_ARG, "png: bad text keyword '%s'", k ? k : "(null)");
    if (!v) return CQ_OK;
    const size_t n = strlen(v);
    if (n > CQ_PNG_MAX_TEXT)
        return cq_fail(CQ_ERR_INVALID_ARG, "the %s is %zu bytes; a PNG text chunk holds at most %u", k, n,
                       CQ_PNG_MAX_TEXT);
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)v[i];
        if (c < 0x20 && c != '\n' && c != '\t')
            return cq_fail(CQ_ERR_INVALID_ARG,
                           "the %s has a control character (0x%02x at byte %zu); PNG text holds only printable "
                           "text, tabs and newlines",
                           k, c, i + 1);
        if (c == 0x7f)
            return cq_fail(CQ_ERR_INVALID_ARG, "the %s has a control character (0x7f at byte %zu); PNG text holds "
                           "only printable text, tabs and newlines", k, i + 1);
    }
    const long bad = is_ascii_text(v) ? -1 : cq_utf8_invalid_at(v);
    if (bad >= 0) return cq_fail(CQ_ERR_INVALID_ARG, "the %s is not valid UTF-8 (byte %ld of %zu)", k, bad + 1, n);
    return CQ_OK;
}

cq_status cq_png_write_out(cq_outfile *f, const uint8_t *pixels, int width, int height, int channels,
                           const cq_png_text *texts, size_t n_texts) {
    if (!f || !pixels) return cq_fail(CQ_ERR_INVALID_ARG, "png: no output or pixels");
    if (channels != 3 && channels != 4) return cq_fail(CQ_ERR_INVALID_ARG, "png: %d channels (need 3 or 4)", channels);
    if (width < 1 || height < 1 || width > CQ_PNG_MAX_SIDE || height > CQ_PNG_MAX_SIDE)
        return cq_fail(CQ_ERR_INVALID_ARG, "png: image size %dx%d out of range", width, height);
    if (n_texts > 64 || (n_texts && !texts)) return cq_fail(CQ_ERR_INVALID_ARG, "png: %zu text chunks", n_texts);

    png_text text[64];
    memset(text, 0, sizeof text);
    for (size_t i = 0; i < n_texts; i++) {
        const char *k = texts[i].key, *v = texts[i].value;
        CQ_TRY(cq_png_check_text(k, v));
        if (!v) v = "";
        const bool ascii = is_ascii_text(v);
        text[i].compression = ascii ? PNG_TEXT_COMPRESSION_NONE : PNG_ITXT_COMPRESSION_NONE;
        text[i].key = (png_charp)k;
        text[i].text = (png_charp)v;
        if (ascii) text[i].text_length = strlen(v);
        else text[i].itxt_length = strlen(v);
        text[i].lang = (png_charp) "";
        text[i].lang_key = (png_charp) "";
    }

    png_err err = {{0}};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &err, on_png_error, on_png_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    png_writer w = {f, CQ_OK, pixels, width, height, channels, text, (int)n_texts};
    int rc = -1;
    if (png && info) rc = write_png_rows(png, info, &w);
    else snprintf(err.msg, sizeof err.msg, "cannot create the libpng writer");
    png_destroy_write_struct(png ? &png : NULL, info ? &info : NULL);
    if (w.io != CQ_OK) return w.io; /* the outfile's message names the path */
    if (rc != 0) return cq_fail(CQ_ERR_IO, "png: writing '%s': %s", f->target, err.msg);
    return CQ_OK;
}

cq_status cq_png_write(const char *path, const uint8_t *pixels, int width, int height, int channels,
                       const cq_png_text *texts, size_t n_texts) {
    if (!path || !*path || !pixels) return cq_fail(CQ_ERR_INVALID_ARG, "png: no path or pixels");
    cq_outfile f;
    const cq_outfile_opts o = {.format = "PNG", .allow_stdout = true};
    CQ_TRY(cq_outfile_open(path, &o, &f));
    cq_status s = cq_png_write_out(&f, pixels, width, height, channels, texts, n_texts);
    if (s == CQ_OK) return cq_outfile_commit(&f);
    cq_outfile_abort(&f);
    return s;
}

/* ---- reading ----------------------------------------------------------- */

typedef struct png_reader {
    const uint8_t *data;
    size_t len, pos;
    bool force_rgba;
    png_uint_32 width, height;
    int channels;
    uint8_t *pixels;
    png_bytep *rows;
} png_reader;

static void read_mem(png_structp png, png_bytep out, size_t n) {
    png_reader *r = png_get_io_ptr(png);
    if (n > r->len - r->pos) png_error(png, "file is truncated");
    memcpy(out, r->data + r->pos, n);
    r->pos += n;
}

/* Header and transforms; fills r->width/height/channels. */
static int read_png_header(png_structp png, png_infop info, png_reader *r) {
    if (setjmp(png_jmpbuf(png))) return -1;
    png_set_read_fn(png, r, read_mem);
    png_set_user_limits(png, CQ_PNG_MAX_SIDE, CQ_PNG_MAX_SIDE);
    png_set_chunk_malloc_max(png, 8u << 20);
    png_read_info(png, info);
    png_uint_32 w = 0, h = 0;
    int depth = 0, ctype = 0, interlace = 0;
    png_get_IHDR(png, info, &w, &h, &depth, &ctype, &interlace, NULL, NULL);
    if ((uint64_t)w * h > CQ_PNG_MAX_PIXELS) png_error(png, "image has too many pixels");
    if (ctype == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (ctype == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
    if (depth == 16) png_set_strip_16(png);
    if (ctype == PNG_COLOR_TYPE_GRAY || ctype == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
    const bool has_alpha = (ctype & PNG_COLOR_MASK_ALPHA) || png_get_valid(png, info, PNG_INFO_tRNS);
    if (r->force_rgba && !has_alpha) png_set_add_alpha(png, 0xff, PNG_FILLER_AFTER);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    r->width = w;
    r->height = h;
    r->channels = png_get_channels(png, info);
    if ((r->channels != 3 && r->channels != 4) || png_get_bit_depth(png, info) != 8 ||
        png_get_rowbytes(png, info) != (size_t)w * (size_t)r->channels)
        png_error(png, "unexpected pixel layout after conversion");
    return 0;
}

static int read_png_pixels(png_structp png, png_infop info, png_reader *r) {
    if (setjmp(png_jmpbuf(png))) return -1;
    png_read_image(png, r->rows);
    png_read_end(png, info); /* text chunks after the image data */
    return 0;
}

static cq_status copy_texts(png_structp png, png_infop info, cq_image8 *out) {
    png_textp t = NULL;
    int n = 0;
    png_get_text(png, info, &t, &n);
    if (n <= 0) return CQ_OK;
    out->texts = cq_calloc((size_t)n, sizeof *out->texts);
    if (!out->texts) return CQ_ERR_NOMEM;
    for (int i = 0; i < n; i++) {
        const size_t len = t[i].compression >= PNG_ITXT_COMPRESSION_NONE ? t[i].itxt_length : t[i].text_length;
        out->texts[i].key = cq_strdup(t[i].key ? t[i].key : "");
        out->texts[i].value = cq_strndup(t[i].text ? t[i].text : "", t[i].text ? len : 0);
        out->n_texts = (size_t)i + 1;
        if (!out->texts[i].key || !out->texts[i].value) return CQ_ERR_NOMEM;
    }
    return CQ_OK;
}

static uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* Walk the chunk list before libpng sees it: every declared length must fit
 * in the bytes that follow, and the file must end with IEND. libpng would
 * otherwise allocate (and clear) whatever a text chunk claims. */
static cq_status check_chunks(const uint8_t *data, size_t len) {
    size_t pos = 8;
    for (int n = 0;; n++) {
        if (len - pos < 12) return cq_fail(CQ_ERR_PARSE, "png: truncated in the header of chunk %d", n);
        const uint32_t clen = be32(data + pos);
        char type[5];
        for (int i = 0; i < 4; i++) {
            const uint8_t c = data[pos + 4 + (size_t)i];
            type[i] = (char)(((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) ? c : '?');
        }
        type[4] = '\0';
        if (clen > 0x7fffffffu || (size_t)clen > len - pos - 12)
            return cq_fail(CQ_ERR_PARSE, "png: chunk %d ('%s') claims %u bytes, %zu are left", n, type, clen,
                           len - pos - 12);
        pos += 12 + (size_t)clen;
        if (memcmp(type, "IEND", 4) == 0) return CQ_OK;
    }
}

cq_status cq_png_read_mem(const uint8_t *data, size_t len, bool force_rgba, cq_image8 *out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "png: no output image");
    memset(out, 0, sizeof *out);
    if (!data || len < 8 || png_sig_cmp(data, 0, 8) != 0) return cq_fail(CQ_ERR_MAGIC, "png: not a PNG file");
    CQ_TRY(check_chunks(data, len));

    png_err err = {{0}};
    png_reader r = {.data = data, .len = len, .force_rgba = force_rgba};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &err, on_png_error, on_png_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    cq_status s = CQ_OK;
    if (!png || !info) {
        s = cq_fail(CQ_ERR_NOMEM, "png: cannot create the libpng reader");
    } else if (read_png_header(png, info, &r) != 0) {
        s = cq_fail(CQ_ERR_PARSE, "png: %s", err.msg);
    } else {
        const size_t stride = (size_t)r.width * (size_t)r.channels;
        r.pixels = cq_mallocn(stride, r.height);
        r.rows = cq_mallocn(r.height, sizeof *r.rows);
        if (!r.pixels || !r.rows) {
            s = CQ_ERR_NOMEM;
        } else {
            for (png_uint_32 y = 0; y < r.height; y++) r.rows[y] = r.pixels + (size_t)y * stride;
            if (read_png_pixels(png, info, &r) != 0) s = cq_fail(CQ_ERR_PARSE, "png: %s", err.msg);
        }
    }
    if (s == CQ_OK) {
        out->width = (int)r.width;
        out->height = (int)r.height;
        out->channels = r.channels;
        out->pixels = r.pixels;
        r.pixels = NULL;
        s = copy_texts(png, info, out);
        if (s != CQ_OK) cq_image8_free(out);
    }
    cq_free(r.rows);
    cq_free(r.pixels);
    png_destroy_read_struct(png ? &png : NULL, info ? &info : NULL, NULL);
    return s;
}

cq_status cq_png_read(const char *path, bool force_rgba, cq_image8 *out) {
    if (!out) return cq_fail(CQ_ERR_INVALID_ARG, "png: no output image");
    memset(out, 0, sizeof *out);
    if (!path) return cq_fail(CQ_ERR_INVALID_ARG, "png: no path");
    FILE *f = fopen(path, "rb");
    if (!f) return cq_fail(CQ_ERR_IO, "png: cannot open '%s': %s", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    cq_status s = CQ_OK;
    for (;;) {
        if (len == cap) {
            const size_t ncap = cap ? cap * 2 : 65536;
            if (ncap > ((size_t)1 << 31)) {
                s = cq_fail(CQ_ERR_IO, "png: '%s' is larger than 2 GiB", path);
                break;
            }
            uint8_t *nb = cq_realloc(buf, ncap);
            if (!nb) {
                s = CQ_ERR_NOMEM;
                break;
            }
            buf = nb;
            cap = ncap;
        }
        const size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f)) s = cq_fail(CQ_ERR_IO, "png: reading '%s': %s", path, strerror(errno));
            break;
        }
    }
    fclose(f);
    if (s == CQ_OK) {
        s = cq_png_read_mem(buf, len, force_rgba, out);
        if (s != CQ_OK) cq_fail_prefix(s, "'%s': ", path);
    }
    cq_free(buf);
    return s;
}

#endif /* CQ_HAVE_PNG */
