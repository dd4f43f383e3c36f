/* A recursion deeper than the runtime's return stack (8,192 open calls): `deep N` makes
 * `recurse` N levels deep and prints the depth it reached. */
#include <stdio.h>
#include <stdlib.h>

/* Not a tail call: each level adds after its callee returns, so no level is folded away. */
__attribute__((noinline)) int recurse(int n)
{
    if (n <= 1)
        return 1;
    return recurse(n - 1) + 1;
}

int main(int argc, char **argv)
{
    int depth = argc > 1 ? atoi(argv[1]) : 10000;
    printf("depth %d\n", recurse(depth));
    return 0;
}
