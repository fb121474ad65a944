#include "tests/preload/fake_log.h"

#include <map>
#include <sstream>

#include "tests/support/files.h"

namespace nvshare::test {

std::vector<Work> read_work(const std::string& log)
{
    std::istringstream in(read_text(log));
    std::map<std::pair<pid_t, uint64_t>, Work> open;
    std::vector<Work> done;
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream f(line);
        uint64_t ns = 0, id = 0;
        pid_t pid = 0;
        std::string event, name;
        if (!(f >> ns >> pid >> event))
            continue;
        if (event == "start" && (f >> id >> name)) {
            open[{pid, id}] = Work{pid, ns, 0, name};
        } else if (event == "end" && (f >> id)) {
            auto it = open.find({pid, id});
            if (it != open.end()) {
                it->second.end = ns;
                done.push_back(it->second);
                open.erase(it);
            }
        }
    }
    for (auto& [key, w] : open) {  // still running when the log was read
        w.end = UINT64_MAX;
        done.push_back(w);
    }
    return done;
}

std::vector<Work> work_of(const std::vector<Work>& all, pid_t pid)
{
    std::vector<Work> out;
    for (const Work& w : all)
        if (w.pid == pid)
            out.push_back(w);
    return out;
}

std::vector<Work> work_named(const std::vector<Work>& all, const std::string& prefix)
{
    std::vector<Work> named;
    for (const Work& w : all)
        if (w.name.rfind(prefix, 0) == 0)
            named.push_back(w);
    return named;
}

bool overlapped(const std::vector<Work>& all, pid_t a, pid_t b)
{
    for (const Work& x : all)
        for (const Work& y : all)
            if (x.pid == a && y.pid == b && x.start < y.end && y.start < x.end)
                return true;
    return false;
}

std::vector<Event> read_events(const std::string& log)
{
    std::istringstream in(read_text(log));
    std::vector<Event> events;
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream f(line);
        Event e{};
        if (!(f >> e.ns >> e.pid))
            continue;
        std::getline(f >> std::ws, e.what);
        events.push_back(e);
    }
    return events;
}

int count_events(const std::string& log, pid_t pid, const std::string& needle)
{
    std::istringstream in(read_text(log));
    std::string line;
    int n = 0;
    const std::string prefix = " " + std::to_string(pid) + " ";
    while (std::getline(in, line))
        if (line.find(prefix) != std::string::npos && line.find(needle) != std::string::npos)
            ++n;
    return n;
}

}  // namespace nvshare::test
