#include "network/sonic/yang_validator.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string_view>

#include <fmt/format.h>
#include <libyang/libyang.h>

#include "network/sonic/libyang_raii.h"

#ifndef KILN_SONIC_YANG_DIR
#define KILN_SONIC_YANG_DIR ""
#endif

namespace kiln::network::sonic {

namespace {

using nlohmann::json;

// One YANG list that can hold a table's rows.
struct ListInfo {
    const lysc_node* list = nullptr;
    std::vector<const lysc_node*> keys;  // in key order
    const lysc_node* inner = nullptr;    // map tables: the nested list
    const lysc_node* inner_key = nullptr;
    const lysc_node* inner_value = nullptr;
};

struct TableInfo {
    std::string top;  // "sonic-port:sonic-port"
    std::vector<ListInfo> lists;
    // Tables of fixed rows, as DEVICE_METADATA|localhost: key -> container.
    std::map<std::string, const lysc_node*, std::less<>> rows;
};

Error yang_error(const std::string& code, std::string message) {
    return make_error("network", code, std::move(message));
}

std::string one_line(std::string s) {
    std::replace(s.begin(), s.end(), '\n', ' ');
    return s;
}

std::string last_error(const ly_ctx* ctx, const char* fallback) {
    const ly_err_item* e = ly_err_last(ctx);
    return one_line(e != nullptr && e->msg != nullptr ? e->msg : fallback);
}

const lysc_node* child_named(const lysc_node* parent, std::string_view name) {
    for (const lysc_node* c = lysc_node_child(parent); c != nullptr; c = c->next)
        if (name == c->name) return c;
    return nullptr;
}

const lysc_type* type_of(const lysc_node* n) {
    if (n->nodetype == LYS_LEAF) return reinterpret_cast<const lysc_node_leaf*>(n)->type;
    if (n->nodetype == LYS_LEAFLIST) return reinterpret_cast<const lysc_node_leaflist*>(n)->type;
    return nullptr;
}

// Which JSON encodings a type accepts (RFC 7951 section 6).
enum : unsigned { kString = 1, kNumber = 2, kBool = 4 };

unsigned encodings(const lysc_type* t) {
    if (t == nullptr) return kString;
    switch (t->basetype) {
        case LY_TYPE_INT8:
        case LY_TYPE_INT16:
        case LY_TYPE_INT32:
        case LY_TYPE_UINT8:
        case LY_TYPE_UINT16:
        case LY_TYPE_UINT32:
            return kNumber;  // 64-bit integers and decimal64 are strings in JSON
        case LY_TYPE_BOOL:
            return kBool;
        case LY_TYPE_LEAFREF:
            return encodings(reinterpret_cast<const lysc_type_leafref*>(t)->realtype);
        case LY_TYPE_UNION: {
            unsigned out = 0;
            const auto* u = reinterpret_cast<const lysc_type_union*>(t);
            LY_ARRAY_COUNT_TYPE i;
            LY_ARRAY_FOR(u->types, i) out |= encodings(u->types[i]);
            return out;
        }
        default:
            return kString;
    }
}

std::optional<long long> as_integer(const std::string& v) {
    long long x = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    if (v.empty() || ec != std::errc() || end != v.data() + v.size()) return std::nullopt;
    return x;
}

// CONFIG_DB holds strings; YANG JSON wants them typed.
json encode(const lysc_node* leaf, const std::string& v) {
    const unsigned enc = encodings(type_of(leaf));
    if (enc & kNumber)
        if (auto n = as_integer(v)) return *n;
    if ((enc & kBool) && (v == "true" || v == "false")) return v == "true";
    return v;
}

std::vector<std::string> split_list(const std::string& s) {
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= s.size()) {
        size_t comma = s.find(',', start);
        if (comma == std::string::npos) comma = s.size();
        out.push_back(s.substr(start, comma - start));
        start = comma + 1;
    }
    return out;
}

// A data path from libyang, split into its steps:
// /sonic-queue:sonic-queue/QUEUE/QUEUE_LIST[ifname='Ethernet0'][qindex='3']/wred_profile
struct Step {
    std::string name;
    std::vector<std::pair<std::string, std::string>> predicates;
};

std::vector<Step> parse_path(const std::string& path) {
    std::vector<Step> steps;
    size_t i = 0;
    while (i < path.size()) {
        if (path[i] == '/') {
            steps.emplace_back();
            ++i;
            continue;
        }
        if (steps.empty()) steps.emplace_back();
        if (path[i] == '[') {
            size_t eq = path.find('=', i);
            if (eq == std::string::npos || eq + 1 >= path.size()) break;
            const char quote = path[eq + 1];
            size_t close = path.find(quote, eq + 2);
            if (close == std::string::npos) break;
            std::string name = path.substr(i + 1, eq - i - 1);
            if (auto colon = name.find(':'); colon != std::string::npos) name = name.substr(colon + 1);
            steps.back().predicates.emplace_back(name, path.substr(eq + 2, close - eq - 2));
            i = path.find(']', close);
            if (i == std::string::npos) break;
            ++i;
            continue;
        }
        size_t end = path.find_first_of("/[", i);
        if (end == std::string::npos) end = path.size();
        std::string name = path.substr(i, end - i);
        if (auto colon = name.find(':'); colon != std::string::npos) name = name.substr(colon + 1);
        steps.back().name += name;
        i = end;
    }
    return steps;
}

// Maps a libyang error back to the CONFIG_DB row and field it concerns.
YangIssue issue_from(const ly_err_item& e) {
    YangIssue issue;
    issue.message = one_line(e.msg != nullptr ? e.msg : "invalid");
    if (e.path != nullptr) {
        // libyang 2.1 wraps it: Data location "/sonic-...", line number 1.
        std::string path = e.path;
        if (auto open = path.find('"'), close = path.rfind('"'); open != std::string::npos && close > open)
            path = path.substr(open + 1, close - open - 1);
        const std::vector<Step> steps = parse_path(path);
        // steps: [0] module container, [1] table, [2] list row, [3] field or map entry
        if (steps.size() > 1) issue.table = steps[1].name;
        if (steps.size() > 2)
            for (const auto& [_, value] : steps[2].predicates) issue.key += (issue.key.empty() ? "" : "|") + value;
        if (steps.size() > 3) {
            const Step& s = steps[3];
            const bool map_entry = !s.predicates.empty() && s.predicates[0].first != ".";
            issue.field = map_entry ? s.predicates[0].second : s.name;
        }
    }
    // A missing mandatory leaf is reported at its row; name the leaf.
    constexpr std::string_view kMandatory = "Mandatory node \"";
    if (issue.field.empty())
        if (auto at = issue.message.find(kMandatory); at != std::string::npos) {
            const size_t start = at + kMandatory.size();
            const size_t end = issue.message.find('"', start);
            if (end != std::string::npos) issue.field = issue.message.substr(start, end - start);
        }
    return issue;
}

}  // namespace

