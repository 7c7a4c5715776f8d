// Typed, position-aware reads from a toml++ table. Every read records the
// key as known; finish() reports the keys nobody asked for. Every problem
// becomes a Diagnostic at the offending value's FILE:LINE:COL.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "provisioner/config/fleet_loader.h"

namespace kiln::config {

struct ReadContext {
    std::string file;  // as given, for messages
    std::vector<Diagnostic>* errors;

    SourcePos pos(const toml::source_region& r) const {
        return {file, static_cast<int>(r.begin.line), static_cast<int>(r.begin.column)};
    }
    void error(const toml::source_region& r, const std::string& key, const std::string& message) const {
        errors->push_back({pos(r), key, message});
    }
};

std::string toml_type_name(const toml::node& n);

class TableReader {
public:
    TableReader(const ReadContext& ctx, const toml::table& table, std::string path)
        : ctx_(ctx), table_(table), path_(std::move(path)) {}

    const toml::table& table() const { return table_; }
    const std::string& path() const { return path_; }
    std::string key_path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
    SourcePos pos() const { return ctx_.pos(table_.source()); }
    const ReadContext& ctx() const { return ctx_; }

    // Missing optional keys return nullopt silently; `required` reports them
    // at the table's position.
    std::optional<std::string> str(const std::string& key, bool required = false);
    std::optional<int64_t> integer(const std::string& key, int64_t min, int64_t max, bool required = false);
    std::optional<double> number(const std::string& key);
    std::optional<bool> boolean(const std::string& key);
    std::optional<Duration> duration(const std::string& key);
    // One of `allowed`; an error lists them.
    std::optional<std::string> choice(const std::string& key, const std::vector<std::string>& allowed,
                                      bool required = false);
    std::optional<std::vector<std::string>> strings(const std::string& key, bool required = false);
    const toml::table* table(const std::string& key, bool required = false);
    const toml::array* array(const std::string& key, bool required = false);
    // The node itself, typeless (for callers that check it themselves).
    const toml::node* node(const std::string& key);

    // Reports every key that was never read.
    void finish();

private:
    const toml::node* get(const std::string& key, bool required);
    void type_error(const toml::node& n, const std::string& key, const char* expected);

    const ReadContext& ctx_;
    const toml::table& table_;
    std::string path_;
    std::set<std::string> known_;
};

// A rule between two keys broken: one error, at `a` when the table has it
// (saying `when_a`), else at `b` (`when_b`), else at the table (`when_a`).
void pair_error(const TableReader& r, const std::string& a, const std::string& b, const std::string& when_a,
                const std::string& when_b);

}  // namespace kiln::config
