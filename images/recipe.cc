#include "images/recipe.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "provisioner/config/fleet_loader.h"
#include "provisioner/config/toml_reader.h"

namespace kiln::images {

namespace fs = std::filesystem;
using config::ReadContext;
using config::TableReader;

std::optional<uint64_t> parse_size(const std::string& text) {
    static const std::regex re(R"(^\s*(\d+)\s*(K|M|G|T|KiB|MiB|GiB|TiB)?\s*$)");
    std::smatch m;
    if (!std::regex_match(text, m, re)) return std::nullopt;
    uint64_t v = 0;
    try {
        v = std::stoull(m[1].str());
    } catch (...) {
        return std::nullopt;
    }
    const std::string unit = m[2].str();
    int shift = 0;
    if (!unit.empty()) {
        switch (unit[0]) {
            case 'K':
                shift = 10;
                break;
            case 'M':
                shift = 20;
                break;
            case 'G':
                shift = 30;
                break;
            case 'T':
                shift = 40;
                break;
        }
    }
    if (shift && v > (UINT64_MAX >> shift)) return std::nullopt;
    return v << shift;
}

nlohmann::json LayerSpec::canonical() const {
    nlohmann::json j;
    j["name"] = name;
    j["packages"] = packages;
    j["components"] = components;
    nlohmann::json repos_j = nlohmann::json::array();
    for (const auto& r : repos)
        repos_j.push_back({{"name", r.name},
                           {"uri", r.uri},
                           {"suite", r.suite},
                           {"components", r.components},
                           {"key", r.key.empty() ? "" : fs::path(r.key).filename().string()}});
    j["repos"] = repos_j;
    nlohmann::json debs_j = nlohmann::json::array();
    for (const auto& d : debs) debs_j.push_back(fs::path(d).filename().string());
    j["debs"] = debs_j;
    nlohmann::json files_j = nlohmann::json::array();
    for (const auto& f : files) {
        nlohmann::json fj = {{"path", f.path}, {"mode", f.mode}};
        if (f.content) fj["content"] = *f.content;
        if (!f.input.empty()) fj["input"] = f.input;
        files_j.push_back(fj);
    }
    j["files"] = files_j;
    j["commands"] = commands;
    j["kernel_args"] = kernel_args;
    j["services"] = services;
    // Only when set, so that the keys of appliance layers stay as they were.
    if (build_in == BuildIn::host) j["build_in"] = "host";
    return j;
}

namespace {

const std::regex kNameRe(R"(^[a-z0-9][a-z0-9._-]*$)");
const std::regex kPackageRe(R"(^[a-z0-9][a-z0-9+.-]+(=[A-Za-z0-9.+~:-]+)?$)");
const std::regex kComponentRe(R"(^[a-z0-9-]+$)");
const std::regex kServiceRe(R"(^[A-Za-z0-9@._-]+$)");

struct Parser {
    ReadContext ctx;
    std::vector<config::Diagnostic> errors;
    std::string dir;
    Recipe recipe;

    // A host path from the recipe: relative to the recipe's folder.
    std::string resolve(const std::string& p) const {
        fs::path fp(p);
        if (fp.is_absolute()) return fp.lexically_normal().string();
        return (fs::path(dir) / fp).lexically_normal().string();
    }

    void check_names(const toml::node* n, const std::vector<std::string>& items, const std::string& key,
                     const std::regex& re, const char* what) {
        if (!n) return;
        const toml::array* arr = n->as_array();
        for (size_t i = 0; i < items.size(); ++i) {
            if (std::regex_match(items[i], re)) continue;
            const auto& where = arr && arr->get(i) ? arr->get(i)->source() : n->source();
            ctx.error(where, fmt::format("{}[{}]", key, i), fmt::format("'{}' is not a valid {}", items[i], what));
        }
    }

    void host_file_exists(const toml::node* n, const std::string& key, const std::string& resolved) {
        std::error_code ec;
        if (!fs::is_regular_file(resolved, ec))
            ctx.error(n->source(), key, fmt::format("file not found: {}", resolved));
    }

