/*
 * outfile.h — the one way cortiq.c writes a file the user named.
 *
 * Every writer (PNG, CMF, and the video/audio writers to come) goes through
 * this helper, so a path never harms what it points at:
 *  - only regular files are written. An existing directory, device, FIFO or
 *    socket is refused with a message that says what it is; "-" means
 *    standard output where the format can stream (never a terminal);
 *  - a symbolic link is followed to the regular file it names, and that file
 *    is replaced (a dangling link is refused: nothing is created through a
 *    link);
 *  - bytes go to a temporary created with O_EXCL beside the final file (an
 *    unpredictable name, so nothing planted there is followed), with the
 *    replaced file's permissions (a new file's: 0666 less the umask); commit
 *    fsyncs it and renames it over the target, so the target is either the
 *    old file or the whole new one;
 *  - the checks (directory exists and is writable, target acceptable, free
 *    space when the size is known) all happen in cq_outfile_open, which
 *    callers run before any work;
 *  - live temporaries are listed in a table that cq_outfile_remove_temps()
 *    clears from a signal handler, and abort/free remove them otherwise.
 */
#ifndef CQ_BASE_OUTFILE_H
#define CQ_BASE_OUTFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

typedef struct cq_outfile_opts {
    const char *format;  /* "PNG", "CMF": for messages */
    bool allow_stdout;   /* "-" writes to standard output (a format that streams) */
    uint64_t size_hint;  /* expected bytes; free space is checked when non-zero */
} cq_outfile_opts;

typedef struct cq_outfile {
    char *target;        /* the path as the caller gave it (for messages) */
    char *final;         /* the regular file that commit replaces (target, or what its link names) */
    char *tmp;           /* the temporary beside `final`; NULL for standard output */
    int fd;              /* -1 when closed */
    int slot;            /* index in the temporaries table, -1 for none */
    bool to_stdout;
} cq_outfile;

/* Check `path` and create its temporary (nothing else is touched). On error
 * *f is left closed (cq_outfile_abort is a no-op on it) and the message
 * names `path` as given. */
cq_status cq_outfile_open(const char *path, const cq_outfile_opts *o, cq_outfile *f);
/* Append bytes (standard output too). */
cq_status cq_outfile_write(cq_outfile *f, const void *data, size_t len);
/* Write at an offset (files only: not for standard output). */
cq_status cq_outfile_pwrite(cq_outfile *f, const void *data, size_t len, uint64_t off);
/* fsync, then rename the temporary over the target (files); flush
 * (standard output). The target is re-checked first: if it has become
 * something other than a regular file, nothing is replaced. Frees f's
 * strings either way; on failure the temporary is removed. */
cq_status cq_outfile_commit(cq_outfile *f);
/* Remove the temporary and free f (safe on a zeroed, closed, committed or
 * aborted outfile: a no-op then). */
void cq_outfile_abort(cq_outfile *f);

/* Unlink every live temporary; async-signal-safe (a signal handler's last
 * word before _exit). Returns how many were removed. */
int cq_outfile_remove_temps(void);

/* True when `path` ends in `ext` (".png"), ignoring case. */
bool cq_path_has_ext(const char *path, const char *ext);

#endif /* CQ_BASE_OUTFILE_H */
