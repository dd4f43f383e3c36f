/* About 2.83 million calls, the shape of perfaux's built-in workload:
   a request handler calling a few leaves and a recursive fib. */
#include <stdio.h>
static int parse_request(int r) { return r * 3; }
static int lookup_cache(int r) { return r & 7; }
static long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
static long mat_mul(int r) { return (long)r * r; }
static long compute(int r) { return fib(7 + (r & 1)) + mat_mul(r); }
static void send_response(long v) { if (v == -1) puts("x"); }
static void serve_request(int r) { parse_request(r); lookup_cache(r); send_response(compute(r)); }
int main(void) { for (int r = 0; r < 48000; r++) serve_request(r); return 0; }
