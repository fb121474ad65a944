// `nvsharectl cdi generate` writes the CDI spec (cli/cdi_spec.h) and the
// ld.so.preload file it mounts, each replaced atomically; `cdi list` prints
// the devices of the spec as container engines name them.
#include "cli/cdi_command.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "build-config.h"
#include "cli/cdi_spec.h"
#include "cli/exit_codes.h"
#include "cli/preload_files.h"
#include "common/driver_gpus.h"
#include "common/lock_client.h"

namespace nvshare::cli {

namespace {

// A spec is a few kilobytes per GPU.
constexpr size_t kMaxSpecBytes = 1 << 20;

int report(const FileError& error)
{
    fprintf(stderr, "nvsharectl: %s\n", error.message.c_str());
    return error.error == EACCES || error.error == EPERM || error.error == EROFS ? kAccessDenied
                                                                                 : kFailed;
}

// nvshared's GPUs (those the driver lists and those clients named), or,
// where it does not answer, the driver's list, in the same order.
std::vector<cdi::Gpu> find_gpus(const GlobalOptions& options, std::string* source)
{
    std::string error;
    const std::string text = LockClient::query_status(options.socket_path, &error);
    const nlohmann::json status = nlohmann::json::parse(text, nullptr, false);
    if (!text.empty() && !status.is_discarded()) {
        *source = "nvshared";
        return cdi::gpus_from_status(status);
    }
    *source = kDriverGpuDir;
    std::vector<cdi::Gpu> gpus;
    for (const auto& g : driver_gpus(kDriverGpuDir))
        gpus.push_back({gpus.size(), g.uuid});
    return gpus;
}

int generate(const GlobalOptions& options)
{
    // The container sees the socket where libnvshare.so looks by default.
    cdi::Paths paths{
        options.cdi.socket_dir.empty() ? parent_dir(options.socket_path) : options.cdi.socket_dir,
        parent_dir(NVSHARE_DEFAULT_SOCKET), options.cdi.library, options.cdi.preload_file};
    for (const std::string* p : {&paths.socket_dir, &paths.library, &paths.preload_file}) {
        if (std::string why = cdi::path_problem(*p, p == &paths.library); !why.empty()) {
            fprintf(stderr, "nvsharectl: cdi: %s\n", why.c_str());
            return kUsage;
        }
    }
    // Written all the same (the spec may be made before the install), but
    // no container given these devices starts until the library is there.
    struct stat st {};
    if (stat(paths.library.c_str(), &st) != 0)
        fprintf(stderr,
                "nvsharectl: warning: %s: %s; containers with nvshare devices fail to start\n",
                paths.library.c_str(), strerror(errno));
    std::string source;
    const std::vector<cdi::Gpu> gpus = find_gpus(options, &source);
    const nlohmann::json spec = cdi::make_spec(gpus, paths);
    FileError error;
    // The preload file first: the spec never names a file that is not there.
    if (!update_file(paths.preload_file, cdi::preload_file_text(paths.library), kMaxSpecBytes,
                     &error) ||
        !update_file(options.cdi.output, spec.dump(2) + "\n", kMaxSpecBytes, &error))
        return report(error);
    if (options.cdi.quiet)
        return kOk;
    std::string unused;
    const std::vector<std::string> names = cdi::device_names(spec, &unused);
    if (options.json) {
        const nlohmann::json j = {{"spec", options.cdi.output},
                                  {"preload_file", paths.preload_file},
                                  {"gpus_from", source},
                                  {"devices", names}};
        printf("%s\n", j.dump(2).c_str());
        return kOk;
    }
    printf("%s written: %zu device%s, GPUs from %s\n", options.cdi.output.c_str(), names.size(),
           names.size() == 1 ? "" : "s", source.c_str());
    for (const auto& n : names)
        printf("  %s\n", n.c_str());
    return kOk;
}

int list(const GlobalOptions& options)
{
    std::string text;
    bool exists = false;
    FileError error;
    if (!read_regular_file(options.cdi.output, kMaxSpecBytes, &text, &exists, &error))
        return report(error);
    if (!exists) {
        fprintf(stderr, "nvsharectl: %s does not exist; write it with: nvsharectl cdi generate\n",
                options.cdi.output.c_str());
        return kNotFound;
    }
    std::string why;
    const nlohmann::json spec = nlohmann::json::parse(text, nullptr, false);
    const std::vector<std::string> names = cdi::device_names(spec, &why);
    if (spec.is_discarded() || !why.empty()) {
        fprintf(stderr, "nvsharectl: %s: %s\n", options.cdi.output.c_str(),
                spec.is_discarded() ? "not JSON" : why.c_str());
        return kFailed;
    }
    if (options.json) {
        printf("%s\n", nlohmann::json(names).dump(2).c_str());
        return kOk;
    }
    for (const auto& n : names)
        printf("%s\n", n.c_str());
    return kOk;
}

}  // namespace

int run_cdi(const GlobalOptions& options, const std::vector<std::string>& args)
{
    if (args.size() != 1) {
        fprintf(stderr, "nvsharectl: usage: nvsharectl cdi generate|list\n");
        return kUsage;
    }
    if (args[0] == "generate")
        return generate(options);
    if (args[0] == "list")
        return list(options);
    fprintf(stderr, "nvsharectl: unknown cdi command '%s' (generate, list)\n", args[0].c_str());
    return kUsage;
}

}  // namespace nvshare::cli
