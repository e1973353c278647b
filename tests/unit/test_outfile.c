/*
 * test_outfile.c — the safe output helper (src/base/outfile.c): only regular
 * files are replaced, links are followed to their file, temporaries never
 * outlive a failure or an abort, permissions are kept.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "base/outfile.h"
#include "testutil.h"

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static char *read_text(const char *path) {
    size_t n = 0;
    uint8_t *b = tu_read_file(path, &n);
    if (!b) return NULL;
    char *s = realloc(b, n + 1);
    s[n] = '\0';
    return s;
}

static cq_status write_all(const char *path, const char *text, const cq_outfile_opts *o) {
    cq_outfile f;
    CQ_TRY(cq_outfile_open(path, o, &f));
    cq_status s = cq_outfile_write(&f, text, strlen(text));
    if (s != CQ_OK) {
        cq_outfile_abort(&f);
        return s;
    }
    return cq_outfile_commit(&f);
}

static void test_new_and_replace(void **state) {
    (void)state;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", tu_tmpdir("outfile_replace"));
    const char *p = tu_path(dir, "a.txt");
    const cq_outfile_opts o = {.format = "text"};
    assert_int_equal(write_all(p, "one", &o), CQ_OK);
    char *t = read_text(p);
    assert_string_equal(t, "one");
    free(t);
    /* a new file gets 0666 less the umask */
    const mode_t um = umask(0);
    umask(um);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0666 & ~um);
    /* a replaced file keeps its permissions */
    assert_int_equal(chmod(p, 0640), 0);
    assert_int_equal(write_all(p, "two", &o), CQ_OK);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    t = read_text(p);
    assert_string_equal(t, "two");
    free(t);
    assert_int_equal(count_entries(dir), 1); /* no temporary left */
}

static void test_refuses_non_regular(void **state) {
    (void)state;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", tu_tmpdir("outfile_refuse"));
    const cq_outfile_opts o = {.format = "PNG", .allow_stdout = true};
    cq_outfile f;
    /* a FIFO: opening it for writing would block; it must be refused untouched */
    const char *fifo = tu_path(dir, "f.png");
    assert_int_equal(mkfifo(fifo, 0644), 0);
    assert_int_equal(cq_outfile_open(fifo, &o, &f), CQ_ERR_IO);
    assert_non_null(strstr(cq_last_error(), "FIFO"));
    assert_non_null(strstr(cq_last_error(), "-o -"));
    struct stat st;
    assert_int_equal(lstat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    /* a directory */
    const char *sub = tu_path(dir, "sub.png");
    assert_int_equal(mkdir(sub, 0755), 0);
    assert_int_equal(cq_outfile_open(sub, &o, &f), CQ_ERR_IO);
    assert_non_null(strstr(cq_last_error(), "is a directory"));
    /* a missing directory, named as typed */
    assert_int_equal(cq_outfile_open(tu_path(dir, "no/such/x.png"), &o, &f), CQ_ERR_IO);
    assert_non_null(strstr(cq_last_error(), "does not exist"));
    assert_null(strstr(cq_last_error(), "cortiq-")); /* never the temporary's name */
    /* a path ending in a slash, and an empty one */
    assert_int_equal(cq_outfile_open(tu_path(dir, "x/"), &o, &f), CQ_ERR_INVALID_ARG);
    assert_int_equal(cq_outfile_open("", &o, &f), CQ_ERR_INVALID_ARG);
    /* a dangling link is not followed to create a file */
    const char *dang = tu_path(dir, "dang.png");
    assert_int_equal(symlink("nowhere.png", dang), 0);
    assert_int_equal(cq_outfile_open(dang, &o, &f), CQ_ERR_IO);
    assert_non_null(strstr(cq_last_error(), "does not exist"));
    assert_int_equal(access(tu_path(dir, "nowhere.png"), F_OK), -1);
    /* a link to a process's descriptor */
    const char *fd1 = tu_path(dir, "fd1.png");
    assert_int_equal(symlink("/proc/self/fd/1", fd1), 0);
    assert_int_equal(cq_outfile_open(fd1, &o, &f), CQ_ERR_IO);
    assert_non_null(strstr(cq_last_error(), "descriptor"));
    assert_int_equal(cq_outfile_open("/dev/stdout", &o, &f), CQ_ERR_IO);
    /* standard output only where the format streams */
    const cq_outfile_opts no_stdout = {.format = "CMF"};
    assert_int_equal(cq_outfile_open("-", &no_stdout, &f), CQ_ERR_INVALID_ARG);
    assert_non_null(strstr(cq_last_error(), "standard output"));
    assert_int_equal(count_entries(dir), 4); /* f.png, sub.png, dang.png, fd1.png: nothing else */
}

static void test_link_replaces_its_file(void **state) {
    (void)state;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", tu_tmpdir("outfile_link"));
    const char *real = tu_path(dir, "real.png");
    assert_int_equal(tu_write_file(real, "old", 3), 0);
    char link[1200];
    snprintf(link, sizeof link, "%s/link.png", dir);
    assert_int_equal(symlink("real.png", link), 0);
    const cq_outfile_opts o = {.format = "PNG"};
    assert_int_equal(write_all(link, "new", &o), CQ_OK);
    struct stat st;
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode)); /* the link stays a link */
    char *t = read_text(real);
    assert_string_equal(t, "new"); /* and its file has the new bytes */
    free(t);
    assert_int_equal(count_entries(dir), 2);
}

