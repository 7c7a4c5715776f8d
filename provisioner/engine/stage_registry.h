// Which stages this build implements. Pipelines may name any known stage;
// selecting one that is not registered is an error before anything runs.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "provisioner/engine/stage.h"

namespace kiln::engine {

class StageRegistry {
public:
    // The product's stage names, in pipeline order.
    static const std::vector<std::string>& product_stage_names();

    void add(std::shared_ptr<Stage> stage);
    Stage* find(const std::string& name) const;
    bool implemented(const std::string& name) const { return find(name) != nullptr; }
    // Product names plus every registered stage: what a pipeline may list.
    std::set<std::string> known_names() const;
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
};

// Registers the stages the shipped `kiln` implements.
void register_product_stages(StageRegistry& registry);

}  // namespace kiln::engine
