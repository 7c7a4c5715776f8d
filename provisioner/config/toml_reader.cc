#include "provisioner/config/toml_reader.h"

#include <fmt/format.h>

namespace kiln::config {

std::string toml_type_name(const toml::node& n) {
    switch (n.type()) {
        case toml::node_type::string:
            return "string";
        case toml::node_type::integer:
            return "integer";
        case toml::node_type::floating_point:
            return "float";
        case toml::node_type::boolean:
            return "boolean";
        case toml::node_type::array:
            return "array";
        case toml::node_type::table:
            return "table";
        case toml::node_type::date:
            return "date";
        case toml::node_type::time:
            return "time";
        case toml::node_type::date_time:
            return "date-time";
        default:
            return "nothing";
    }
}

const toml::node* TableReader::get(const std::string& key, bool required) {
    known_.insert(key);
    const toml::node* n = table_.get(key);
    if (!n && required) ctx_.error(table_.source(), key_path(key), "required key is missing");
    return n;
}

const toml::node* TableReader::node(const std::string& key) {
    return get(key, false);
}

void TableReader::type_error(const toml::node& n, const std::string& key, const char* expected) {
    ctx_.error(n.source(), key_path(key), fmt::format("expected {}, found {}", expected, toml_type_name(n)));
}

std::optional<std::string> TableReader::str(const std::string& key, bool required) {
    const toml::node* n = get(key, required);
    if (!n) return std::nullopt;
    if (auto v = n->value<std::string>(); v && n->is_string()) {
        if (v->empty() && required) {
            ctx_.error(n->source(), key_path(key), "expected a non-empty string");
            return std::nullopt;
        }
        return *v;
    }
    type_error(*n, key, "string");
    return std::nullopt;
}

std::optional<int64_t> TableReader::integer(const std::string& key, int64_t min, int64_t max, bool required) {
    const toml::node* n = get(key, required);
    if (!n) return std::nullopt;
    if (!n->is_integer()) {
        type_error(*n, key, "integer");
        return std::nullopt;
    }
    int64_t v = *n->value<int64_t>();
    if (v < min || v > max) {
        std::string range = max == INT64_MAX ? fmt::format(">= {}", min) : fmt::format("{}..{}", min, max);
        ctx_.error(n->source(), key_path(key), fmt::format("expected {}, found {}", range, v));
        return std::nullopt;
    }
    return v;
}

std::optional<double> TableReader::number(const std::string& key) {
    const toml::node* n = get(key, false);
    if (!n) return std::nullopt;
    if (n->is_integer()) return static_cast<double>(*n->value<int64_t>());
    if (n->is_floating_point()) return *n->value<double>();
    type_error(*n, key, "number");
    return std::nullopt;
}

std::optional<bool> TableReader::boolean(const std::string& key) {
    const toml::node* n = get(key, false);
    if (!n) return std::nullopt;
    if (!n->is_boolean()) {
        type_error(*n, key, "boolean");
        return std::nullopt;
    }
    return *n->value<bool>();
}

std::optional<Duration> TableReader::duration(const std::string& key) {
    const toml::node* n = get(key, false);
    if (!n) return std::nullopt;
    if (n->is_integer()) {
        int64_t v = *n->value<int64_t>();
        if (v < 0) {
            ctx_.error(n->source(), key_path(key), "expected a duration >= 0");
            return std::nullopt;
        }
        return Duration(v * 1000);
    }
    if (!n->is_string()) {
        type_error(*n, key, "duration string such as \"90s\"");
        return std::nullopt;
    }
    auto d = parse_duration(*n->value<std::string>());
    if (!d)
        ctx_.error(n->source(), key_path(key),
                   fmt::format("expected a duration such as \"500ms\", \"90s\", \"15m\", \"2h\", found \"{}\"",
                               *n->value<std::string>()));
    return d;
}

std::optional<std::string> TableReader::choice(const std::string& key, const std::vector<std::string>& allowed,
                                               bool required) {
    auto v = str(key, required);
    if (!v) return std::nullopt;
    for (const auto& a : allowed)
        if (a == *v) return v;
    ctx_.error(table_.get(key)->source(), key_path(key),
               fmt::format("expected one of {}, found \"{}\"", fmt::join(allowed, ", "), *v));
    return std::nullopt;
}

std::optional<std::vector<std::string>> TableReader::strings(const std::string& key, bool required) {
    const toml::node* n = get(key, required);
    if (!n) return std::nullopt;
    const toml::array* arr = n->as_array();
    if (!arr) {
        type_error(*n, key, "array of strings");
        return std::nullopt;
    }
    std::vector<std::string> out;
    bool ok = true;
    for (size_t i = 0; i < arr->size(); ++i) {
        const toml::node& item = *arr->get(i);
        if (!item.is_string()) {
            ctx_.error(item.source(), fmt::format("{}[{}]", key_path(key), i),
                       fmt::format("expected string, found {}", toml_type_name(item)));
            ok = false;
            continue;
        }
        out.push_back(*item.value<std::string>());
    }
    if (!ok) return std::nullopt;
    return out;
}

const toml::table* TableReader::table(const std::string& key, bool required) {
    const toml::node* n = get(key, required);
    if (!n) return nullptr;
    if (!n->is_table()) {
        type_error(*n, key, "table");
        return nullptr;
    }
    return n->as_table();
}

const toml::array* TableReader::array(const std::string& key, bool required) {
    const toml::node* n = get(key, required);
    if (!n) return nullptr;
    if (!n->is_array()) {
        type_error(*n, key, "array");
        return nullptr;
    }
    return n->as_array();
}

void TableReader::finish() {
    for (const auto& [k, v] : table_) {
        const std::string key(k.str());
        if (known_.count(key)) continue;
        std::string expected;
        for (const auto& name : known_) expected += (expected.empty() ? "" : ", ") + name;
        // toml++ records where each key was written: point at the key itself.
        const auto& where = k.source().begin.line ? k.source() : v.source();
        ctx_.error(where, key_path(key),
                   expected.empty() ? fmt::format("unknown key '{}'", key)
                                    : fmt::format("unknown key '{}'; expected one of: {}", key, expected));
    }
}

void pair_error(const TableReader& r, const std::string& a, const std::string& b, const std::string& when_a,
                const std::string& when_b) {
    if (const toml::node* n = r.table().get(a))
        r.ctx().error(n->source(), r.key_path(a), when_a);
    else if (const toml::node* m = r.table().get(b))
        r.ctx().error(m->source(), r.key_path(b), when_b);
    else
        r.ctx().error(r.table().source(), r.key_path(a), when_a);
}

}  // namespace kiln::config
