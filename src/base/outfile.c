/*
 * outfile.c — safe output files (see outfile.h): refuse what is not a
 * regular file, follow links to the file they name, write a temporary
 * beside it and rename it into place on commit.
 */
#include "base/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

/* ---- the table of live temporaries --------------------------------------
 * A slot is free (0), being filled (1) or live (2); the signal handler
 * unlinks live ones only, so it never reads a half-copied path. */
#define CQ_OUT_SLOTS 16
static struct {
    atomic_int state;
    char path[PATH_MAX];
} g_slots[CQ_OUT_SLOTS];

static int slot_take(const char *path) {
    if (strlen(path) >= PATH_MAX) return -1;
    for (int i = 0; i < CQ_OUT_SLOTS; i++) {
        int want = 0;
        if (atomic_compare_exchange_strong(&g_slots[i].state, &want, 1)) {
            memcpy(g_slots[i].path, path, strlen(path) + 1);
            atomic_store(&g_slots[i].state, 2);
            return i;
        }
    }
    return -1; /* more than 16 files at once: still removed on abort, not by a signal */
}

static void slot_release(int i) {
    if (i >= 0 && i < CQ_OUT_SLOTS) atomic_store(&g_slots[i].state, 0);
}

int cq_outfile_remove_temps(void) {
    int n = 0;
    for (int i = 0; i < CQ_OUT_SLOTS; i++) {
        int want = 2;
        if (atomic_compare_exchange_strong(&g_slots[i].state, &want, 1)) {
            if (unlink(g_slots[i].path) == 0) n++;
            atomic_store(&g_slots[i].state, 0);
        }
    }
    return n;
}

/* ---- helpers ------------------------------------------------------------ */
bool cq_path_has_ext(const char *path, const char *ext) {
    if (!path || !ext) return false;
    const size_t n = strlen(path), e = strlen(ext);
    return n > e && strcasecmp(path + n - e, ext) == 0 && path[n - e - 1] != '/';
}

static const char *kind_of(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISFIFO(m)) return "a FIFO (named pipe)";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISLNK(m)) return "a symbolic link";
    return "not a regular file";
}

/* "dir" of "dir/name" ("." when there is no slash; "/" for "/name"). */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return cq_strdup(".");
    if (slash == path) return cq_strdup("/");
    return cq_strndup(path, (size_t)(slash - path));
}

static const char *base_of(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Kernel views of open files: a link there names another process's (or this
 * one's) descriptor, not a file to replace. */
static bool is_fd_alias(const char *p) {
    return strncmp(p, "/proc/", 6) == 0 || strncmp(p, "/dev/fd/", 8) == 0 || strcmp(p, "/dev/fd") == 0 ||
           strcmp(p, "/dev/stdout") == 0 || strcmp(p, "/dev/stderr") == 0 || strcmp(p, "/dev/stdin") == 0;
}

/* Walk a chain of links by their text; true (and the hop in `hop`) when one
 * of them points into /proc or /dev/fd. realpath() would resolve such a
 * "magic" link to whatever the descriptor is open on. */
static bool links_to_fd(const char *path, char *hop, size_t hop_len) {
    char cur[PATH_MAX];
    snprintf(cur, sizeof cur, "%s", path);
    for (int i = 0; i < 40; i++) {
        struct stat st;
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode)) return false;
        char to[PATH_MAX];
        const ssize_t k = readlink(cur, to, sizeof to - 1);
        if (k < 0) return false;
        to[k] = '\0';
        char next[2 * PATH_MAX + 2];
        const char *slash = to[0] == '/' ? NULL : strrchr(cur, '/');
        if (slash) snprintf(next, sizeof next, "%.*s/%s", (int)(slash - cur), cur, to);
        else snprintf(next, sizeof next, "%s", to);
        if (is_fd_alias(to) || is_fd_alias(next)) {
            snprintf(hop, hop_len, "%s", to);
            return true;
        }
        if (strlen(next) >= sizeof cur) return false; /* realpath will refuse it */
        memcpy(cur, next, strlen(next) + 1);
    }
    return false;
}

