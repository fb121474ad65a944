// nvsharectl built without sdbus-c++: the D-Bus commands exist, and say why
// they cannot work here.
#include <cstdio>

#include "cli/bus_commands.h"
#include "cli/exit_codes.h"

namespace nvshare::cli {

namespace {

int not_built_in(const GlobalOptions&, const std::vector<std::string>&)
{
    fprintf(stderr,
            "nvsharectl: this nvsharectl was built without D-Bus support, which this command "
            "needs.\nOnly 'nvsharectl socket-status' works; rebuild with -Ddbus=enabled for the "
            "rest.\n");
    return kFailed;
}

}  // namespace

int run_status(const GlobalOptions& o, const std::vector<std::string>& a)
{
    return not_built_in(o, a);
}
int run_set_tq(const GlobalOptions& o, const std::vector<std::string>& a)
{
    return not_built_in(o, a);
}
int run_anti_thrashing(const GlobalOptions& o, const std::vector<std::string>& a)
{
    return not_built_in(o, a);
}
int run_set_capacity(const GlobalOptions& o, const std::vector<std::string>& a)
{
    return not_built_in(o, a);
}
int run_revoke(const GlobalOptions& o, const std::vector<std::string>& a)
{
    return not_built_in(o, a);
}
int run_reset(const GlobalOptions& o, const std::vector<std::string>& a)
{
    return not_built_in(o, a);
}
int run_monitor(const GlobalOptions& o, const std::vector<std::string>& a)
{
    return not_built_in(o, a);
}

}  // namespace nvshare::cli
