/* Threads that leave through pthread_exit from inside nested calls, with a cleanup handler
 * that calls a function during the unwind: under -pg / -mfentry the runtime's hijacked return
 * addresses must be put back before glibc's forced unwind walks the stack (perfaux's
 * record_program_thread_exit test). Usage: thread_exit THREADS DEPTH */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static volatile int cleaned;

__attribute__((noinline)) void cleanup(void *arg) { cleaned += *(int *)arg; }

__attribute__((noinline)) void descend(int depth) {
    if (depth == 0)
        pthread_exit(NULL);
    descend(depth - 1);
}

__attribute__((noinline)) void *worker(void *arg) {
    int one = 1;
    pthread_cleanup_push(cleanup, &one);
    descend(*(int *)arg);
    pthread_cleanup_pop(0);
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 3;
    int depth = argc > 2 ? atoi(argv[2]) : 5;
    for (int i = 0; i < threads; i++) {
        pthread_t t;
        pthread_create(&t, NULL, worker, &depth);
        pthread_join(t, NULL);
    }
    printf("%d threads left through pthread_exit, %d cleanups\n", threads, cleaned);
    return 0;
}