static void outfile_clear(cq_outfile *f) {
    cq_free(f->target);
    cq_free(f->final);
    cq_free(f->tmp);
    f->target = f->final = f->tmp = NULL;
    f->fd = -1;
    f->slot = -1;
}

static cq_status refuse_kind(const char *path, const char *what_link, mode_t m, const cq_outfile_opts *o) {
    const char *hint = S_ISDIR(m) ? "; name the file to write inside it"
                       : o->allow_stdout ? "; cortiq writes only regular files (use -o - to write to standard output)"
                                         : "; cortiq writes only regular files";
    return cq_fail(CQ_ERR_IO, "'%s'%s is %s, not a file cortiq will replace%s", path, what_link ? what_link : "",
                   kind_of(m), hint);
}

static cq_status check_space(const char *path, const char *dir, uint64_t need) {
    struct statvfs sv;
    if (!need || statvfs(dir, &sv) != 0) return CQ_OK; /* unknown: the writes will tell */
    const uint64_t avail = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
    if (avail >= need) return CQ_OK;
    char a[32], b[32];
    return cq_fail(CQ_ERR_IO, "not enough free space for '%s': it needs about %s, %s are free in '%s'", path,
                   cq_fmt_bytes(need, a, sizeof a), cq_fmt_bytes(avail, b, sizeof b), dir);
}

static cq_status open_stdout(const char *path, const cq_outfile_opts *o, cq_outfile *f) {
    const char *fmt = o->format ? o->format : "this";
    if (!o->allow_stdout)
        return cq_fail(CQ_ERR_INVALID_ARG, "cannot write a %s file to standard output ('-'); name a file", fmt);
    if (isatty(STDOUT_FILENO))
        return cq_fail(CQ_ERR_INVALID_ARG,
                       "'-' writes the %s file to standard output, which is a terminal; redirect it (> file, | program)",
                       fmt);
    if (!(f->target = cq_strdup(path))) return CQ_ERR_NOMEM;
    f->fd = STDOUT_FILENO;
    f->to_stdout = true;
    return CQ_OK;
}

