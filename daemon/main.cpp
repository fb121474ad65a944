// nvshared: grants each GPU's lock to local CUDA processes in turn.
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "build-config.h"
#include "daemon/config_file.h"
#include "daemon/log.h"
#include "daemon/options.h"
#include "daemon/principals_file.h"
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
    const Options defaults = options;
    const auto configure = [&defaults](Options* out) {
        const auto config = load_config_file(defaults.config_path, defaults.config_given);
        if (!config)
            return false;
        *out = defaults;
        apply_layer(*config, *out);
        apply_layer(out->command_line, *out);
        return true;
    };
    if (!configure(&options))
        return 1;
    const Options configured = options;
    StateStore store(options.state_dir);
    SettingsLayer runtime = store.load();
    if (!runtime.empty())
        NVS_INFO("restored the settings changed at run time from %s", store.path().c_str());
    apply_layer(runtime, options);

    Server server(options);
    if (!server.init())
        return 1;
    server.set_principals(load_principals());
    SettingsControl control(server, std::move(store), configured, std::move(runtime));
    // SIGHUP, systemctl reload: the config file again; one that cannot be
    // read leaves every setting as it is.
    server.set_reload_handler([&configure, &control, &defaults, &server] {
        Options next;
        if (!configure(&next)) {
            NVS_WARN("reload: %s cannot be read; the settings stay as they were",
                     defaults.config_path.c_str());
            return;
        }
        control.reload(std::move(next));
        server.set_principals(load_principals());
        NVS_NOTICE("reloaded %s", defaults.config_path.c_str());
    });
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