    std::optional<int> mode(TableReader& r) {
        const toml::node* n = r.node("mode");
        if (!n) return 0644;
        int v = -1;
        if (n->is_integer()) {
            v = static_cast<int>(*n->value<int64_t>());
        } else if (n->is_string()) {
            const std::string s = *n->value<std::string>();
            if (std::regex_match(s, std::regex(R"(^0?[0-7]{3,4}$)"))) v = static_cast<int>(std::stol(s, nullptr, 8));
        }
        if (v < 0 || v > 07777) {
            ctx.error(n->source(), r.key_path("mode"), "expected an octal mode such as \"0755\"");
            return std::nullopt;
        }
        return v;
    }

    void parse_base(const toml::table& t, const std::string& path) {
        TableReader r(ctx, t, path);
        BaseSpec& b = recipe.base;
        b.pos = r.pos();
        if (auto v = r.str("suite", true)) b.suite = *v;
        if (auto v = r.choice("variant", {"extract", "custom", "essential", "apt", "required", "minbase", "buildd",
                                          "important", "debootstrap", "standard"}))
            b.variant = *v;
        if (auto v = r.str("mirror")) b.mirror = *v;
        if (auto v = r.strings("components")) {
            b.components = *v;
            check_names(t.get("components"), b.components, r.key_path("components"), kComponentRe, "component");
            if (b.components.empty())
                ctx.error(t.get("components")->source(), r.key_path("components"), "expected at least one component");
        }
        if (auto v = r.strings("packages")) {
            b.packages = *v;
            check_names(t.get("packages"), b.packages, r.key_path("packages"), kPackageRe, "package name");
        }
        if (auto v = r.strings("kernel_args")) b.kernel_args = *v;
        r.finish();
    }

    void parse_output(const toml::table& t, const std::string& path) {
        TableReader r(ctx, t, path);
        OutputSpec& o = recipe.output;
        o.pos = r.pos();
        if (auto v = r.choice("format", {"qcow2", "raw"})) o.format = *v;
        if (const toml::node* n = r.node("size")) {
            std::optional<uint64_t> bytes;
            if (n->is_string())
                bytes = parse_size(*n->value<std::string>());
            else if (n->is_integer() && *n->value<int64_t>() > 0)
                bytes = static_cast<uint64_t>(*n->value<int64_t>());
            if (!bytes || *bytes < (256ull << 20)) {
                ctx.error(n->source(), r.key_path("size"), "expected a size of at least 256M, such as \"4G\"");
            } else {
                o.size_bytes = *bytes;
            }
        }
        if (auto v = r.boolean("compress")) o.compress = *v;
        if (o.compress && o.format == "raw")
            ctx.error(t.get("compress")->source(), r.key_path("compress"), "compression needs format = \"qcow2\"");
        r.finish();
    }

    void parse_inputs(const toml::table& t, const std::string& path,
                      const std::map<std::string, std::string>& overrides) {
        for (const auto& [k, v] : t) {
            InputSpec in;
            in.name = std::string(k.str());
            in.pos = ctx.pos(v.source());
            const std::string key = path + "." + in.name;
            if (!std::regex_match(in.name, kNameRe)) {
                ctx.error(v.source(), key, "input names use a-z, 0-9, '.', '_' and '-'");
                continue;
            }
            if (!v.is_string()) {
                ctx.error(v.source(), key,
                          fmt::format("expected string (a host path, \"\" = given by the caller), "
                                      "found {}",
                                      config::toml_type_name(v)));
                continue;
            }
            const std::string p = *v.value<std::string>();
            if (!p.empty()) in.path = resolve(p);
            recipe.inputs[in.name] = in;
        }
        for (const auto& [name, p] : overrides) {
            auto it = recipe.inputs.find(name);
            if (it == recipe.inputs.end()) {
                errors.push_back({{recipe.path, 1, 1},
                                  "inputs." + name,
                                  fmt::format("--input {}: the recipe declares no such input", name)});
                continue;
            }
            it->second.path = fs::absolute(p).lexically_normal().string();
        }
    }

