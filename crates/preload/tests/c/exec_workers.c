/* Test program for perfaux record -- ./prog: an image that execs itself, whose new image's
 * worker thread is traced before its main thread (main is not instrumented).
 * Usage: exec_workers [again]. The first image calls first() and execs itself with "again";
 * the new image starts a worker that calls leaf() 100 times, then (once the main thread made
 * its first traced call, second()) 100 times more; the sleeps between give the recorder time
 * to see the worker, then the main thread, before the worker goes on. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile int sink;
static int to_worker[2];

__attribute__((noinline)) int leaf(int x) { sink += x; return x + 1; }
__attribute__((noinline)) void first(void) { leaf(1); }
__attribute__((noinline)) void second(void) { leaf(2); }

__attribute__((noinline)) void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < 100; i++) leaf(i);
    char c;
    if (read(to_worker[0], &c, 1) != 1) abort();
    for (int i = 0; i < 100; i++) leaf(i);
    return NULL;
}

__attribute__((no_instrument_function)) int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "again") != 0) {
        first();
        execl("/proc/self/exe", "exec_workers", "again", (char *)NULL);
        return 127;
    }
    if (pipe(to_worker) != 0) abort();
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0) abort();
    usleep(30000);
    second();
    usleep(30000);
    if (write(to_worker[1], "x", 1) != 1) abort();
    pthread_join(t, NULL);
    return 0;
}