std::string YangIssue::str() const {
    std::string out = table;
    if (!key.empty()) out += "|" + key;
    if (!field.empty()) out += (out.empty() ? "" : ": ") + field;
    return out.empty() ? message : out + ": " + message;
}

std::string default_yang_dir() {
    if (const char* env = std::getenv("KILN_SONIC_YANG_DIR"); env != nullptr && *env != '\0') return env;
    return KILN_SONIC_YANG_DIR;
}

struct YangValidator::Impl {
    LyContext ctx;
    std::map<std::string, TableInfo> tables;

    // Type check of one value; the libyang message when it does not fit.
    std::optional<std::string> type_error(const lysc_node* leaf, const std::string& v) const {
        ly_err_clean(ctx.get(), nullptr);
        const LY_ERR rc = lyd_value_validate(ctx.get(), leaf, v.data(), v.size(), nullptr, nullptr, nullptr);
        // LY_EINCOMPLETE: only a reference is left to resolve, which the whole-tree pass does.
        if (rc == LY_SUCCESS || rc == LY_EINCOMPLETE) return std::nullopt;
        std::string msg = last_error(ctx.get(), "invalid value");
        ly_err_clean(ctx.get(), nullptr);
        return msg;
    }

    // Sets obj[leaf] from a CONFIG_DB value, recording any issue under `where`.
    void put(json& obj, const lysc_node* leaf, const json& value, YangIssue where,
             std::vector<YangIssue>& issues) const {
        std::vector<std::string> items;
        if (value.is_string()) {
            const std::string& s = value.get_ref<const std::string&>();
            if (leaf->nodetype == LYS_LEAFLIST)
                items = split_list(s);
            else
                items.push_back(s);
        } else if (value.is_array() && leaf->nodetype == LYS_LEAFLIST) {
            for (const auto& v : value) {
                if (!v.is_string()) {
                    where.message = "list items must be strings";
                    issues.push_back(where);
                    return;
                }
                items.push_back(v.get<std::string>());
            }
        } else {
            where.message =
                leaf->nodetype == LYS_LEAFLIST ? "expected a string or a list of strings" : "expected a string";
            issues.push_back(where);
            return;
        }
        json encoded = json::array();
        for (const auto& item : items) {
            if (auto err = type_error(leaf, item)) {
                where.message = *err;
                issues.push_back(where);
            }
            encoded.push_back(encode(leaf, item));
        }
        obj[leaf->name] = leaf->nodetype == LYS_LEAFLIST ? encoded : encoded.at(0);
    }

