/* Threads calling the program's own functions while the main thread dlopens a plugin
 * (libplugin.so from lib.c) and calls it: for `perfaux record -P`, which patches the plugin
 * while the other threads run in the executable. Usage: dlopen_threads DIR THREADS CALLS;
 * prints how many calls the threads made and the plugin's sum. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int calls;
static volatile int sink;

__attribute__((noinline)) void spin(int i) { sink += i; }

static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < calls; i++) spin(i);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 4) return 2;
    int threads = atoi(argv[2]);
    calls = atoi(argv[3]);
    pthread_t t[64];
    if (threads > 64) threads = 64;
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, worker, NULL);
    char path[4096];
    snprintf(path, sizeof path, "%s/libplugin.so", argv[1]);
    void *h = dlopen(path, RTLD_NOW);
    if (!h) return 3;
    int (*sum)(int) = (int (*)(int))dlsym(h, "plugin_sum");
    int s = 0;
    for (int i = 0; i < 10; i++) s += sum(7);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    printf("%d calls, sum %d\n", threads * calls, s);
    return 0;
}
