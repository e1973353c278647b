/*
 * cmd_verify.c — `cortiq verify`: open (full structural validation) and
 * recompute every tensor's hash64 plus the header, directory and section
 * hashes. Exit 0 when all match, 1 naming the first mismatch otherwise.
 * The open skips the hash checks an ordinary open makes, so a damaged file
 * still opens and every problem is counted; when the structure itself is
 * too damaged to open, the header/directory hash check says whether the
 * bytes changed after writing.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

static void help(void) {
    printf("usage: cortiq verify FILE.cmf [--quiet]\n"
           "\n"
           "Validate the file's structure and recompute every integrity hash (each tensor's\n"
           "hash64, the header and directory hashes, and the section hashes recorded in the\n"
           "header). Exit status 0 when everything matches; 1 when the file is damaged (the\n"
           "first bad tensor or section is named); 2 for a usage error.\n"
           "\n"
           "options:\n"
           "  -q, --quiet   no progress bar, no success line\n"
           "  -h, --help    this text\n");
}

static int on_progress(uint64_t done, uint64_t total, void *user) {
    cq_progress *p = user;
    p->total = total;
    cq_progress_update(p, done);
    return 0;
}

int cq_cmd_verify(int argc, char **argv) {
    const char *cmd = "verify", *path = NULL;
    bool quiet = false;
    for (int i = 1; i < argc; i++) {
        if (cq_cli_is_help(argv[i])) {
            help();
            return 0;
        } else if (strcmp(argv[i], "-q") == 0 || strcmp(argv[i], "--quiet") == 0) {
            quiet = true;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cq_cli_usage_error(cmd, "unknown option '%s'", argv[i]);
        } else if (!path) {
            path = argv[i];
        } else {
            return cq_cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
        }
    }
    if (!path) return cq_cli_usage_error(cmd, "missing the .cmf file");
    cq_cli_catch_signals();
    cq_cmf *cmf;
    cq_cmf_open_opts all_off = {.no_verify = true, .no_envelope_hashes = true};
    cq_status s = cq_cmf_open_ex(path, &all_off, &cmf);
    if (s != CQ_OK) {
        char first[4200];
        snprintf(first, sizeof first, "%s", cq_last_error());
        cq_cmf_open_opts envelope = {.no_verify = true};
        cq_cmf *again = NULL;
        if (cq_cmf_open_ex(path, &envelope, &again) == CQ_ERR_HASH) {
            /* what the structure shows is a consequence: lead with the cause (less its hint to run verify) */
            char cause[4200];
            snprintf(cause, sizeof cause, "%s", cq_last_error());
            char *hint = strstr(cause, "; run `cortiq verify");
            if (hint) *hint = '\0';
            fprintf(stderr, "cortiq %s: error: %s (%s)\n", cmd, cause, cq_status_str(CQ_ERR_HASH));
            fprintf(stderr, "cortiq %s: the structure does not parse either: %s (%s)\n", cmd, first, cq_status_str(s));
            return 1;
        }
        cq_cmf_close(again);
        cq_fail(s, "%s", first);
        return cq_cli_fail(cmd, s, strstr(first, path) ? NULL : path);
    }
    cq_progress bar = {0};
    bool show_bar = !quiet && isatty(STDERR_FILENO);
    cq_progress_begin(&bar, "verifying", 0, !show_bar);
    size_t problems = 0;
    double t0 = cq_now();
    s = cq_cmf_verify(cmf, &problems, show_bar ? on_progress : NULL, &bar);
    if (show_bar) cq_progress_end(&bar);
    int rc = 0;
    if (s != CQ_OK) {
        char what[4200];
        snprintf(what, sizeof what, "%s: %zu problem%s, the first", path, problems, problems == 1 ? "" : "s");
        rc = cq_cli_fail(cmd, s, what);
    } else if (!quiet) {
        printf("%s: OK, %zu tensors and every recorded hash match (%.2f s)\n", path, cq_cmf_tensor_count(cmf),
               cq_now() - t0);
    }
    cq_cmf_close(cmf);
    return rc;
}