cq_status cq_outfile_open(const char *path, const cq_outfile_opts *o_in, cq_outfile *f) {
    if (!f) return cq_fail(CQ_ERR_INVALID_ARG, "cq_outfile_open: f is NULL");
    memset(f, 0, sizeof *f);
    f->fd = -1;
    f->slot = -1;
    const cq_outfile_opts o = o_in ? *o_in : (cq_outfile_opts){0};
    if (!path || !*path) return cq_fail(CQ_ERR_INVALID_ARG, "no output file name");
    if (strcmp(path, "-") == 0) return open_stdout(path, &o, f);
    const size_t plen = strlen(path);
    if (path[plen - 1] == '/') return cq_fail(CQ_ERR_INVALID_ARG, "'%s' names a directory; name the file to write", path);
    if (is_fd_alias(path))
        return cq_fail(CQ_ERR_IO, "'%s' is a kernel view of an open file, not a file cortiq will replace%s", path,
                       o.allow_stdout ? " (use -o - to write to standard output)" : "");
    if (plen >= PATH_MAX) return cq_fail(CQ_ERR_INVALID_ARG, "the output path is longer than %d bytes", PATH_MAX - 1);

    cq_status s = CQ_OK;
    char *final = NULL, *dir = NULL, *tmp = NULL, linkmsg[PATH_MAX + 32] = "";
    mode_t mode = 0;
    bool exists = false;
    uid_t owner = 0;
    gid_t group = 0;
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
        char hop[PATH_MAX];
        if (links_to_fd(path, hop, sizeof hop))
            return cq_fail(CQ_ERR_IO,
                           "'%s' is a symbolic link to '%s', an open file descriptor, not a file cortiq will replace%s",
                           path, hop, o.allow_stdout ? " (use -o - to write to standard output)" : "");
        /* follow the link to the file it names; that file is what gets replaced */
        final = realpath(path, NULL);
        if (!final) {
            const int e = errno;
            char to[PATH_MAX] = "?";
            const ssize_t n = readlink(path, to, sizeof to - 1);
            if (n >= 0) to[n] = '\0';
            if (e == ENOENT)
                return cq_fail(CQ_ERR_IO,
                               "'%s' is a symbolic link to '%s', which does not exist; cortiq does not create files "
                               "through links (remove the link or name another file)",
                               path, to);
            return cq_fail(CQ_ERR_IO, "'%s' is a symbolic link that cannot be followed: %s", path, strerror(e));
        }
        snprintf(linkmsg, sizeof linkmsg, " (a link to '%s')", final);
        if (stat(final, &st) != 0) {
            const int e = errno;
            cq_status r = cq_fail(CQ_ERR_IO, "'%s'%s: %s", path, linkmsg, strerror(e));
            free(final);
            return r;
        }
        exists = true;
    } else if (lstat(path, &st) == 0) {
        exists = true;
    } else if (errno != ENOENT) {
        return cq_fail(CQ_ERR_IO, "cannot use '%s' as the output: %s", path, strerror(errno));
    }
    if (exists && !S_ISREG(st.st_mode)) {
        s = refuse_kind(path, *linkmsg ? linkmsg : NULL, st.st_mode, &o);
        free(final);
        return s;
    }
    {
        /* from here on `final` is a cq_ allocation (realpath's result is free()'d) */
        char *owned = cq_strdup(final ? final : path);
        free(final);
        final = owned;
        if (!final) return CQ_ERR_NOMEM;
    }
    if (exists) {
        if (access(final, W_OK) != 0) {
            const int e = errno;
            s = cq_fail(CQ_ERR_IO, "'%s'%s cannot be replaced: %s", path, linkmsg,
                        e == EACCES ? "it is read-only (its permissions forbid writing)" : strerror(e));
            cq_free(final);
            return s;
        }
        mode = st.st_mode & 07777;
        owner = st.st_uid;
        group = st.st_gid;
    } else {
        const mode_t um = umask(0);
        umask(um);
        mode = 0666 & ~um;
    }

    dir = dir_of(final);
    if (!dir) {
        cq_free(final);
        return CQ_ERR_NOMEM;
    }
    struct stat ds;
    if (stat(dir, &ds) != 0) {
        const int e = errno;
        s = cq_fail(CQ_ERR_IO, "cannot write '%s': the directory '%s' %s", path, dir,
                    e == ENOENT ? "does not exist" : strerror(e));
    } else if (!S_ISDIR(ds.st_mode)) {
        s = cq_fail(CQ_ERR_IO, "cannot write '%s': '%s' is not a directory", path, dir);
    } else {
        s = check_space(path, dir, o.size_hint);
    }
    if (s == CQ_OK) {
        /* ".<name>.cortiq-XXXXXX" beside the final file; the name is cut so it
         * stays within NAME_MAX */
        const size_t tl = strlen(dir) + 256;
        tmp = cq_malloc(tl);
        if (!tmp) s = CQ_ERR_NOMEM;
        else snprintf(tmp, tl, "%s/.%.200s.cortiq-XXXXXX", dir, base_of(final));
    }
    int fd = -1;
    if (s == CQ_OK) {
        fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0) {
            const int e = errno;
            s = cq_fail(CQ_ERR_IO, "cannot write '%s': cannot create a file in '%s': %s", path, dir,
                        e == EACCES ? "permission denied" : e == EROFS ? "read-only file system" : strerror(e));
        }
    }
    if (s == CQ_OK) {
        f->slot = slot_take(tmp);
        if (fchmod(fd, mode) != 0) {
            s = cq_fail(CQ_ERR_IO, "cannot set the permissions of '%s': %s", tmp, strerror(errno));
        } else if (exists && (owner != geteuid() || group != getegid()) && geteuid() == 0) {
            (void)!fchown(fd, owner, group); /* root replacing someone's file keeps its owner; best effort */
        }
    }
    if (s == CQ_OK) {
        f->target = cq_strdup(path);
        if (!f->target) s = CQ_ERR_NOMEM;
    }
    cq_free(dir);
    if (s != CQ_OK) {
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        slot_release(f->slot);
        cq_free(tmp);
        cq_free(final);
        cq_free(f->target);
        memset(f, 0, sizeof *f);
        f->fd = -1;
        f->slot = -1;
        return s;
    }
    f->final = final;
    f->tmp = tmp;
    f->fd = fd;
    return CQ_OK;
}

