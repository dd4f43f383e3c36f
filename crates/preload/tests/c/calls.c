/* Test program for perfaux record -- ./prog: recursion, threads, a longjmp out of traced
 * frames, and a crash on request.
 * Usage: calls [threads [depth [how [nojmp]]]]; how:
 *   none, segv, abort, hang (in boom);
 *   fork (a child that returns through the traced frames), forksegv (a child that crashes in
 *   boom after fib(5); the parent goes on), forkstay (a child that calls fib(5), then leaf()
 *   until killed, its output on /dev/null; the parent waits for its fib(5) and ends);
 *   forkexec (a child that execs itself as `calls 0 4 nojmp`), spawnexec (the same child made
 *   by posix_spawn), closefds (the same child after it put other files, sealed memfds among
 *   them, under every inherited descriptor number), exec (itself again);
 *   forkexecs (THREADS children one after another, each traced before it execs itself as
 *   `calls 0 2 nojmp`), forkends (THREADS children one after another, each with a traced
 *   worker thread still running when the child ends without its threads' destructors: by
 *   _exit, by exit from the main thread, or killed by SIGKILL, in turn), zombies (THREADS
 *   children alive at once, each traced, all killed at once and left unreaped while THREADS
 *   threads start, each with its calls);
 *   serial (the threads made one after another, each joined before the next, any number),
 *   together (all the threads alive at once: each waits for the others after its calls, any
 *   number);
 *   nojmp (no longjmp; also as a 4th argument). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static volatile int sink;

__attribute__((noinline)) int leaf(int x) { sink += x; return x + 1; }

__attribute__((noinline)) int fib(int n) {
    if (n < 2) return leaf(n);
    return fib(n - 1) + fib(n - 2);
}

__attribute__((noinline)) void *worker(void *arg) {
    int n = (int)(long)arg;
    for (int i = 0; i < n; i++) leaf(i);
    fib(10);
    return NULL;
}

/* Waits for child `pid`, says its pid ("forked PID"), aborts unless it exited with 0.
 * Untraced, so that the modes that use it have the call counts they had. */
__attribute__((no_instrument_function)) static void wait_child(pid_t pid) {
    int st;
    waitpid(pid, &st, 0);
    printf("forked %d\n", (int)pid);
    fflush(stdout);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) abort();
}

static jmp_buf jb;

__attribute__((noinline)) void dive(int n) {
    if (n == 0) longjmp(jb, 1);
    dive(n - 1);
}

/* The frames of dive() never return: a longjmp leaves them. */
__attribute__((noinline)) int jumpy(void) {
    if (setjmp(jb) == 0) dive(4);
    return leaf(7);
}

/* How many children "forkexecs" and "forkends" make (the threads argument). */
static int forkexecs_count;

static int stuck_ready[2];

/* A child's worker of "forkends": a traced call, then it says so and stays in its frame until
 * the child ends. */
__attribute__((noinline)) void *stuck_worker(void *arg) {
    leaf((int)(long)arg);
    char c = 1;
    if (write(stuck_ready[1], &c, 1) != 1) _exit(1);
    for (;;) pause();
    return NULL;
}

/* A child of "forkends": its worker traced and running, then the end `kind` says (0: _exit,
 * 1: exit, 2: SIGKILL), none of which runs the worker's thread-local destructors (_exit and
 * SIGKILL not the main thread's either). */
__attribute__((noinline)) void child_ends(int kind) {
    pthread_t t;
    if (pipe(stuck_ready) != 0 || pthread_create(&t, NULL, stuck_worker, (void *)1L) != 0)
        _exit(2);
    char c;
    if (read(stuck_ready[0], &c, 1) != 1) _exit(3);
    leaf(kind);
    if (kind == 0) _exit(0);
    if (kind == 1) exit(0);
    raise(SIGKILL);
}