    json convert(const json& config_db, std::vector<YangIssue>& issues) const {
        json out = json::object();
        if (!config_db.is_object()) {
            issues.push_back({"", "", "", "CONFIG_DB must be a JSON object of tables"});
            return out;
        }
        for (const auto& [table, rows] : config_db.items()) {
            auto t = tables.find(table);
            if (t == tables.end()) {
                issues.push_back({table, "", "", "no YANG model defines this table"});
                continue;
            }
            if (!rows.is_object()) {
                issues.push_back({table, "", "", "a table must be an object of keys"});
                continue;
            }
            json& lists = out[t->second.top][table];
            for (const auto& [key, fields] : rows.items()) convert_row(t->second, table, key, fields, lists, issues);
        }
        return out;
    }

    void convert_row(const TableInfo& info, const std::string& table, const std::string& key, const json& fields,
                     json& lists, std::vector<YangIssue>& issues) const {
        if (!fields.is_object()) {
            issues.push_back({table, key, "", "an entry must be an object of fields"});
            return;
        }
        if (auto fixed = info.rows.find(key); fixed != info.rows.end()) {
            json row = json::object();
            for (const auto& [field, value] : fields.items()) {
                const lysc_node* leaf = child_named(fixed->second, field);
                if (leaf != nullptr && (leaf->nodetype & (LYS_LEAF | LYS_LEAFLIST)))
                    put(row, leaf, value, {table, key, field, ""}, issues);
                else
                    issues.push_back({table, key, field, "no such field in the YANG model"});
            }
            lists[key] = std::move(row);
            return;
        }
        const std::vector<std::string> parts = split_key(key);
        const ListInfo* li = nullptr;
        for (const auto& l : info.lists)
            if (l.keys.size() == parts.size()) {
                li = &l;
                break;
            }
        if (li == nullptr && info.lists.empty()) {
            issues.push_back({table, key, "", "no such row in the YANG model"});
            return;
        }
        if (li == nullptr) {
            issues.push_back({table, key, "",
                              fmt::format("the key has {} part(s) but the YANG list {} has {} key leaves", parts.size(),
                                          info.lists.front().list->name, info.lists.front().keys.size())});
            return;
        }
        json row = json::object();
        for (size_t i = 0; i < parts.size(); ++i)
            put(row, li->keys[i], parts[i], {table, key, li->keys[i]->name, ""}, issues);
        json entries = json::array();
        for (const auto& [field, value] : fields.items()) {
            if (field == "NULL") continue;  // SONiC's placeholder field for rows with no fields
            const lysc_node* leaf = child_named(li->list, field);
            if (leaf != nullptr && lysc_is_key(leaf)) {
                issues.push_back({table, key, field, "is a key leaf: it comes from the key, not a field"});
                continue;
            }
            if (leaf != nullptr && (leaf->nodetype & (LYS_LEAF | LYS_LEAFLIST))) {
                put(row, leaf, value, {table, key, field, ""}, issues);
                continue;
            }
            if (li->inner != nullptr) {  // a map table: each field is one map entry
                json entry = json::object();
                put(entry, li->inner_key, field, {table, key, field, ""}, issues);
                put(entry, li->inner_value, value, {table, key, field, ""}, issues);
                entries.push_back(std::move(entry));
                continue;
            }
            issues.push_back({table, key, field, "no such field in the YANG model"});
        }
        if (!entries.empty()) row[li->inner->name] = std::move(entries);
        lists[li->list->name].push_back(std::move(row));
    }
};

