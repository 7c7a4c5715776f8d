#include "provisioner/core/json_limits.h"

#include <new>

#include <fmt/format.h>

namespace kiln {

namespace {

struct Shape {
    int depth = 0;      // the deepest nesting of [ and {
    size_t values = 0;  // an upper bound on the values the text holds
};

// One pass outside strings, before nlohmann's parser sees the text: its
// parser is recursive, so depth must be refused first. Values are counted as
// containers plus separators plus one (a bound on what the tree will hold).
Shape shape_of(std::string_view text, int depth_limit) {
    Shape s;
    int depth = 0;
    bool in_string = false, escaped = false, any = false;
    for (char c : text) {
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
            continue;
        }
        switch (c) {
            case '"':
                in_string = true;
                any = true;
                break;
            case '{':
            case '[':
                ++s.values;
                if (++depth > s.depth) s.depth = depth;
                if (s.depth > depth_limit) return s;
                break;
            case '}':
            case ']':
                --depth;
                break;
            case ',':
                ++s.values;
                break;
            case ' ':
            case '\t':
            case '\r':
            case '\n':
                break;
            default:
                any = true;
        }
    }
    if (any) ++s.values;
    return s;
}

}  // namespace

Result<nlohmann::json> parse_json_limited(std::string_view text, const std::string& what, const JsonLimits& limits,
                                          const std::string& domain) {
    const std::string code = domain + ".json";
    if (text.size() > limits.max_bytes)
        return make_error(
            domain, code,
            fmt::format("{}: {} bytes of JSON, over the limit of {}", what, text.size(), limits.max_bytes));
    const Shape s = shape_of(text, limits.max_depth);
    if (s.depth > limits.max_depth)
        return make_error(domain, code, fmt::format("{}: JSON nested deeper than {} levels", what, limits.max_depth));
    if (s.values > limits.max_values)
        return make_error(domain, code,
                          fmt::format("{}: JSON of more than {} values (about {})", what, limits.max_values, s.values));
    // Exceptions on, every kind caught here: nlohmann reports syntax as
    // parse_error but a number past a double ("1e400") as out_of_range, and
    // memory may run out.
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        return make_error(domain, code, fmt::format("{}: not valid JSON (at byte {})", what, e.byte));
    } catch (const nlohmann::json::out_of_range&) {
        return make_error(domain, code, fmt::format("{}: JSON holds a number out of range (over about 1.8e308)", what));
    } catch (const nlohmann::json::exception&) {
        return make_error(domain, code, fmt::format("{}: not valid JSON", what));
    } catch (const std::bad_alloc&) {
        return make_error(domain, code, fmt::format("{}: JSON too large to hold in memory", what));
    }
}

}  // namespace kiln
