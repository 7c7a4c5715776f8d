// A command a stage module adds to `kiln` (`kiln firmware inventory`,
// `kiln vm xml`, `kiln image build`), registered with the module's stage
// and tables (StageRegistry::add_command), so the CLI shell names no
// stage's command. The shell creates the top-level subcommand under the
// registered name; the command fills in its options and subcommands, and
// runs when the parsed command line chose it.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "provisioner/config/fleet_config.h"
#include "provisioner/core/result.h"
#include "provisioner/journal/store.h"

namespace CLI {
class App;
}

namespace kiln::engine {

// What the CLI shell lends a module's command: the fleet and journal as
// every core command reads them, so a module's command honours --pipelines,
// --store and --journal without knowing them.
struct CommandEnv {
    // Loads the fleet with this build's tables; prints each diagnostic
    // (FILE:LINE:COL) and returns nullopt when it does not load.
    std::function<std::optional<config::Fleet>(const std::string& path)> load_fleet;
    // The journal for a fleet, opened to read; null when none exists yet.
    std::function<Result<std::unique_ptr<journal::Store>>(const config::Fleet&)> open_journal;
    // Secrets given outside the fleet (--store-password), resolved: a command
    // that writes files keeps them out like the fleet's own.
    std::vector<std::string> extra_secrets;
};

class StageCommand {
public:
    virtual ~StageCommand() = default;
    // Adds the command's options and subcommands to `command`, the
    // top-level subcommand the shell created under the registered name.
    virtual void add_to(CLI::App& command) = 0;
    // Runs it (the command line chose it); returns the exit code.
    virtual int run(const CommandEnv& env) = 0;
};

// A fresh command per parse: its option values live in the object.
using StageCommandFactory = std::function<std::unique_ptr<StageCommand>()>;

struct StageCommandSpec {
    std::string name;         // `kiln NAME ...`
    std::string description;  // what `kiln --help` says of it
    StageCommandFactory make;
};

// The usual command: its options parse into one `Args`, which `add` binds
// to the subcommand and `run` reads.
template <class Args>
StageCommandSpec args_command(std::string name, std::string description, void (*add)(CLI::App&, Args&),
                              int (*run_args)(const Args&, const CommandEnv&)) {
    using Add = void (*)(CLI::App&, Args&);
    using Run = int (*)(const Args&, const CommandEnv&);
    class Command : public StageCommand {
    public:
        Command(Add a, Run r) : add_(a), run_(r) {}
        void add_to(CLI::App& command) override { add_(command, args_); }
        int run(const CommandEnv& env) override { return run_(args_, env); }

    private:
        Add add_;
        Run run_;
        Args args_;
    };
    return {std::move(name), std::move(description),
            [add, run_args] { return std::make_unique<Command>(add, run_args); }};
}

// The CLI shell's own commands: a module may not register these names.
inline const std::set<std::string> kCoreCommandNames = {"validate", "plan",   "apply",  "status",  "reimage", "history",
                                                        "record",   "report", "worker", "workers", "stages"};

}  // namespace kiln::engine