YangValidator::YangValidator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
YangValidator::YangValidator(YangValidator&&) noexcept = default;
YangValidator& YangValidator::operator=(YangValidator&&) noexcept = default;
YangValidator::~YangValidator() = default;

Result<YangValidator> YangValidator::load(const std::string& dir) {
    namespace fs = std::filesystem;
    if (dir.empty())
        return yang_error("network.yang_models", "no SONiC YANG directory: set KILN_SONIC_YANG_DIR or pass one");
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return yang_error("network.yang_models", fmt::format("{}: not a directory", dir));

    std::vector<std::string> modules;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        const std::string file = entry.path().filename().string();
        if (file.rfind("sonic-", 0) != 0 || entry.path().extension() != ".yang") continue;
        std::string name = entry.path().stem().string();
        if (auto at = name.find('@'); at != std::string::npos) name.resize(at);
        modules.push_back(name);
    }
    std::sort(modules.begin(), modules.end());
    // First, so that the when/must paths into DEVICE_METADATA resolve (else libyang skips those checks).
    if (auto it = std::find(modules.begin(), modules.end(), "sonic-device_metadata"); it != modules.end())
        std::rotate(modules.begin(), it, it + 1);
    if (modules.empty()) return yang_error("network.yang_models", fmt::format("{}: no sonic-*.yang files", dir));

    auto impl = std::make_unique<Impl>();
    ly_store_errors_quietly();
    {
        ly_ctx* raw = nullptr;
        // No ietf-yang-library: its mandatory content-id would fail every validation.
        if (ly_ctx_new(dir.c_str(), LY_CTX_DISABLE_SEARCHDIR_CWD | LY_CTX_NO_YANGLIBRARY, &raw) != LY_SUCCESS)
            return yang_error("network.yang_models", fmt::format("{}: cannot create a libyang context", dir));
        impl->ctx.reset(raw);
        for (const auto& name : modules)
            if (ly_ctx_load_module(raw, name.c_str(), nullptr, nullptr) == nullptr)
                return yang_error("network.yang_models", fmt::format("{}: cannot load module {}: {}", dir, name,
                                                                     last_error(raw, "unknown error")));
        ly_err_clean(raw, nullptr);
    }

    uint32_t index = 0;
    while (const lys_module* mod = ly_ctx_get_module_iter(impl->ctx.get(), &index)) {
        if (!mod->implemented || mod->compiled == nullptr || std::string_view(mod->name).rfind("sonic-", 0) != 0)
            continue;
        for (const lysc_node* top = mod->compiled->data; top != nullptr; top = top->next) {
            if (top->nodetype != LYS_CONTAINER) continue;
            for (const lysc_node* table = lysc_node_child(top); table != nullptr; table = table->next) {
                if (table->nodetype != LYS_CONTAINER) continue;
                TableInfo info{std::string(mod->name) + ":" + top->name, {}};
                for (const lysc_node* l = lysc_node_child(table); l != nullptr; l = l->next) {
                    if (l->nodetype == LYS_CONTAINER) info.rows[l->name] = l;
                    if (l->nodetype != LYS_LIST) continue;
                    ListInfo li;
                    li.list = l;
                    for (const lysc_node* c = lysc_node_child(l); c != nullptr; c = c->next) {
                        if (lysc_is_key(c))
                            li.keys.push_back(c);
                        else if (c->nodetype == LYS_LIST && li.inner == nullptr)
                            li.inner = c;
                    }
                    if (li.inner != nullptr)
                        for (const lysc_node* c = lysc_node_child(li.inner); c != nullptr; c = c->next) {
                            if (lysc_is_key(c) && li.inner_key == nullptr)
                                li.inner_key = c;
                            else if (c->nodetype == LYS_LEAF && li.inner_value == nullptr)
                                li.inner_value = c;
                        }
                    if (li.inner_key == nullptr || li.inner_value == nullptr) li.inner = nullptr;
                    info.lists.push_back(std::move(li));
                }
                if (!info.lists.empty() || !info.rows.empty()) impl->tables[table->name] = std::move(info);
            }
        }
    }
    if (impl->tables.empty())
        return yang_error("network.yang_models", fmt::format("{}: the models define no tables", dir));
    return YangValidator(std::move(impl));
}

