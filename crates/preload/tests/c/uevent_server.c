/* A small threaded server that says what it does in uevents: usage uevent_server N. Three
 * threads serve N requests each, each request between a "start" and a "done" uevent (type 1
 * and 2, payload "tT start R" / "tT done R"), as fast as they can: a burst that can fill a
 * small data area. Prints per thread the uevents whose call returned 0 and those refused with
 * ENOSPC (any other failure ends the program with 10). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "perfaux.h"

#define THREADS 3

static long requests = 100;
static long accepted[THREADS], refused[THREADS];
volatile long sink;

__attribute__((noinline)) void work(long x)
{
	for (int i = 0; i < 8; i++)
		sink += x;
}

__attribute__((noinline)) void handle(long r)
{
	work(r);
	work(r + 1);
}

static void say(long t, uint32_t type, const char *what, long r)
{
	char msg[48];
	int len = snprintf(msg, sizeof msg, "t%ld %s %ld", t, what, r);
	if (perfaux_uevent(type, msg, (size_t)len) == 0)
		accepted[t]++;
	else if (errno == ENOSPC)
		refused[t]++;
	else
		exit(10);
}

static void *serve(void *arg)
{
	long t = (long)arg;
	for (long r = 0; r < requests; r++) {
		say(t, 1, "start", r);
		handle(r);
		say(t, 2, "done", r);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		requests = atol(argv[1]);
	pthread_t th[THREADS];
	for (long t = 0; t < THREADS; t++)
		pthread_create(&th[t], 0, serve, (void *)t);
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], 0);
	for (int t = 0; t < THREADS; t++)
		printf("t%d accepted %ld refused %ld\n", t, accepted[t], refused[t]);
	return 0;
}
