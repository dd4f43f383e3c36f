/* uevents from C between traced calls: usage uevents N (N uevents, one per step()). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perfaux.h"

__attribute__((noinline)) int step(int i) { return i * 3; }

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 3;
    char big[5000];
    memset(big, 'x', sizeof big);
    for (int i = 0; i < n; i++) {
        char msg[32];
        int len = snprintf(msg, sizeof msg, "step %d", i);
        step(i);
        if (perfaux_uevent(7, msg, (size_t)len) != 0) return 10;
    }
    /* The seed's errno rules. */
    int r = perfaux_uevent(7, big, sizeof big);
    printf("big: %d %s\n", r, r ? strerror(errno) : "ok");
    return 0;
}
