/* A request loop for the probe-event tests of `perfaux record -- ./server N`: each request is
 * served between handle_request() (where a probe can resume the trace) and send_reply()
 * (where one can pause it). work() runs 3 times per request inside that window (twice in
 * handle_request, once between it and send_reply) and once per idle() call outside it
 * (N + 1 idle calls). Prints the counts it made. */
#include <stdio.h>
#include <stdlib.h>

volatile long sink;

__attribute__((noinline)) void work(long x) { sink += x; }

__attribute__((noinline)) void handle_request(long r)
{
	work(r);
	work(r + 1);
}

__attribute__((noinline)) void send_reply(long r) { sink -= r; }

__attribute__((noinline)) void idle(long r) { work(-r); }

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 5;
	idle(0);
	for (long r = 1; r <= n; r++) {
		handle_request(r);
		work(r);
		send_reply(r);
		idle(r);
	}
	printf("requests %ld work_inside %ld work_outside %ld\n", n, 3 * n, n + 1);
	return 0;
}
