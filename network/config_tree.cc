#include "network/config_tree.h"

namespace kiln::network {

namespace {

using nlohmann::json;

void name_change(const std::vector<std::string>& path, const TreeDiffOptions& options, ConfigChange& c) {
    if (options.label) return options.label(path, c);
    for (size_t i = 0; i < path.size(); ++i) {
        if (i) c.path += options.separator;
        c.path += path[i];
        if (!options.ports_key.empty() && path[i] == options.ports_key && i + 1 < path.size() && c.port.empty())
            c.port = path[i + 1];
    }
    c.field = path.empty() ? std::string() : path.back();
}

void add(const json& desired, const json& running, const std::vector<std::string>& path, const TreeDiffOptions& options,
         std::vector<ConfigChange>& out) {
    ConfigChange c;
    c.desired = desired;
    c.running = running;
    name_change(path, options, c);
    out.push_back(std::move(c));
}

// What the switch has under an owned member kiln does not render: each leaf
// to absent (an empty object holds nothing to remove).
void remove_all(const json& running, std::vector<std::string>& path, const TreeDiffOptions& options,
                std::vector<ConfigChange>& out) {
    if (running.is_object()) {
        for (const auto& [key, value] : running.items()) {
            path.push_back(key);
            remove_all(value, path, options, out);
            path.pop_back();
        }
        return;
    }
    add(nullptr, running, path, options, out);
}

void walk(const json& desired, const json* running, std::vector<std::string>& path, const TreeDiffOptions& options,
          std::vector<ConfigChange>& out) {
    const bool whole = !path.empty() && options.whole_keys.count(path.back());
    const bool owned = options.owned_from_depth >= 0 && static_cast<int>(path.size()) >= options.owned_from_depth;
    if (desired.is_object() && (!desired.empty() || owned) && !whole) {
        for (const auto& [key, value] : desired.items()) {
            const json* sub = nullptr;
            if (running && running->is_object()) {
                auto it = running->find(key);
                if (it != running->end()) sub = &*it;
            }
            path.push_back(key);
            walk(value, sub, path, options, out);
            path.pop_back();
        }
        if (owned && running && running->is_object())
            for (const auto& [key, value] : running->items()) {
                if (desired.contains(key)) continue;
                path.push_back(key);
                remove_all(value, path, options, out);
                path.pop_back();
            }
        return;
    }
    const json run = running ? *running : json(nullptr);
    if (run == desired) return;
    add(desired, run, path, options, out);
}

}  // namespace

json merge_patch(const json& desired, const json& running, const TreeDiffOptions& options, const std::string& key) {
    if (!desired.is_object()) return desired;
    json out = json::object();
    for (const auto& [k, v] : desired.items()) {
        const json* sub = nullptr;
        if (running.is_object()) {
            auto it = running.find(k);
            if (it != running.end()) sub = &*it;
        }
        out[k] = merge_patch(v, sub ? *sub : json(nullptr), options, k);
    }
    // A set kiln owns whole: what the switch has beyond it goes.
    if (options.whole_keys.count(key) && running.is_object())
        for (const auto& [k, v] : running.items())
            if (!desired.contains(k)) out[k] = nullptr;
    return out;
}

std::vector<ConfigChange> diff_trees(const json& desired, const json& running, const TreeDiffOptions& options) {
    std::vector<ConfigChange> out;
    std::vector<std::string> path;
    walk(desired, &running, path, options, out);
    return out;
}

}  // namespace kiln::network
