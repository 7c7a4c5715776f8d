#include "provisioner/journal/legacy_state.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace kiln::journal {

namespace fs = std::filesystem;

std::string legacy_state_path(const std::string& fleet_dir, const std::string& stage, const std::string& node) {
    return (fs::path(fleet_dir) / ".kiln" / stage / (node + ".json")).string();
}

std::optional<nlohmann::json> read_legacy_state(const std::string& fleet_dir, const std::string& stage,
                                                const std::string& node) {
    std::ifstream in(legacy_state_path(fleet_dir, stage, node), std::ios::binary);
    if (!in) return std::nullopt;
    std::ostringstream s;
    s << in.rdbuf();
    auto j = nlohmann::json::parse(s.str(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) return std::nullopt;
    return j;
}

}  // namespace kiln::journal