    void parse_file(const toml::table& t, const std::string& path, LayerSpec& layer) {
        TableReader r(ctx, t, path);
        FileSpec f;
        f.pos = r.pos();
        if (auto v = r.str("path", true)) {
            f.path = *v;
            if (f.path.empty() || f.path[0] != '/' || f.path.find("..") != std::string::npos)
                ctx.error(t.get("path")->source(), r.key_path("path"),
                          fmt::format("expected an absolute path inside the image, found '{}'", f.path));
        }
        int given = 0;
        if (auto v = r.str("source")) {
            ++given;
            f.source = resolve(*v);
            host_file_exists(t.get("source"), r.key_path("source"), f.source);
        }
        if (auto v = r.str("input")) {
            ++given;
            f.input = *v;
            if (!recipe.inputs.count(f.input))
                ctx.error(t.get("input")->source(), r.key_path("input"),
                          fmt::format("no input named '{}' in [inputs]", f.input));
        }
        if (auto v = r.str("content")) {
            ++given;
            f.content = *v;
        }
        if (given != 1) ctx.error(t.source(), path, "expected exactly one of source, input or content");
        if (auto m = mode(r)) f.mode = *m;
        r.finish();
        layer.files.push_back(std::move(f));
    }

    void parse_repo(const toml::table& t, const std::string& path, LayerSpec& layer) {
        TableReader r(ctx, t, path);
        RepoSpec repo;
        repo.pos = r.pos();
        if (auto v = r.str("name", true)) {
            repo.name = *v;
            if (!std::regex_match(repo.name, kNameRe))
                ctx.error(t.get("name")->source(), r.key_path("name"), "repo names use a-z, 0-9, '.', '_' and '-'");
        }
        if (auto v = r.str("uri", true)) repo.uri = *v;
        if (auto v = r.str("suite", true)) repo.suite = *v;
        if (auto v = r.strings("components")) repo.components = *v;
        if (auto v = r.str("key")) {
            repo.key = resolve(*v);
            host_file_exists(t.get("key"), r.key_path("key"), repo.key);
        } else if (!repo.uri.empty() && repo.uri.rfind("file:", 0) != 0) {
            ctx.error(t.source(), r.key_path("key"), "a network repository needs its signing key (key = \"PATH\")");
        }
        r.finish();
        layer.repos.push_back(std::move(repo));
    }

