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
 *   hostile scribble       a thread makes 1000 calls of f and ends; 200 ms later (the
 *                          recorder has drained it) the main thread fills every writable
 *                          memfd mapping of the process with pseudo-random words (a wild
 *                          pointer's work on perfaux's rings and control area), then makes
 *                          1000 calls and one more such thread; prints the mappings written
 *                          and its sums
 *   hostile unreachable    (as root) closes every descriptor above 2 and becomes user 65534,
 *                          then runs 3 threads one after another: its process can open the
 *                          recorder's memfds neither by number nor through /proc; prints
 *                          "ran 3 threads" (or "not root" without root)
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

/* Fills every writable shared memfd mapping of the process with xorshift words; how many. */
__attribute__((no_instrument_function)) static int scribble_memfds(void)
{
    FILE *m = fopen("/proc/self/maps", "r");
    if (!m)
        return -1;
    char line[4096];
    int n = 0;
    unsigned long long x = 0x9e3779b97f4a7c15ull;
    while (fgets(line, sizeof line, m)) {
        unsigned long a, b;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &a, &b, perms) != 3)
            continue;
        if (!strstr(line, "memfd:") || perms[1] != 'w')
            continue;
        for (volatile unsigned long long *p = (void *)a; p < (unsigned long long *)b; p++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *p = x;
        }
        n++;
    }
    fclose(m);
    return n;
}

__attribute__((noinline)) void *thousand(void *a)
{
    int s = 0;
    for (int i = 0; i < 1000; i++)
        s = f(s);
    return (void *)(long)s;
}

static int scribble(void)
{
    pthread_t t;
    void *before, *after;
    pthread_create(&t, 0, thousand, 0);
    pthread_join(t, &before);
    usleep(200000);
    int n = scribble_memfds();
    int s = 0;
    for (int i = 0; i < 1000; i++)
        s = f(s);
    pthread_create(&t, 0, thousand, 0);
    pthread_join(t, &after);
    printf("scribbled %d mappings; sums %ld %d %ld\n", n, (long)before, s, (long)after);
    return 0;
}

static int unreachable(void)
{
    if (geteuid() != 0) {
        printf("not root\n");
        return 0;
    }
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    if (setgid(65534) != 0 || setuid(65534) != 0)
        return 5;
    int n = 0;
    for (int k = 0; k < 3; k++) {
        pthread_t t;
        void *r;
        pthread_create(&t, 0, thousand, 0);
        pthread_join(t, &r);
        n += r == (void *)1000L;
    }
    printf("ran %d threads\n", n);
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
    if (argc >= 2 && strcmp(argv[1], "scribble") == 0)
        return scribble();
    if (argc >= 2 && strcmp(argv[1], "unreachable") == 0)
        return unreachable();
    fprintf(stderr, "usage: hostile signals USEC | cancel | threads N | orphan DIR N | scribble | unreachable\n");
    return 2;
}
