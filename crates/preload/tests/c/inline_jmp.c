/* A setjmp loop whose work() leaves by longjmp, half the time, through a helper gcc inlines
 * into it (crates/cli/tests/record_program.rs): every work() is main's callee, however many
 * longjmps came before. */
#include <setjmp.h>
#include <stdio.h>

static jmp_buf jb;

__attribute__((noinline)) void die(void)
{
    longjmp(jb, 1);
}

static inline void check(int ok)
{
    if (!ok)
        die();
}

__attribute__((noinline)) int work(int i)
{
    check(i & 1);
    return i * 3;
}

int main(void)
{
    volatile int sum = 0;
    for (int i = 0; i < 200; i++)
        if (!setjmp(jb))
            sum += work(i);
    printf("%d\n", sum);
    return 0;
}
