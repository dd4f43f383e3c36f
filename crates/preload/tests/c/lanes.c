/* Two threads at once, each calling slow() five times back to back (crates/cli/tests/
 * flame_chart.rs): the flame chart must show two lanes on one clock, and ten bars of slow. */
#include <pthread.h>
#include <time.h>

static unsigned long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (unsigned long long)t.tv_sec * 1000000000ull + (unsigned long long)t.tv_nsec;
}

/* Spins 300 us: long enough to be a bar of its own at any zoom the chart is drawn at. */
__attribute__((noinline)) void slow(void)
{
    unsigned long long end = now_ns() + 300000;
    while (now_ns() < end)
        ;
}

__attribute__((noinline)) void *five(void *a)
{
    for (int i = 0; i < 5; i++)
        slow();
    return a;
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, 0, five, 0);
    five(0);
    pthread_join(t, 0);
    return 0;
}
