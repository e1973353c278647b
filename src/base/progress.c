/*
 * progress.c — tty-aware progress reporting on stderr. On a terminal the bar
 * is redrawn in place at most ~10 times a second; when stderr is a file or a
 * pipe, one line is printed per 10% so logs stay readable.
 */
#include <stdio.h>
#include <unistd.h>

#include "base/base.h"

const char *cq_fmt_bytes(uint64_t n, char *buf, size_t len) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%llu B", (unsigned long long)n);
    else
        snprintf(buf, len, "%.1f %s", v, units[u]);
    return buf;
}

static void fmt_time(double s, char *buf, size_t len) {
    if (s < 0 || s > 1e7) {
        snprintf(buf, len, "--:--");
        return;
    }
    int t = (int)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, len, "%d:%02d:%02d", t / 3600, (t / 60) % 60, t % 60);
    else
        snprintf(buf, len, "%02d:%02d", t / 60, t % 60);
}

static void draw(cq_progress *p, bool final) {
    double now = cq_now(), el = now - p->t_start;
    double frac = p->total ? (double)p->done / (double)p->total : 1.0;
    if (frac > 1) frac = 1;
    double eta = frac > 0 ? el / frac - el : -1;
    char e1[32], e2[32], a[32], b[32];
    fmt_time(el, e1, sizeof e1);
    fmt_time(final ? 0 : eta, e2, sizeof e2);
    char counts[80];
    if (p->bytes)
        snprintf(counts, sizeof counts, "%s/%s", cq_fmt_bytes(p->done, a, sizeof a), cq_fmt_bytes(p->total, b, sizeof b));
    else
        snprintf(counts, sizeof counts, "%llu/%llu", (unsigned long long)p->done, (unsigned long long)p->total);
    if (p->tty) {
        char bar[31];
        int filled = (int)(frac * 30);
        for (int i = 0; i < 30; i++) bar[i] = i < filled ? '#' : '.';
        bar[30] = '\0';
        fprintf(stderr, "\r%s [%s] %3d%% %s  %s elapsed, %s left%s", p->label, bar, (int)(frac * 100), counts, e1,
                e2, final ? "\n" : "  ");
    } else {
        fprintf(stderr, "%s: %3d%% %s (%s elapsed)\n", p->label, (int)(frac * 100), counts, e1);
    }
    fflush(stderr);
    p->t_last_draw = now;
}

void cq_progress_begin(cq_progress *p, const char *label, uint64_t total, bool quiet) {
    bool bytes = p->bytes;
    *p = (cq_progress){0};
    p->bytes = bytes;
    p->label = label;
    p->total = total;
    p->quiet = quiet;
    p->tty = isatty(STDERR_FILENO) != 0;
    p->t_start = cq_now();
    p->last_decile = -1;
}

void cq_progress_update(cq_progress *p, uint64_t done) {
    p->done = done;
    if (p->quiet) return;
    if (p->tty) {
        if (cq_now() - p->t_last_draw >= 0.1) draw(p, false);
    } else {
        int dec = p->total ? (int)(done * 10 / p->total) : 10;
        if (dec != p->last_decile && dec < 10) {
            p->last_decile = dec;
            draw(p, false);
        }
    }
}

void cq_progress_end(cq_progress *p) {
    if (p->quiet) return;
    p->done = p->total;
    draw(p, true);
}
