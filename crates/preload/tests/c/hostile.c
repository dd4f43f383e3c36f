/* Programs that are hard on a tracer (crates/cli/tests/record_program_hostile.rs).
 *
 *   hostile signals USEC   a 3,000,000-call loop under a SIGALRM timer of USEC microseconds
 *                          whose (instrumented) handler counts its runs; prints the count
 *   hostile cancel         64 threads cancelled right after pthread_create, then 10 plain
 *                          ones; prints how often the thread body ran
 *   hostile threads N      makes N short threads one after another
 *   hostile orphan DIR N   asks for a uevent (so the main thread traces), creates DIR/started,
 *                          waits until DIR/go exists (the test kills the recorder first), then
 *                          makes N short threads one after another, each asking for a uevent;
 *                          prints how many the runtime refused with ENODEV
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "../../../../include/perfaux.h"

static volatile sig_atomic_t alarms;

void on_alarm(int s)
{
    (void)s;
    alarms++;
}

__attribute__((noinline)) int f(int x)
{
    return x + 1;
}

static int signals(int usec)
{
    signal(SIGALRM, on_alarm);
    struct itimerval it = {{0, usec}, {0, usec}};
    setitimer(ITIMER_REAL, &it, 0);
    int s = 0;
    for (int i = 0; i < 3000000; i++)
        s = f(s);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, 0);
    printf("handler ran %d times\n", (int)alarms);
    return s == 3000000 ? 0 : 1;
}

static int ran;

__attribute__((noinline)) void *body(void *a)
{
    __atomic_add_fetch(&ran, 1, __ATOMIC_SEQ_CST);
    return a;
}

static int cancel(void)
{
    pthread_t t;
    for (int k = 0; k < 64; k++) {
        pthread_create(&t, 0, body, 0);
        pthread_cancel(t);
        pthread_join(t, 0);
    }
    for (int k = 0; k < 10; k++) {
        pthread_create(&t, 0, body, 0);
        pthread_join(t, 0);
    }
    printf("body ran %d times\n", ran);
    return 0;
}

static int threads(int n)
{
    for (int k = 0; k < n; k++) {
        pthread_t t;
        pthread_create(&t, 0, body, 0);
        pthread_join(t, 0);
    }
    printf("body ran %d times\n", ran);
    return 0;
}

static int refused;

__attribute__((noinline)) void *asks(void *a)
{
    if (perfaux_uevent(1, "x", 1) != 0 && errno == ENODEV)
        __atomic_add_fetch(&refused, 1, __ATOMIC_SEQ_CST);
    return a;
}

static int orphan(const char *dir, int n)
{
    char started[4096], go[4096];
    snprintf(started, sizeof started, "%s/started", dir);
    snprintf(go, sizeof go, "%s/go", dir);
    /* The main thread is traced before the recorder goes. */
    if (perfaux_uevent(1, "main", 4) != 0)
        return 3;
    FILE *s = fopen(started, "w");
    if (!s)
        return 4;
    fclose(s);
    while (access(go, F_OK) != 0)
        usleep(1000);
    for (int k = 0; k < n; k++) {
        pthread_t t;
        pthread_create(&t, 0, asks, 0);
        pthread_join(t, 0);
    }
    printf("%d of %d threads refused\n", refused, n);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "signals") == 0)
        return signals(atoi(argv[2]));
    if (argc >= 2 && strcmp(argv[1], "cancel") == 0)
        return cancel();
    if (argc >= 3 && strcmp(argv[1], "threads") == 0)
        return threads(atoi(argv[2]));
    if (argc >= 4 && strcmp(argv[1], "orphan") == 0)
        return orphan(argv[2], atoi(argv[3]));
    fprintf(stderr, "usage: hostile signals USEC | cancel | threads N | orphan DIR N\n");
    return 2;
}
