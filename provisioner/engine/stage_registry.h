// Which stages this build knows and implements. Pipelines may name any
// known stage; selecting one that is not registered is an error before
// anything runs. The core names no stage: the product declares its own
// (provisioner/cli/product_stages.h), a test binary its own.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "provisioner/config/fleet_loader.h"
#include "provisioner/engine/stage.h"
#include "provisioner/engine/stage_command.h"

namespace kiln::engine {

class StageRegistry {
public:
    // A stage a pipeline may name, whether or not this build implements it
    // ("not implemented in this build" rather than "unknown"). Declared in
    // pipeline order, which `kiln stages` lists.
    void declare(const std::string& name);
    void add(std::shared_ptr<Stage> stage);
    // A top-level fleet.toml table a stage module owns, with its reader.
    // Throws std::invalid_argument for a key (or node key) the core reads or
    // another module registered: both would read it, each its own way.
    void add_table(config::ConfigTable table);
    const std::vector<config::ConfigTable>& config_tables() const { return tables_; }
    // A top-level `kiln` command a stage module ships. Throws
    // std::invalid_argument for a name the CLI shell or another module uses.
    void add_command(StageCommandSpec command);
    const std::vector<StageCommandSpec>& commands() const { return commands_; }
    // What the loader needs from this build: the known stage names and the
    // modules' tables. Callers set the pipelines folders.
    config::LoadOptions load_options() const;
    Stage* find(const std::string& name) const;
    bool implemented(const std::string& name) const { return find(name) != nullptr; }
    // Declared names plus every registered stage: what a pipeline may list.
    std::set<std::string> known_names() const;
    // The declared names in their order, then the other registered ones.
    std::vector<std::string> ordered_names() const;
    std::vector<std::string> implemented_names() const;

    // Stage::begin_run on every registered stage now, end_run when the
    // returned guard goes: an engine holds one for each plan and run.
    class RunScope {
    public:
        RunScope(const StageRegistry& registry, const config::Fleet& fleet);
        ~RunScope();
        RunScope(const RunScope&) = delete;
        RunScope& operator=(const RunScope&) = delete;

    private:
        const StageRegistry& registry_;
        const config::Fleet& fleet_;
    };

private:
    std::map<std::string, std::shared_ptr<Stage>> stages_;
    std::vector<std::string> declared_;
    std::vector<config::ConfigTable> tables_;
    std::vector<StageCommandSpec> commands_;
};

}  // namespace kiln::engine
