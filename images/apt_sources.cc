#include "images/apt_sources.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace kiln::images {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> words(const std::string& s) {
    std::istringstream in(s);
    std::vector<std::string> out;
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

std::string trim(const std::string& s) {
    const auto b = s.find_first_not_of(" \t\r");
    if (b == std::string::npos) return "";
    return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

std::string read_text(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace

std::vector<AptSource> parse_deb822_sources(const std::string& text) {
    std::vector<AptSource> out;
    std::istringstream in(text + "\n\n");
    std::string line;
    std::map<std::string, std::string> fields;
    std::string last;
    auto flush = [&] {
        if (fields.empty()) return;
        const auto types = words(fields["types"]);
        const bool enabled = fields.count("enabled") == 0 || fields["enabled"] != "no";
        if (enabled && std::find(types.begin(), types.end(), "deb") != types.end()) {
            for (const auto& uri : words(fields["uris"])) {
                AptSource s;
                s.uri = uri;
                s.suites = words(fields["suites"]);
                s.components = words(fields["components"]);
                s.signed_by = trim(fields["signed-by"]);
                if (s.signed_by.find('\n') != std::string::npos) s.signed_by.clear();  // inline key: not a path
                out.push_back(std::move(s));
            }
        }
        fields.clear();
        last.clear();
    };
    while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) {
            flush();
            continue;
        }
        if (line[0] == '#') continue;
        if ((line[0] == ' ' || line[0] == '\t') && !last.empty()) {
            fields[last] += "\n" + trim(line);
            continue;
        }
        const auto colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string key = line.substr(0, colon);
        std::transform(key.begin(), key.end(), key.begin(), ::tolower);
        fields[key] = trim(line.substr(colon + 1));
        last = key;
    }
    flush();
    return out;
}

std::vector<AptSource> parse_one_line_sources(const std::string& text) {
    std::vector<AptSource> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        line = trim(line.substr(0, line.find('#')));
        if (line.rfind("deb ", 0) != 0) continue;
        AptSource s;
        std::string rest = trim(line.substr(4));
        if (!rest.empty() && rest[0] == '[') {
            const auto close = rest.find(']');
            if (close == std::string::npos) continue;
            for (const auto& opt : words(rest.substr(1, close - 1)))
                if (opt.rfind("signed-by=", 0) == 0) s.signed_by = opt.substr(10);
            rest = trim(rest.substr(close + 1));
        }
        auto w = words(rest);
        if (w.size() < 2) continue;
        s.uri = w[0];
        s.suites = {w[1]};
        s.components.assign(w.begin() + 2, w.end());
        out.push_back(std::move(s));
    }
    return out;
}

Result<std::vector<AptSource>> machine_apt_sources(const std::string& etc_apt) {
    std::vector<AptSource> out;
    std::error_code ec;
    const fs::path base(etc_apt);
    if (fs::is_regular_file(base / "sources.list", ec)) {
        auto v = parse_one_line_sources(read_text(base / "sources.list"));
        out.insert(out.end(), v.begin(), v.end());
    }
    std::vector<fs::path> parts;
    for (const auto& e : fs::directory_iterator(base / "sources.list.d", ec)) parts.push_back(e.path());
    std::sort(parts.begin(), parts.end());
    for (const auto& p : parts) {
        std::vector<AptSource> v;
        if (p.extension() == ".sources")
            v = parse_deb822_sources(read_text(p));
        else if (p.extension() == ".list")
            v = parse_one_line_sources(read_text(p));
        out.insert(out.end(), v.begin(), v.end());
    }
    if (out.empty())
        return make_error("image", "image.no_apt_sources",
                          "the machine has no apt sources under " + etc_apt + "; give [base].mirror in the recipe");
    return out;
}

Result<std::vector<std::string>> mirror_lines(const std::vector<AptSource>& machine, const std::string& suite,
                                              const std::vector<std::string>& components, const std::string& mirror) {
    std::string comps;
    for (const auto& c : components) comps += " " + c;
    if (!mirror.empty()) return std::vector<std::string>{"deb " + mirror + " " + suite + comps};
    std::vector<std::string> out;
    for (const auto& s : machine) {
        for (const auto& su : s.suites) {
            if (su != suite && su != suite + "-updates" && su != suite + "-security") continue;
            std::string line = "deb ";
            if (!s.signed_by.empty()) line += "[signed-by=" + s.signed_by + "] ";
            line += s.uri + " " + su + comps;
            if (std::find(out.begin(), out.end(), line) == out.end()) out.push_back(line);
        }
    }
    if (out.empty())
        return make_error(
            "image", "image.no_mirror",
            "the machine's apt sources have no entry for suite '" + suite + "'; give [base].mirror in the recipe");
    return out;
}

}  // namespace kiln::images
