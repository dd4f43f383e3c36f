/* Calls a linked shared library and one it dlopens: usage libmain DIR (where libplugin.so is). */
#include <dlfcn.h>
#include <stdio.h>

int callee_sum(int n);

__attribute__((noinline)) int run_plugin(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/libplugin.so", dir);
    void *h = dlopen(path, RTLD_NOW);
    if (!h) return -1;
    int (*sum)(int) = (int (*)(int))dlsym(h, "plugin_sum");
    return sum ? sum(7) : -1;
}

int main(int argc, char **argv) {
    int a = callee_sum(5);
    int b = run_plugin(argc > 1 ? argv[1] : ".");
    printf("%d %d\n", a, b);
    return b < 0;
}
