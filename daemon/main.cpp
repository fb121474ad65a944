// nvshared: grants each GPU's lock to local CUDA processes in turn.
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "build-config.h"
#include "daemon/config_file.h"
#include "daemon/log.h"
#include "daemon/options.h"
#include "daemon/server.h"
#include "daemon/settings_control.h"
#include "daemon/state_store.h"
#if NVSHARE_HAVE_DBUS
#include "daemon/bus_service.h"
#endif

int main(int argc, char** argv)
{
    using namespace nvshare::daemon;
    ParsedOptions parsed = parse_options(argc, argv, default_options(getenv("STATE_DIRECTORY")));
    if (!parsed.run) {
        // At error priority, so that `journalctl -p err` shows why it did not start.
        if (!parsed.error.empty())
            NVS_ERROR("%s", parsed.error.c_str());
        fputs(parsed.output.c_str(), stdout);
        return parsed.exit_code;
    }
    Options& options = parsed.options;
    nvshare::set_log_level(options.log_level);

    // Defaults < config file < command line < run-time changes (nvshared(8)).
    const auto config = load_config_file(options.config_path, options.config_given);
    if (!config)
        return 1;
    apply_layer(*config, options);
    apply_layer(options.command_line, options);
    const Options configured = options;
    StateStore store(options.state_dir);
    SettingsLayer runtime = store.load();
    if (!runtime.empty())
        NVS_INFO("restored the settings changed at run time from %s", store.path().c_str());
    apply_layer(runtime, options);

    Server server(options);
    if (!server.init())
        return 1;
    SettingsControl control(server, std::move(store), configured, std::move(runtime));
#if NVSHARE_HAVE_DBUS
    std::unique_ptr<BusService> bus;
    if (options.bus)
        bus = BusService::start(server, control);
#else
    if (options.bus)
        NVS_INFO("built without D-Bus support; serving the lock socket only");
#endif
    return server.run();
}
