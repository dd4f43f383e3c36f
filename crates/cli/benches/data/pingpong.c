/* A request-serving program for the cost of recording the kernel's context switches
 * (crates/cli/benches/record_program.rs, record_program_switches): a client thread sends N
 * requests through a pipe to a server thread, which parses each, computes its answer in a few
 * calls and replies through another pipe. Every request blocks each thread once: two context
 * switches or more per request. Usage: pingpong N. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static int to_server[2], to_client[2];
volatile long sink;

__attribute__((noinline)) long parse(long r) { return r * 7 + 1; }
__attribute__((noinline)) long compute(long x)
{
	long s = 0;
	for (long i = 0; i < 64; i++)
		s += x ^ i;
	return s;
}
__attribute__((noinline)) long handle_request(long r) { return compute(parse(r)); }

static void *server(void *a)
{
	long r;
	while (read(to_server[0], &r, sizeof r) == sizeof r && r >= 0) {
		long reply = handle_request(r);
		if (write(to_client[1], &reply, sizeof reply) != sizeof reply)
			break;
	}
	return a;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000;
	pthread_t t;
	if (pipe(to_server) || pipe(to_client))
		return 1;
	pthread_create(&t, 0, server, 0);
	for (long r = 0; r <= n; r++) {
		long req = r < n ? r : -1, reply;
		if (write(to_server[1], &req, sizeof req) != sizeof req)
			return 1;
		if (r < n && read(to_client[0], &reply, sizeof reply) == sizeof reply)
			sink += reply;
	}
	pthread_join(t, 0);
	return 0;
}