static void test_abort_and_signal_cleanup(void **state) {
    (void)state;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", tu_tmpdir("outfile_abort"));
    const char *p = tu_path(dir, "x.cmf");
    assert_int_equal(tu_write_file(p, "keep", 4), 0);
    const cq_outfile_opts o = {.format = "CMF"};
    cq_outfile f;
    assert_int_equal(cq_outfile_open(p, &o, &f), CQ_OK);
    assert_int_equal(cq_outfile_write(&f, "partial", 7), CQ_OK);
    assert_int_equal(count_entries(dir), 2); /* the temporary beside it */
    cq_outfile_abort(&f);
    cq_outfile_abort(&f); /* twice is harmless */
    assert_int_equal(count_entries(dir), 1);
    char *t = read_text(p);
    assert_string_equal(t, "keep"); /* the target is untouched */
    free(t);
    /* what a signal handler runs: every live temporary goes */
    cq_outfile g, h;
    assert_int_equal(cq_outfile_open(tu_path(dir, "g.cmf"), &o, &g), CQ_OK);
    assert_int_equal(cq_outfile_open(tu_path(dir, "h.cmf"), &o, &h), CQ_OK);
    assert_int_equal(count_entries(dir), 3);
    assert_int_equal(cq_outfile_remove_temps(), 2);
    assert_int_equal(count_entries(dir), 1);
    cq_outfile_abort(&g);
    cq_outfile_abort(&h);
    assert_int_equal(cq_outfile_remove_temps(), 0);
}

static void test_space_and_ext(void **state) {
    (void)state;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", tu_tmpdir("outfile_space"));
    const cq_outfile_opts huge = {.format = "CMF", .size_hint = UINT64_C(1) << 62};
    cq_outfile f;
    assert_int_equal(cq_outfile_open(tu_path(dir, "big.cmf"), &huge, &f), CQ_ERR_IO);
    assert_non_null(strstr(cq_last_error(), "not enough free space"));
    assert_int_equal(count_entries(dir), 0);
    assert_true(cq_path_has_ext("a/b.PNG", ".png"));
    assert_true(cq_path_has_ext("b.png", ".png"));
    assert_false(cq_path_has_ext(".png", ".png"));
    assert_false(cq_path_has_ext("a/.png", ".png"));
    assert_false(cq_path_has_ext("b.jpg", ".png"));
    assert_false(cq_path_has_ext("png", ".png"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_and_replace),
        cmocka_unit_test(test_refuses_non_regular),
        cmocka_unit_test(test_link_replaces_its_file),
        cmocka_unit_test(test_abort_and_signal_cleanup),
        cmocka_unit_test(test_space_and_ext),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