/* "zombies": `n` children, each traced (leaf) and then waiting; all killed at once and left
 * unreaped (their slots held by processes that are gone), then `n` threads started at once,
 * which find no slot free until the recorder frees the zombies'. Untraced, as the waits are. */
__attribute__((no_instrument_function)) static void zombies(int n) {
    int ready[2], hold[2];
    pid_t *kids = calloc(n, sizeof *kids);
    pthread_t *t = calloc(n, sizeof *t);
    if (!kids || !t || pipe(ready) != 0 || pipe(hold) != 0) abort();
    for (int i = 0; i < n; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            char c = 1;
            leaf(i);
            if (write(ready[1], &c, 1) != 1) _exit(1);
            (void)read(hold[0], &c, 1);
            _exit(0);
        }
    }
    char c;
    for (int i = 0; i < n; i++)
        if (read(ready[0], &c, 1) != 1) abort();
    for (int i = 0; i < n; i++) kill(kids[i], SIGKILL);
    for (int i = 0; i < n; i++) {
        siginfo_t info;
        if (waitid(P_PID, kids[i], &info, WEXITED | WNOWAIT) != 0) abort();
    }
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)1L) != 0) abort();
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < n; i++) waitpid(kids[i], NULL, 0);
    free(kids);
    free(t);
}

__attribute__((noinline)) void boom(const char *how) {
    if (strcmp(how, "segv") == 0) {
        volatile int *p = NULL;
        *p = 1;
    } else if (strcmp(how, "abort") == 0) {
        abort();
    } else if (strcmp(how, "fork") == 0 || strcmp(how, "forksegv") == 0) {
        /* The child returns through every frame the parent's runtime hijacked. */
        int crash = strcmp(how, "forksegv") == 0;
        pid_t pid = fork();
        if (pid == 0) {
            fib(5);
            if (crash) boom("segv");
            return;
        }
        int st;
        waitpid(pid, &st, 0);
        printf("forked %d\n", (int)pid);
        fflush(stdout);
        if (crash ? !WIFSIGNALED(st) || WTERMSIG(st) != SIGSEGV
                  : !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            abort();
    } else if (strcmp(how, "forkstay") == 0) {
        int fds[2];
        if (pipe(fds) != 0) abort();
        pid_t pid = fork();
        if (pid == 0) {
            int null = open("/dev/null", O_WRONLY);
            dup2(null, 1);
            dup2(null, 2);
            fib(5);
            char c = 1;
            if (write(fds[1], &c, 1) != 1) _exit(1);
            for (;;) leaf(1);
        }
        char c;
        if (read(fds[0], &c, 1) != 1) abort();
        printf("forked %d\n", (int)pid);
        fflush(stdout);
    } else if (strcmp(how, "forkexec") == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            execl("/proc/self/exe", "calls", "0", "4", "nojmp", (char *)NULL);
            _exit(127);
        }
        wait_child(pid);
    } else if (strcmp(how, "forkexecs") == 0) {
        /* `forkexecs_count` children one after another, each calling leaf() (traced: a slot
         * of its own) before it execs itself as `calls 0 2 nojmp`. */
        for (int i = 0; i < forkexecs_count; i++) {
            pid_t pid = fork();
            if (pid == 0) {
                leaf(i);
                execl("/proc/self/exe", "calls", "0", "2", "nojmp", (char *)NULL);
                _exit(127);
            }
            int st;
            waitpid(pid, &st, 0);
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) abort();
        }
    } else if (strcmp(how, "forkends") == 0) {
        for (int i = 0; i < forkexecs_count; i++) {
            pid_t pid = fork();
            if (pid == 0) child_ends(i % 3);
            int st;
            waitpid(pid, &st, 0);
            if (i % 3 == 2 ? !WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL
                           : !WIFEXITED(st) || WEXITSTATUS(st) != 0)
                abort();
        }
    } else if (strcmp(how, "zombies") == 0) {
        zombies(forkexecs_count);
    } else if (strcmp(how, "spawnexec") == 0) {
        /* posix_spawn (glibc: clone with CLONE_VFORK, no fork handlers run), as shells and
         * build tools start their commands. */
        char *argv[] = {"calls", "0", "4", "nojmp", NULL};
        pid_t pid;
        if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ) != 0) abort();
        wait_child(pid);
    } else if (strcmp(how, "closefds") == 0) {
        /* A child that puts other files under every inherited descriptor number above 2 (as
         * a shell or Python's close_fds may leave them), then execs itself as
         * `calls 0 4 nojmp`: under each open one a memfd of the same size, sealed like the
         * recorder's and against writes; under the others the file named by CALLS_SCRATCH. */
        pid_t pid = fork();
        if (pid == 0) {
            const char *path = getenv("CALLS_SCRATCH");
            int f = path ? open(path, O_RDWR) : -1;
            if (f < 0) _exit(126);
            for (int fd = 3; fd < 1024; fd++) {
                struct stat st;
                if (fd == f) continue;
                if (fstat(fd, &st) == 0 && st.st_size > 0) {
                    int m = memfd_create("impostor", MFD_ALLOW_SEALING);
                    if (m < 0 || ftruncate(m, st.st_size) != 0 ||
                        fcntl(m, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) != 0)
                        _exit(125);
                    dup2(m, fd);
                    close(m);
                } else {
                    dup2(f, fd);
                }
            }
            execl("/proc/self/exe", "calls", "0", "4", "nojmp", (char *)NULL);
            _exit(127);
        }
        wait_child(pid);
    } else if (strcmp(how, "exec") == 0) {
        /* The new image is traced again: same process, same recording. */
        execl("/proc/self/exe", "calls", "0", "4", (char *)NULL);
        abort();
    } else if (strcmp(how, "hang") == 0) {
        printf("hanging in boom, pid %d\n", (int)getpid());
        fflush(stdout);
        for (;;) leaf(1);
    }
}

