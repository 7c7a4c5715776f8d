#include "firmware/bmc/mockup_tree.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

namespace kiln::bmc {

namespace fs = std::filesystem;

namespace {

Result<std::string> read_text(const fs::path& file, size_t max_bytes) {
    std::error_code ec;
    auto size = fs::file_size(file, ec);
    if (ec) return make_error("bmc", "bmc.mockup_unreadable", "cannot stat " + file.string() + ": " + ec.message());
    if (size > max_bytes) {
        return make_error(
            "bmc", "bmc.json",
            file.string() + " is " + std::to_string(size) + " bytes, over the limit of " + std::to_string(max_bytes));
    }
    std::ifstream in(file, std::ios::binary);
    if (!in) return make_error("bmc", "bmc.mockup_unreadable", "cannot open " + file.string());
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

// "<tree>/Systems/1/index.json" -> "/redfish/v1/Systems/1".
std::string uri_for(const fs::path& root, const fs::path& file) {
    std::string rel = file.parent_path().lexically_relative(root).generic_string();
    if (rel.empty() || rel == ".") return "/redfish/v1";
    return "/redfish/v1/" + rel;
}

}  // namespace

std::string normalize_uri(const std::string& path) {
    std::string out;
    out.reserve(path.size());
    for (char c : path) {
        if (c == '/' && !out.empty() && out.back() == '/') continue;
        out += c;
    }
    while (out.size() > 1 && out.back() == '/') out.pop_back();
    if (out.empty()) out = "/";
    return out;
}

std::string lower_ascii(std::string text) {
    for (char& c : text) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return text;
}

Result<MockupTree> MockupTree::load(const std::string& dir, const MockupLimits& limits) {
    fs::path root(dir);
    std::error_code ec;
    if (!fs::is_regular_file(root / "index.json", ec)) {
        return make_error("bmc", "bmc.mockup_missing", dir + " is not a mockup tree: it has no index.json");
    }
    MockupTree tree;
    tree.dir = dir;
    size_t files = 0;
    // Symlinked folders are not followed: a tree is what it holds.
    for (fs::recursive_directory_iterator it(root, ec), end; it != end; it.increment(ec)) {
        if (ec) break;
        if (!it->is_regular_file(ec)) continue;
        const auto name = it->path().filename().string();
        if (name != "index.json" && name != "index.xml") continue;
        if (++files > limits.max_files) {
            return make_error("bmc", "bmc.mockup_too_many_files",
                              dir + " holds more than " + std::to_string(limits.max_files) + " resources");
        }
        auto text = read_text(it->path(), limits.json.max_bytes);
        if (!text) return text.error();
        const std::string uri = uri_for(root, it->path());
        if (name == "index.xml") {
            tree.documents[uri] = std::move(*text);
            continue;
        }
        auto body = parse_json(*text, limits.json, it->path().string());
        if (!body) return body.error();
        if (!body->is_object()) {
            return make_error("bmc", "bmc.json", it->path().string() + " is not a JSON object");
        }
        tree.resources[uri] = std::move(*body);
    }
    if (ec) return make_error("bmc", "bmc.mockup_unreadable", "cannot walk " + dir + ": " + ec.message());
    return tree;
}

}  // namespace kiln::bmc