static cq_status io_error(const cq_outfile *f, int e) {
    if (e == ENOSPC) return cq_fail(CQ_ERR_IO, "writing '%s': no space left on the device", f->target);
    if (e == EDQUOT) return cq_fail(CQ_ERR_IO, "writing '%s': disk quota exceeded", f->target);
    return cq_fail(CQ_ERR_IO, "writing '%s': %s", f->target, strerror(e));
}

#define CQ_OUT_APPEND UINT64_MAX

/* write() (off == CQ_OUT_APPEND) or pwrite() until every byte is out. */
static cq_status write_all(cq_outfile *f, const void *data, size_t len, uint64_t off) {
    const uint8_t *p = data;
    while (len) {
        const ssize_t n = off == CQ_OUT_APPEND ? write(f->fd, p, len) : pwrite(f->fd, p, len, (off_t)off);
        if (n < 0) {
            if (errno == EINTR) continue;
            return io_error(f, errno);
        }
        if (n == 0) return cq_fail(CQ_ERR_IO, "writing '%s': no progress", f->target);
        p += n;
        len -= (size_t)n;
        if (off != CQ_OUT_APPEND) off += (uint64_t)n;
    }
    return CQ_OK;
}

cq_status cq_outfile_write(cq_outfile *f, const void *data, size_t len) {
    if (!f || f->fd < 0) return cq_fail(CQ_ERR_INVALID_ARG, "cq_outfile_write: the file is not open");
    return write_all(f, data, len, CQ_OUT_APPEND);
}

cq_status cq_outfile_pwrite(cq_outfile *f, const void *data, size_t len, uint64_t off) {
    if (!f || f->fd < 0) return cq_fail(CQ_ERR_INVALID_ARG, "cq_outfile_pwrite: the file is not open");
    if (f->to_stdout) return cq_fail(CQ_ERR_INVALID_ARG, "cq_outfile_pwrite: standard output cannot seek");
    if (off >= (uint64_t)INT64_MAX) return cq_fail(CQ_ERR_INVALID_ARG, "cq_outfile_pwrite: offset out of range");
    return write_all(f, data, len, off);
}

static void fsync_dir(const char *path) {
    char dir[PATH_MAX]; /* no allocation: this runs after the rename succeeded */
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    const int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd); /* best effort: some file systems refuse directory fsync */
        close(fd);
    }
}

cq_status cq_outfile_commit(cq_outfile *f) {
    if (!f || f->fd < 0) return cq_fail(CQ_ERR_INVALID_ARG, "cq_outfile_commit: the file is not open");
    cq_status s = CQ_OK;
    if (f->to_stdout) {
        f->fd = -1; /* standard output stays open for the caller */
        outfile_clear(f);
        return CQ_OK;
    }
    if (fsync(f->fd) != 0) s = io_error(f, errno);
    if (close(f->fd) != 0 && s == CQ_OK) s = io_error(f, errno);
    f->fd = -1;
    struct stat st;
    if (s == CQ_OK && lstat(f->final, &st) == 0 && !S_ISREG(st.st_mode))
        s = cq_fail(CQ_ERR_IO, "'%s' became %s while it was being written; left it as it is", f->target,
                    kind_of(st.st_mode));
    if (s == CQ_OK && rename(f->tmp, f->final) != 0)
        s = cq_fail(CQ_ERR_IO, "cannot put '%s' in place: %s", f->target, strerror(errno));
    if (s == CQ_OK) {
        slot_release(f->slot);
        f->slot = -1;
        fsync_dir(f->final);
        outfile_clear(f);
        return CQ_OK;
    }
    cq_outfile_abort(f);
    return s;
}

void cq_outfile_abort(cq_outfile *f) {
    if (!f) return;
    if (f->fd >= 0 && !f->to_stdout) close(f->fd);
    if (f->tmp) unlink(f->tmp);
    slot_release(f->slot);
    outfile_clear(f);
}
