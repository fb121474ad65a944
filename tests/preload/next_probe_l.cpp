// Defines probe_fn in a library the dlsym probe links: what
// dlsym(RTLD_NEXT, "probe_fn") from next_probe_q must find.
extern "C" __attribute__((visibility("default"))) int probe_fn();
extern "C" int probe_fn()
{
    return 2;
}
