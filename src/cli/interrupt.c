/*
 * interrupt.c — SIGINT, SIGTERM and SIGHUP for the commands whose work
 * polls the library's cancellation flag (imagine, convert, verify, run).
 *
 * The first signal sets the flag: the work stops at its next unit (a step, a
 * tensor, a chunk of bytes), removes its temporaries on the way out, and the
 * command prints one line and exits 128 + the signal number (130 for Ctrl-C).
 * A second signal removes every live temporary right away and exits: a
 * stuck write never leaves partial files behind.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/outfile.h"
#include "cli/cli.h"

static volatile sig_atomic_t g_signal;

static void on_signal(int sig) {
    if (g_signal) {
        cq_outfile_remove_temps();
        static const char msg[] = "\ncortiq: interrupted again; removed partial output and stopped\n";
        (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
        _exit(128 + sig);
    }
    g_signal = sig;
    cq_cancel_request();
}

void cq_cli_catch_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: a blocking read (chat input) returns EINTR */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

int cq_cli_signal(void) { return (int)g_signal; }

const char *cq_cli_signal_name(int sig) {
    switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "a signal";
    }
}

int cq_cli_interrupted(const char *cmd, const char *what) {
    const int sig = g_signal ? (int)g_signal : SIGINT;
    fprintf(stderr, "cortiq %s: interrupted by %s%s%s\n", cmd, cq_cli_signal_name(sig), what && *what ? "; " : "",
            what ? what : "");
    return 128 + sig;
}
