// An empty shared library: preloaded by the start benchmark to show what
// loading any library costs on the machine, next to libnvshare.so.
extern "C" __attribute__((visibility("default"))) int nvshare_bench_empty_marker;
int nvshare_bench_empty_marker = 0;
