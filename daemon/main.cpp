// nvshared: grants each GPU's lock to local CUDA processes in turn.
#include "common/log.h"
#include "daemon/options.h"
#include "daemon/server.h"

int main(int argc, char** argv)
{
    using namespace nvshare::daemon;
    ParsedOptions parsed = parse_options(argc, argv);
    if (!parsed.run)
        return parsed.exit_code;
    nvshare::set_log_level(parsed.options.log_level);
    Server server(std::move(parsed.options));
    if (!server.init())
        return 1;
    return server.run();
}
