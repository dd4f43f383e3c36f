/* Test program for perfaux record -- ./prog: C++ exceptions through traced frames (thrown by
 * the program, by libstdc++ itself, rethrown, caught at several depths, with destructors run
 * on the way). Under -pg and -pg -mfentry the frames' return addresses are hijacked while the
 * calls run: the unwinder must still find its way (it ends in std::terminate otherwise).
 * Usage: exceptions [rounds] */
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <vector>

static volatile int sink;

struct Guard {
    int v;
    __attribute__((noinline)) explicit Guard(int x) : v(x) { sink += x; }
    __attribute__((noinline)) ~Guard() { sink -= v; }
};

__attribute__((noinline)) int leaf(int x) {
    if (x % 3 == 2) throw std::runtime_error("leaf");
    return x;
}

__attribute__((noinline)) int mid(int x) {
    Guard g(x);
    return leaf(x) + 1;
}

/* libstdc++ throws (std::out_of_range from vector::at). */
__attribute__((noinline)) int lib_throws(int x) {
    std::vector<int> v(2, x);
    return v.at(x % 4);
}

__attribute__((noinline)) int rethrows(int x) {
    try {
        return mid(x);
    } catch (const std::runtime_error &) {
        sink += 1;
        throw;
    }
}

__attribute__((noinline)) int top(int x) {
    try {
        return rethrows(x) + lib_throws(x);
    } catch (const std::exception &) {
        return -1;
    }
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 12;
    int s = 0;
    for (int i = 0; i < rounds; i++) s += top(i);
    printf("s=%d\n", s);
    return 0;
}
