// Runs the two schedulers of compare.sh on seeds FIRST..LAST (STEPS events
// each) and prints where the first few differ.
#include <cstdio>
#include <cstdlib>
#include <string>
std::string run_old(unsigned seed, int steps);
std::string run_new(unsigned seed, int steps);
int main(int argc, char** argv)
{
    const unsigned from = argc > 1 ? atoi(argv[1]) : 1, to = argc > 2 ? atoi(argv[2]) : 200;
    const int steps = argc > 3 ? atoi(argv[3]) : 1000;
    unsigned differ = 0;
    size_t bytes = 0;
    for (unsigned seed = from; seed <= to; ++seed) {
        const std::string a = run_old(seed, steps), b = run_new(seed, steps);
        bytes += a.size();
        if (a != b) {
            size_t i = 0;
            while (i < a.size() && i < b.size() && a[i] == b[i])
                ++i;
            const size_t from_line = a.rfind("E", i);
            printf("seed %u differs at byte %zu:\nOLD: %s\nNEW: %s\n", seed, i,
                   a.substr(from_line, 600).c_str(), b.substr(from_line, 600).c_str());
            if (++differ > 3)
                return 1;
        }
    }
    printf("seeds %u..%u, %d steps: %u differ (%zu bytes compared)\n", from, to, steps, differ,
           bytes);
    return differ != 0;
}
