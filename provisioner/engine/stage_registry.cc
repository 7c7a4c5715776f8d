#include "provisioner/engine/stage_registry.h"

namespace kiln::engine {

const std::vector<std::string>& StageRegistry::product_stage_names() {
    static const std::vector<std::string> names = {"firmware", "network", "image", "vm", "smoke", "handover"};
    return names;
}

void StageRegistry::add(std::shared_ptr<Stage> stage) {
    auto name = stage->name();
    stages_[name] = std::move(stage);
}

Stage* StageRegistry::find(const std::string& name) const {
    auto it = stages_.find(name);
    return it == stages_.end() ? nullptr : it->second.get();
}

std::set<std::string> StageRegistry::known_names() const {
    std::set<std::string> names(product_stage_names().begin(), product_stage_names().end());
    for (const auto& [name, stage] : stages_) names.insert(name);
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
