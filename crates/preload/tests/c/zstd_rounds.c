/* A driver of zstd's library (built from the C sources the zstd-sys crate bundles, by
 * crates/cli/tests/record_program_patch.rs): compresses and decompresses 1 MiB ROUNDS times
 * at levels 1-5, checks the round trip, prints the compressed bytes. The library is a real
 * program no one here wrote, for `perfaux record -P` against `uftrace record -P`.
 * Usage: zstd_rounds [ROUNDS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "zstd.h"
int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 3;
    size_t n = 1 << 20;
    char *src = malloc(n);
    for (size_t i = 0; i < n; i++) src[i] = "perfaux patches zstd "[i % 21] + (char)(i / 4096 % 7);
    size_t cap = ZSTD_compressBound(n);
    char *dst = malloc(cap), *back = malloc(n);
    size_t total = 0;
    for (int r = 0; r < rounds; r++) {
        size_t c = ZSTD_compress(dst, cap, src, n, 1 + r % 5);
        if (ZSTD_isError(c)) return 1;
        size_t d = ZSTD_decompress(back, n, dst, c);
        if (d != n || memcmp(src, back, n)) return 2;
        total += c;
    }
    printf("compressed %zu\n", total);
    return 0;
}