__attribute__((noinline)) void on_the_way(const char *how) { boom(how); }

static pthread_barrier_t all_here;

/* A worker of "together": its calls, then it waits until every worker made them. */
__attribute__((noinline)) void *together_worker(void *arg) {
    worker(arg);
    pthread_barrier_wait(&all_here);
    return NULL;
}

/* Threads for "serial" and "together", any number. Untraced, as the waits are. */
__attribute__((no_instrument_function)) static int many_threads(const char *how, int threads) {
    if (strcmp(how, "serial") == 0) {
        for (int i = 0; i < threads; i++) {
            pthread_t t;
            if (pthread_create(&t, NULL, worker, (void *)20L) != 0) abort();
            pthread_join(t, NULL);
        }
        return 1;
    }
    if (strcmp(how, "together") == 0) {
        pthread_t *t = calloc(threads, sizeof *t);
        if (!t || pthread_barrier_init(&all_here, NULL, threads) != 0) abort();
        for (int i = 0; i < threads; i++)
            if (pthread_create(&t[i], NULL, together_worker, (void *)20L) != 0) abort();
        for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
        free(t);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    int depth = argc > 2 ? atoi(argv[2]) : 12;
    const char *crash = argc > 3 ? argv[3] : "none";
    pthread_t t[64];
    if (many_threads(crash, threads)) threads = 0;
    if (strcmp(crash, "forkexecs") == 0 || strcmp(crash, "forkends") == 0 ||
        strcmp(crash, "zombies") == 0) {
        forkexecs_count = threads;
        threads = 0;
    }
    if (threads > 64) threads = 64;
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, worker, (void *)(long)(100 * (i + 1)));
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    printf("fib(%d) = %d\n", depth, fib(depth));
    fflush(stdout);
    if (strcmp(crash, "nojmp") != 0 && (argc < 5 || strcmp(argv[4], "nojmp") != 0)) jumpy();
    on_the_way(crash);
    return 0;
}
