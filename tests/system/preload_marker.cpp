// A stand-in for libnvshare.so in the /etc/ld.so.preload tests: libc-only,
// and it says it was loaded (on stderr, naming the process) only when
// NVSHARE_TEST_PRELOAD_MARKER is set, so the other processes of the test
// are not disturbed.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

namespace {

__attribute__((constructor)) void announce()
{
    if (getenv("NVSHARE_TEST_PRELOAD_MARKER") == nullptr)
        return;
    char line[128] = "preload-marker: loaded, euid ";
    char digits[16];
    unsigned euid = geteuid();
    size_t n = 0;
    do {
        digits[n++] = static_cast<char>('0' + euid % 10);
        euid /= 10;
    } while (euid != 0 && n < sizeof digits);
    size_t len = strlen(line);
    while (n > 0 && len + 2 < sizeof line)
        line[len++] = digits[--n];
    line[len++] = '\n';
    (void)!write(2, line, len);
}

}  // namespace
