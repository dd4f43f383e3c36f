/* A shared library for perfaux record -- ./prog: linked (libcallee.so) and dlopen'd
 * (libplugin.so, built from the same source with -DPLUGIN). */
#ifdef PLUGIN
#define NAME(x) plugin_##x
#else
#define NAME(x) callee_##x
#endif

__attribute__((noinline)) int NAME(square)(int x) { return x * x; }

int NAME(sum)(int n) {
    int s = 0;
    for (int i = 0; i < n; i++) s += NAME(square)(i);
    return s;
}
