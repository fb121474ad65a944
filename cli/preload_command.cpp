// `nvsharectl preload`: puts libnvshare.so into every new process through
// /etc/ld.so.preload, or takes it out. The drop-in /etc/ld.so.preload.d/
// nvshare.conf says whether nvshare wants to be there; `merge` regenerates
// /etc/ld.so.preload from all drop-ins (nvshare-preload.path runs it when
// any drop-in changes). nvshare(7) describes the scheme.
#include "cli/preload_command.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "build-config.h"
#include "cli/exit_codes.h"
#include "cli/library_facts.h"
#include "cli/preload_files.h"
#include "cli/preload_merge.h"

namespace nvshare::cli {

namespace {

// /etc/ld.so.preload lists a few libraries; anything this big is not one.
constexpr size_t kMaxPreloadFileBytes = 1 << 20;

int report(const FileError& error)
{
    fprintf(stderr, "nvsharectl: %s\n", error.message.c_str());
    if (error.error == EACCES || error.error == EPERM) {
        fprintf(stderr, "nvsharectl: changing /etc/ld.so.preload needs root\n");
        return kAccessDenied;
    }
    return kFailed;
}

std::string count(size_t n, const char* one, const char* many)
{
    return std::to_string(n) + " " + (n == 1 ? one : many);
}

void warn(const std::string& text)
{
    fprintf(stderr, "nvsharectl: warning: %s\n", text.c_str());
}

// The drop-ins' entries that ld.so can load and only root can change, with
// a warning for each of the rest: a library ld.so cannot load makes every
// program print an error, and one that others can replace runs their code in
// root's processes. A left-out entry is listed by the next merge that finds
// it fine (nvshare-preload.path runs one when nvshare's library changes).
bool usable_entries(const PreloadPaths& paths, LibraryChecker& checker,
                    std::vector<std::string>* entries, size_t* drop_in_count, FileError* error)
{
    std::vector<preload::DropIn> drop_ins;
    std::vector<std::string> warnings;
    if (!read_drop_ins(paths.dir, &drop_ins, &warnings, error))
        return false;
    for (const auto& w : warnings)
        warn(w);
    *drop_in_count = drop_ins.size();
    preload::CollectedEntries collected = preload::collect_entries(std::move(drop_ins));
    for (const auto& w : collected.warnings)
        warn(paths.dir + "/" + w);
    for (auto& entry : collected.entries) {
        const LibraryCheck checked = checker.check(entry);
        if (checked.problem.empty())
            entries->push_back(std::move(entry));
        else
            warn(entry + ": " + checked.problem + "; left out of " + paths.file);
    }
    return true;
}

// Writes the merged file and the state in an order that keeps the state a
// superset of what the file holds: before the file gains an entry the state
// lists it, and the state forgets an entry only once the file has.
bool write_merge(const PreloadPaths& paths, const std::string& old_state,
                 const std::vector<std::string>& entries, const preload::MergeResult& merged,
                 FileError* error)
{
    const std::vector<std::string> old_entries = preload::list_entries(old_state);
    std::vector<std::string> superset = old_entries;
    for (const auto& e : entries)
        if (std::find(superset.begin(), superset.end(), e) == superset.end())
            superset.push_back(e);
    if (superset != old_entries && !replace_file(paths.state, preload::state_text(superset), error))
        return false;
    if (merged.changed && !(merged.text.empty() ? remove_file(paths.file, error)
                                                : replace_file(paths.file, merged.text, error)))
        return false;
    if (entries.empty())
        return remove_file(paths.state, error);
    const std::string new_state = preload::state_text(entries);
    return new_state == old_state || replace_file(paths.state, new_state, error);
}

// Regenerates the file from the drop-ins; `retired` entries go as well,
// also from lines they share with other names, unless a drop-in lists them.
// *written: the file's content afterwards. Called with the drop-in lock held.
int merge_locked(const PreloadPaths& paths, LibraryChecker& checker,
                 const std::vector<std::string>& retired, std::string* written = nullptr)
{
    FileError error;
    std::vector<std::string> entries;
    size_t drop_in_count = 0;
    if (!usable_entries(paths, checker, &entries, &drop_in_count, &error))
        return report(error);

    // What earlier merges wrote is theirs to take out again.
    std::string state;
    bool state_exists = false;
    if (!read_regular_file(paths.state, preload::kMaxDropInBytes, &state, &state_exists, &error))
        return report(error);
    std::vector<std::string> owned = preload::list_entries(state);
    owned.insert(owned.end(), retired.begin(), retired.end());

    std::string current;
    bool exists = false;
    if (!read_regular_file(paths.file, kMaxPreloadFileBytes, &current, &exists, &error))
        return report(error);
    preload::MergeResult merged = preload::merge(current, entries, owned);
    std::vector<std::string> unwanted;
    for (const auto& r : retired)
        if (std::find(entries.begin(), entries.end(), r) == entries.end())
            unwanted.push_back(r);
    merged.text = preload::unlist(merged.text, unwanted);
    merged.changed = merged.text != current;
    for (const auto& w : merged.warnings)
        warn(paths.file + ": " + w);
    if (!write_merge(paths, state, entries, merged, &error))
        return report(error);
    if (written != nullptr)
        *written = merged.text;

    const std::string entry_count = count(entries.size(), "entry", "entries");
    const std::string drop_in_summary = count(drop_in_count, "drop-in", "drop-ins");
    if (!merged.changed)
        printf("%s is up to date (%s from %s)\n", paths.file.c_str(), entry_count.c_str(),
               drop_in_summary.c_str());
    else if (merged.text.empty())
        printf("%s removed: nothing left in it\n", paths.file.c_str());
    else
        printf("%s updated (%s from %s)\n", paths.file.c_str(), entry_count.c_str(),
               drop_in_summary.c_str());
    return kOk;
}

int merge(const PreloadPaths& paths, const std::vector<std::string>& retired = {})
{
    DropInLock lock;
    FileError error;
    if (!lock.acquire(paths.dir, &error))
        return report(error);
    LibraryChecker checker;
    return merge_locked(paths, checker, retired);
}

int enable(const PreloadPaths& paths)
{
    // Only NVSHARE_PRELOAD_ENTRY can make the entry unusable: say so in its name.
    const auto collected = preload::collect_entries({{"NVSHARE_PRELOAD_ENTRY", paths.entry}});
    if (collected.entries != std::vector<std::string>{paths.entry}) {
        fprintf(stderr, "nvsharectl: %s\n",
                collected.warnings.empty() ? "NVSHARE_PRELOAD_ENTRY: not a single library"
                                           : collected.warnings[0].c_str());
        return kUsage;
    }
    LibraryChecker checker;
    const LibraryCheck checked = checker.check(paths.entry);
    if (checked.missing) {
        fprintf(stderr,
                "nvsharectl: %s is not installed; install libnvshare.so before enabling it\n",
                paths.entry.c_str());
        return kNotFound;
    }
    if (!checked.problem.empty()) {
        fprintf(stderr, "nvsharectl: %s: %s; not enabling it\n", paths.entry.c_str(),
                checked.problem.c_str());
        return kFailed;
    }
    DropInLock lock;
    FileError error;
    if (!lock.acquire(paths.dir, &error))
        return report(error);
    std::string text;
    bool exists = false;
    if (!read_regular_file(paths.drop_in, preload::kMaxDropInBytes, &text, &exists, &error))
        return report(error);
    // An existing drop-in is kept as it is: an administrator may have edited it.
    if (!exists && !replace_file(paths.drop_in, preload::drop_in_text(paths.entry), &error))
        return report(error);
    return merge_locked(paths, checker, {});
}

// The names in `text` that ld.so would read as nvshare's library: its entry,
// and any other spelling of the same file (another token form, a symbolic
// link, the expanded path).
std::vector<std::string> spellings_of(const PreloadPaths& paths, LibraryChecker& checker,
                                      std::string_view text)
{
    std::string why;
    const std::string ours = checker.expand(paths.entry, &why);
    struct stat our_st {};
    const bool ours_exists = !ours.empty() && stat(ours.c_str(), &our_st) == 0;
    std::vector<std::string> out = {paths.entry};
    for (const auto& name : preload::glibc_entries(text)) {
        if (std::find(out.begin(), out.end(), name) != out.end())
            continue;
        const std::string path = checker.expand(name, &why);
        struct stat st {};
        if (path.empty())
            continue;
        if (path == ours || (ours_exists && stat(path.c_str(), &st) == 0 &&
                             st.st_dev == our_st.st_dev && st.st_ino == our_st.st_ino))
            out.push_back(name);
    }
    return out;
}

int disable(const PreloadPaths& paths)
{
    DropInLock lock;
    FileError error;
    if (!lock.acquire(paths.dir, &error))
        return report(error);
    std::string current;
    bool exists = false;
    if (!read_regular_file(paths.file, kMaxPreloadFileBytes, &current, &exists, &error))
        return report(error);
    if (!remove_file(paths.drop_in, &error))
        return report(error);
    // The library goes however it is listed, also where someone added it by
    // hand: disable means off, or says loudly that it is not.
    LibraryChecker checker;
    const std::vector<std::string> spellings = spellings_of(paths, checker, current);
    std::string written;
    if (const int rc = merge_locked(paths, checker, spellings, &written); rc != kOk)
        return rc;
    for (const auto& name : preload::glibc_entries(written)) {
        if (std::find(spellings.begin(), spellings.end(), name) != spellings.end()) {
            fprintf(stderr,
                    "nvsharectl: %s still lists %s: a drop-in in %s lists it; remove it there "
                    "and run 'nvsharectl preload merge'\n",
                    paths.file.c_str(), name.c_str(), paths.dir.c_str());
            return kFailed;
        }
    }
    return kOk;
}

int status(const GlobalOptions& options, const PreloadPaths& paths)
{
    FileError error;
    std::string current;
    bool file_exists = false;
    if (!read_regular_file(paths.file, kMaxPreloadFileBytes, &current, &file_exists, &error))
        return report(error);
    struct stat st {};
    const bool drop_in_exists = stat(paths.drop_in.c_str(), &st) == 0 && S_ISREG(st.st_mode);
    const auto active_entries = preload::glibc_entries(current);
    const bool active = std::find(active_entries.begin(), active_entries.end(), paths.entry) !=
                        active_entries.end();
    LibraryChecker checker;
    const LibraryCheck checked = checker.check(paths.entry);
    const bool present = !checked.missing;
    const std::string& library = checked.path;

    if (options.json) {
        const nlohmann::json j = {
            {"entry", paths.entry},
            {"library", library.empty() ? paths.entry : library},
            {"library_installed", present},
            {"library_problem",
             checked.problem.empty() ? nlohmann::json(nullptr) : nlohmann::json(checked.problem)},
            {"drop_in", paths.drop_in},
            {"drop_in_present", drop_in_exists},
            {"file", paths.file},
            {"active", active},
            {"listed", active_entries},
        };
        printf("%s\n", j.dump(2).c_str());
        return kOk;
    }
    printf("Entry:   %s\n", paths.entry.c_str());
    printf("Library: %s (%s)\n", library.empty() ? paths.entry.c_str() : library.c_str(),
           present ? "installed" : "missing");
    printf("Drop-in: %s (%s)\n", paths.drop_in.c_str(), drop_in_exists ? "present" : "absent");
    std::string listed;
    for (const auto& e : active_entries)
        listed += (listed.empty() ? "" : " ") + e;
    printf("Listed:  %s\n", listed.empty() ? "(nothing)" : listed.c_str());
    printf("Active:  %s\n", active ? "yes: every new process loads libnvshare.so"
                                   : "no: processes run without libnvshare.so");
    if (!checked.problem.empty() && !checked.missing)
        warn(paths.entry + ": " + checked.problem);
    if (active && !present)
        warn("every program start prints an ld.so error; run 'nvsharectl preload disable'");
    else if (drop_in_exists && !active && checked.problem.empty())
        warn(paths.file + " is out of step with its drop-ins; run 'nvsharectl preload merge'");
    return kOk;
}

}  // namespace

int run_preload(const GlobalOptions& options, const std::vector<std::string>& args)
{
    if (args.size() != 1) {
        fprintf(stderr, "nvsharectl: usage: nvsharectl preload enable|disable|status|merge\n");
        return kUsage;
    }
    const PreloadPaths paths = preload_paths();
    const std::string& verb = args[0];
    if (verb == "enable")
        return enable(paths);
    if (verb == "disable")
        return disable(paths);
    if (verb == "status")
        return status(options, paths);
    if (verb == "merge")
        return merge(paths);
    fprintf(stderr, "nvsharectl: unknown preload command '%s' (enable, disable, status, merge)\n",
            verb.c_str());
    return kUsage;
}

}  // namespace nvshare::cli
