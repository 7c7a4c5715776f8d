#include "provisioner/engine/stage_registry.h"

#include <algorithm>
#include <stdexcept>

namespace kiln::engine {

void StageRegistry::declare(const std::string& name) {
    if (std::find(declared_.begin(), declared_.end(), name) == declared_.end()) declared_.push_back(name);
}

void StageRegistry::add(std::shared_ptr<Stage> stage) {
    auto name = stage->name();
    stages_[name] = std::move(stage);
}

void StageRegistry::add_table(config::ConfigTable table) {
    auto refuse = [&](const std::string& why) {
        throw std::invalid_argument("stage module table [" + table.key + "]: " + why);
    };
    if (table.key.empty()) refuse("no key");
    if (config::kCoreTableKeys.count(table.key)) refuse("the core reads [" + table.key + "] itself");
    if (!table.node_key.empty() && config::kCoreNodeKeys.count(table.node_key))
        refuse("the core reads the node key '" + table.node_key + "' itself");
    for (const auto& t : tables_) {
        if (t.key == table.key) refuse("another module registered it");
        if (!table.node_key.empty() && t.node_key == table.node_key)
            refuse("the node key '" + table.node_key + "' is [" + t.key + "]'s");
    }
    tables_.push_back(std::move(table));
}

void StageRegistry::add_command(StageCommandSpec command) {
    auto refuse = [&](const std::string& why) {
        throw std::invalid_argument("stage module command '" + command.name + "': " + why);
    };
    if (command.name.empty() || !command.make) refuse("no name or no factory");
    if (kCoreCommandNames.count(command.name)) refuse("the CLI shell has a command of that name");
    for (const auto& c : commands_)
        if (c.name == command.name) refuse("another module registered it");
    commands_.push_back(std::move(command));
}

config::LoadOptions StageRegistry::load_options() const {
    config::LoadOptions o;
    o.known_stages = known_names();
    o.tables = tables_;
    return o;
}

Stage* StageRegistry::find(const std::string& name) const {
    auto it = stages_.find(name);
    return it == stages_.end() ? nullptr : it->second.get();
}

std::set<std::string> StageRegistry::known_names() const {
    std::set<std::string> names(declared_.begin(), declared_.end());
    for (const auto& [name, stage] : stages_) names.insert(name);
    return names;
}

std::vector<std::string> StageRegistry::ordered_names() const {
    std::vector<std::string> names = declared_;
    for (const auto& [name, stage] : stages_)
        if (std::find(declared_.begin(), declared_.end(), name) == declared_.end()) names.push_back(name);
    return names;
}

std::vector<std::string> StageRegistry::implemented_names() const {
    std::vector<std::string> names;
    for (const auto& [name, stage] : stages_) names.push_back(name);
    return names;
}

StageRegistry::RunScope::RunScope(const StageRegistry& registry, const config::Fleet& fleet)
    : registry_(registry), fleet_(fleet) {
    for (const auto& [name, stage] : registry_.stages_) stage->begin_run(fleet_);
}

StageRegistry::RunScope::~RunScope() {
    for (const auto& [name, stage] : registry_.stages_) stage->end_run(fleet_);
}

}  // namespace kiln::engine
