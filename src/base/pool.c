/*
 * pool.c — a small fixed thread pool with dynamic task scheduling.
 *
 * One job at a time: the caller publishes (fn, arg, n_tasks), wakes the
 * workers, and all of them (caller included) pull task indices from an
 * atomic counter until none are left. A job started from inside a task runs
 * serially on that thread (t_in_task), which is what keeps nested ops from
 * oversubscribing the machine. Jobs from two unrelated threads are
 * serialised by run_lock.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "base/base.h"

struct cq_pool {
    int n_threads; /* including the caller */
    pthread_t *workers;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_cond_t done_cv;
    pthread_mutex_t run_lock;
    /* current job */
    cq_pool_fn fn;
    void *arg;
    size_t n_tasks;
    atomic_size_t next;
    int busy_workers;     /* workers still inside the current job */
    unsigned long generation;
    bool stop;
};

static _Thread_local bool t_in_task;

bool cq_pool_in_task(void) { return t_in_task; }

static void drain(cq_pool *p) {
    size_t n = p->n_tasks;
    for (;;) {
        size_t t = atomic_fetch_add(&p->next, 1);
        if (t >= n) break;
        p->fn(t, n, p->arg);
    }
}

static void *worker_main(void *vp) {
    cq_pool *p = vp;
    unsigned long seen = 0;
    t_in_task = true;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->stop && p->generation == seen) pthread_cond_wait(&p->wake, &p->lock);
        if (p->stop) break;
        seen = p->generation;
        pthread_mutex_unlock(&p->lock);
        drain(p);
        pthread_mutex_lock(&p->lock);
        if (--p->busy_workers == 0) pthread_cond_signal(&p->done_cv);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static _Atomic int g_default_threads; /* 0: the online cores */

void cq_set_default_threads(int n) { g_default_threads = n > 0 ? n : 0; }

int cq_default_threads(void) {
    int n = g_default_threads;
    return n > 0 ? n : cq_cpu()->logical_cores;
}

cq_status cq_pool_create(int n_threads, cq_pool **out) {
    *out = NULL;
    if (n_threads <= 0) n_threads = cq_default_threads();
    cq_pool *p = cq_calloc(1, sizeof *p);
    if (!p) return CQ_ERR_NOMEM;
    p->n_threads = n_threads;
    pthread_mutex_init(&p->lock, NULL);
    pthread_mutex_init(&p->run_lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    if (n_threads > 1) {
        p->workers = cq_calloc((size_t)n_threads - 1, sizeof(pthread_t));
        if (!p->workers) {
            cq_pool_free(p);
            return CQ_ERR_NOMEM;
        }
        for (int i = 0; i < n_threads - 1; i++) {
            if (pthread_create(&p->workers[i], NULL, worker_main, p) != 0) {
                p->n_threads = i + 1; /* the ones that started, plus the caller */
                cq_pool_free(p);
                return cq_fail(CQ_ERR_IO, "could not start worker thread %d of %d", i + 1, n_threads - 1);
            }
        }
    }
    *out = p;
    return CQ_OK;
}

void cq_pool_free(cq_pool *p) {
    if (!p) return;
    if (p->workers) {
        pthread_mutex_lock(&p->lock);
        p->stop = true;
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->lock);
        for (int i = 0; i < p->n_threads - 1; i++) pthread_join(p->workers[i], NULL);
        cq_free(p->workers);
    }
    pthread_mutex_destroy(&p->lock);
    pthread_mutex_destroy(&p->run_lock);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done_cv);
    cq_free(p);
}

int cq_pool_threads(const cq_pool *p) { return p ? p->n_threads : 1; }

void cq_pool_run(cq_pool *p, size_t n_tasks, cq_pool_fn fn, void *arg) {
    if (n_tasks == 0) return;
    if (!p || p->n_threads <= 1 || n_tasks == 1 || t_in_task) {
        for (size_t t = 0; t < n_tasks; t++) fn(t, n_tasks, arg);
        return;
    }
    pthread_mutex_lock(&p->run_lock);
    pthread_mutex_lock(&p->lock);
    p->fn = fn;
    p->arg = arg;
    p->n_tasks = n_tasks;
    atomic_store(&p->next, 0);
    p->busy_workers = p->n_threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);

    t_in_task = true;
    drain(p);
    t_in_task = false;

    pthread_mutex_lock(&p->lock);
    while (p->busy_workers > 0) pthread_cond_wait(&p->done_cv, &p->lock);
    pthread_mutex_unlock(&p->lock);
    pthread_mutex_unlock(&p->run_lock);
}
