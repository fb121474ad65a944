#include "tests/support/wait.h"

#include <thread>

namespace nvshare::test {

bool wait_until(const std::function<bool()>& condition, Millis timeout, Millis interval)
{
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        if (condition())
            return true;
        if (std::chrono::steady_clock::now() >= deadline)
            return false;
        std::this_thread::sleep_for(interval);
    }
}

}  // namespace nvshare::test
