#include "tests/preload/clients.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "tests/support/files.h"
#include "tests/support/programs.h"

namespace nvshare::test {

const Paths& Paths::get()
{
    static const Paths paths = [] {
        Paths p{required_env("NVSHARE_TEST_LIBRARY"), required_env("NVSHARE_TEST_FAKECUDA_DIR"),
                required_env("NVSHARE_TEST_CLIENT"), required_env("NVSHARE_TEST_CLIENT_DL"), ""};
        const char* runtime = getenv("NVSHARE_TEST_PRELOAD_RUNTIME");
        p.preload = (runtime != nullptr && *runtime != '\0')
                        ? std::string(runtime) + " " + p.library
                        : p.library;
        return p;
    }();
    return paths;
}

Process start_client(const TempDir& dir, const std::string& socket, const ClientRun& run,
                     const std::string& name, const std::string& etc_ld_so_preload)
{
    const Paths& p = Paths::get();
    Process::Spec spec;
    spec.env = {
        {"LD_PRELOAD", p.preload},          {"LD_LIBRARY_PATH", p.fake_dir},
        {"FAKECUDA_LOG", dir / "fake.log"}, {"NVSHARE_SOCKET", socket},
        {"NVSHARE_DEBUG", std::nullopt},    {"NVSHARE_DISABLE", std::nullopt},
    };
    for (const auto& [k, v] : run.env)
        spec.env[k] = v;
    spec.stdout_path = dir / (name + ".out");
    spec.stderr_path = dir / (name + ".err");
    const std::string& client = run.dl_client ? p.client_dl : p.client;
    const auto meminfo = run.env.find(kMeminfoText);
    spec.env.erase(kMeminfoText);
    if (etc_ld_so_preload.empty() && meminfo == run.env.end()) {
        spec.argv = {client};
        spec.argv.insert(spec.argv.end(), run.args.begin(), run.args.end());
        return Process(std::move(spec));
    }
    // unshare and sh exec in place, so the pid is the client's. The list is
    // written last: only the client starts with it.
    std::string script = "set -e; ";
    if (meminfo != run.env.end()) {
        const std::string file = dir / (name + ".meminfo");
        write_text(file, meminfo->second);
        script += "mount --bind \"$NVSHARE_TEST_MEMINFO\" /proc/meminfo; ";
        spec.env["NVSHARE_TEST_MEMINFO"] = file;
    }
    if (!etc_ld_so_preload.empty())
        script +=
            "saved=$(mktemp -d); cp -a /etc/. \"$saved\"; "
            "mount -t tmpfs -o mode=0755 nvshare-test-etc /etc; cp -a \"$saved\"/. /etc; "
            "rm -rf \"$saved\"; printf '%s\\n' \"$NVSHARE_TEST_ETC_PRELOAD\" >/etc/ld.so.preload; ";
    script +=
        "[ -z \"$NVSHARE_TEST_CLIENT_PRELOAD\" ] || export "
        "LD_PRELOAD=\"$NVSHARE_TEST_CLIENT_PRELOAD\"; "
        "exec \"$@\"";
    spec.argv = {"/usr/bin/unshare",
                 "--mount",
                 "--propagation",
                 "private",
                 "/bin/sh",
                 "-c",
                 script,
                 "sh",
                 client};
    spec.argv.insert(spec.argv.end(), run.args.begin(), run.args.end());
    spec.env["NVSHARE_TEST_ETC_PRELOAD"] = etc_ld_so_preload;
    // Only the client gets the preload (a sanitizer's runtime in it aborts
    // the set-up's cp and mount).
    spec.env["NVSHARE_TEST_CLIENT_PRELOAD"] = spec.env["LD_PRELOAD"].value_or("");
    spec.env["LD_PRELOAD"] = std::nullopt;
    return Process(std::move(spec));
}

void expect_clean_exit(Process& p, std::chrono::milliseconds timeout)
{
    EXPECT_EQ(p.wait(timeout), 0) << "stdout:\n" << p.out() << "stderr:\n" << p.err();
}

uint64_t sum_over_clients(const nlohmann::json& status, const char* field)
{
    uint64_t sum = 0;
    if (!status.is_null() && status.contains("clients"))
        for (const auto& c : status["clients"])
            sum += c.value(field, uint64_t{0});
    return sum;
}

std::vector<uint64_t> numbers_after(const std::string& text, const std::string& mark,
                                    const std::string& also)
{
    std::vector<uint64_t> numbers;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);)
        if (const auto at = line.find(mark);
            at != std::string::npos && (also.empty() || line.find(also) != std::string::npos))
            numbers.push_back(std::stoull(line.substr(at + mark.size())));
    return numbers;
}

}  // namespace nvshare::test
