// libnvshare.so links without the compiler's start files (preload/meson.build:
// they would run code at load and at exit, and read a flag of their own at
// exit, in every process on the host). Those files define __dso_handle, the
// key under which this library's atexit and pthread_atfork registrations are
// made, so the library defines it: hidden, read-only, the address of itself
// as theirs is. The start files' other work is not needed: the library has
// no constructors or destructors of its own (check_elf.sh), and it is never
// unloaded (-z nodelete), so registrations under this key run at exit.
extern "C" {
__attribute__((visibility("hidden"))) extern void* const __dso_handle;
void* const __dso_handle = const_cast<void**>(&__dso_handle);
}
