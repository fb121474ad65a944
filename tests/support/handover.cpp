#include "tests/support/handover.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace nvshare::test {

std::vector<double> handovers(LockClient& a, LockClient& b, int rounds)
{
    using namespace std::chrono_literals;
    std::vector<double> us;
    LockClient* holder = &a;
    LockClient* next = &b;
    for (int i = 0; i < rounds; ++i) {
        if (!next->request(1))
            break;
        std::this_thread::sleep_for(10ms);  // queued behind the holder
        const auto start = std::chrono::steady_clock::now();
        if (!holder->release(1) || !next->expect(proto::MsgType::Grant, 10s))
            break;
        us.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                .count());
        std::swap(holder, next);
    }
    return us;
}

double median(std::vector<double> values)
{
    std::sort(values.begin(), values.end());
    return values.empty() ? 0.0 : values[values.size() / 2];
}

}  // namespace nvshare::test