    void parse_layer(const toml::table& t, const std::string& path, std::set<std::string>& names) {
        TableReader r(ctx, t, path);
        LayerSpec layer;
        layer.pos = r.pos();
        if (auto v = r.str("name", true)) {
            layer.name = *v;
            if (!std::regex_match(layer.name, kNameRe))
                ctx.error(t.get("name")->source(), r.key_path("name"), "layer names use a-z, 0-9, '.', '_' and '-'");
            else if (layer.name == "base" || !names.insert(layer.name).second)
                ctx.error(t.get("name")->source(), r.key_path("name"),
                          fmt::format("layer name '{}' is used twice (\"base\" is reserved)", layer.name));
        }
        if (auto v = r.strings("packages")) {
            layer.packages = *v;
            check_names(t.get("packages"), layer.packages, r.key_path("packages"), kPackageRe, "package name");
        }
        if (auto v = r.strings("components")) {
            layer.components = *v;
            check_names(t.get("components"), layer.components, r.key_path("components"), kComponentRe, "component");
        }
        if (auto v = r.strings("debs")) {
            const toml::array* arr = t.get("debs")->as_array();
            for (size_t i = 0; i < v->size(); ++i) {
                layer.debs.push_back(resolve((*v)[i]));
                host_file_exists(arr->get(i), fmt::format("{}[{}]", r.key_path("debs"), i), layer.debs.back());
            }
        }
        if (auto v = r.strings("commands")) layer.commands = *v;
        if (auto v = r.strings("kernel_args")) layer.kernel_args = *v;
        if (auto v = r.str("timeout")) {
            auto d = config::parse_duration(*v);
            if (!d || *d < std::chrono::seconds(1))
                ctx.error(t.get("timeout")->source(), r.key_path("timeout"),
                          "expected a duration of a second or more, such as \"90m\" or \"4h\"");
            else
                layer.timeout = std::chrono::duration_cast<std::chrono::seconds>(*d);
        }
        if (auto v = r.str("build_in")) {
            if (*v == "host")
                layer.build_in = LayerSpec::BuildIn::host;
            else if (*v != "appliance")
                ctx.error(t.get("build_in")->source(), r.key_path("build_in"),
                          fmt::format("expected \"appliance\" or \"host\", not \"{}\"", *v));
        }
        if (auto v = r.strings("services")) {
            layer.services = *v;
            check_names(t.get("services"), layer.services, r.key_path("services"), kServiceRe, "unit name");
        }
        if (const toml::array* files = r.array("files")) {
            for (size_t i = 0; i < files->size(); ++i) {
                const std::string p = fmt::format("{}[{}]", r.key_path("files"), i);
                if (const toml::table* ft = files->get(i)->as_table())
                    parse_file(*ft, p, layer);
                else
                    ctx.error(files->get(i)->source(), p, "expected a table ([[layers.files]])");
            }
        }
        if (const toml::array* repos = r.array("repos")) {
            for (size_t i = 0; i < repos->size(); ++i) {
                const std::string p = fmt::format("{}[{}]", r.key_path("repos"), i);
                if (const toml::table* rt = repos->get(i)->as_table())
                    parse_repo(*rt, p, layer);
                else
                    ctx.error(repos->get(i)->source(), p, "expected a table ([[layers.repos]])");
            }
        }
        r.finish();
        recipe.layers.push_back(std::move(layer));
    }
};

}  // namespace

RecipeLoad parse_recipe(const std::string& text, const std::string& path,
                        const std::map<std::string, std::string>& overrides) {
    RecipeLoad out;
    Parser P{ReadContext{path, nullptr}, {}, fs::absolute(path).parent_path().lexically_normal().string(), {}};
    P.ctx.errors = &P.errors;
    P.recipe.path = path;
    P.recipe.dir = P.dir;
    toml::table tbl;
    try {
        tbl = toml::parse(text, path);
    } catch (const toml::parse_error& e) {
        P.errors.push_back({P.ctx.pos(e.source()), "", std::string(e.description())});
        out.errors = std::move(P.errors);
        return out;
    }
    TableReader root(P.ctx, tbl, "");
    if (auto v = root.str("name", true)) {
        P.recipe.name = *v;
        if (!std::regex_match(P.recipe.name, kNameRe))
            P.ctx.error(tbl.get("name")->source(), "name", "recipe names use a-z, 0-9, '.', '_' and '-'");
    }
    // Inputs first: files refer to them.
    if (const toml::table* t = root.table("inputs"))
        P.parse_inputs(*t, "inputs", overrides);
    else
        P.parse_inputs(toml::table{}, "inputs", overrides);
    if (const toml::table* t = root.table("base", true)) P.parse_base(*t, "base");
    std::set<std::string> names;
    if (const toml::array* layers = root.array("layers")) {
        for (size_t i = 0; i < layers->size(); ++i) {
            const std::string p = fmt::format("layers[{}]", i);
            if (const toml::table* lt = layers->get(i)->as_table())
                P.parse_layer(*lt, p, names);
            else
                P.ctx.error(layers->get(i)->source(), p, "expected a table ([[layers]])");
        }
    }
    if (const toml::table* t = root.table("output")) P.parse_output(*t, "output");
    root.finish();
    std::stable_sort(P.errors.begin(), P.errors.end(), [](const auto& a, const auto& b) {
        return std::tie(a.pos.line, a.pos.column) < std::tie(b.pos.line, b.pos.column);
    });
    out.errors = std::move(P.errors);
    if (out.errors.empty()) out.recipe = std::move(P.recipe);
    return out;
}

RecipeLoad load_recipe(const std::string& path, const std::map<std::string, std::string>& overrides) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        RecipeLoad out;
        out.errors.push_back({{path, 0, 0}, "", "cannot read the recipe file"});
        return out;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    return parse_recipe(ss.str(), path, overrides);
}

}  // namespace kiln::images
