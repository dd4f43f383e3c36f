/* A program with exactly 1,000 calls of tick (each making 1,000 calls of leaf), about 2 s
 * long: recorded with -S and snapshotted several times, each tick must be counted once. */
#include <unistd.h>
__attribute__((noinline)) void leaf(void) { asm volatile(""); }
__attribute__((noinline)) void tick(void)
{
	for (int i = 0; i < 1000; i++)
		leaf();
}
int main(void)
{
	for (int k = 0; k < 1000; k++) {
		tick();
		usleep(2000);
	}
	return 0;
}