Result<json> YangValidator::to_yang(const json& config_db) const {
    std::vector<YangIssue> issues;
    json out = impl_->convert(config_db, issues);
    if (!issues.empty()) return yang_error("network.yang_invalid", issues.front().str());
    return out;
}

std::vector<YangIssue> YangValidator::check(const json& config_db) const {
    std::vector<YangIssue> issues;
    const json data = impl_->convert(config_db, issues);
    if (!issues.empty()) return issues;

    ly_ctx* ctx = impl_->ctx.get();
    ly_err_clean(ctx, nullptr);
    const std::string text = data.dump();
    lyd_node* raw = nullptr;
    const LY_ERR rc = lyd_parse_data_mem(ctx, text.c_str(), LYD_JSON, LYD_PARSE_STRICT, 0, &raw);
    LydTree tree(raw);
    if (rc != LY_SUCCESS) {
        for (const ly_err_item* e = ly_err_first(ctx); e != nullptr; e = e->next)
            if (e->level == LY_LLERR) issues.push_back(issue_from(*e));
        if (issues.empty()) issues.push_back({"", "", "", fmt::format("libyang error {}", static_cast<int>(rc))});
        // A missing mandatory leaf comes with a schema path only: name the first row that lacks it.
        for (auto& issue : issues) {
            if (!issue.key.empty() || issue.field.empty()) continue;
            auto rows = config_db.find(issue.table);
            if (rows == config_db.end() || !rows->is_object()) continue;
            for (const auto& [key, fields] : rows->items())
                if (fields.is_object() && !fields.contains(issue.field)) {
                    issue.key = key;
                    break;
                }
        }
    }
    ly_err_clean(ctx, nullptr);
    return issues;
}

Status YangValidator::validate(const json& config_db) const {
    const std::vector<YangIssue> issues = check(config_db);
    if (issues.empty()) return ok_status();
    std::string message;
    for (const auto& i : issues) message += (message.empty() ? "" : "; ") + i.str();
    return yang_error("network.yang_invalid", message);
}

std::vector<std::string> YangValidator::tables() const {
    std::vector<std::string> out;
    for (const auto& [name, _] : impl_->tables) out.push_back(name);
    return out;
}

}  // namespace kiln::network::sonic
