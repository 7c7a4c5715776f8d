#include "firmware/stage/component_match.h"

#include <algorithm>
#include <cctype>
#include <map>

#include <fmt/format.h>

namespace kiln::firmware {

namespace {

char fold(char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
}

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return fold(x) == fold(y); });
}

// The links a member is related to; derived items stand for their owner.
std::vector<std::string> related_of(const BmcInventory& inv, const FirmwareItem& item) {
    if (item.source == "system") return {inv.system_uri};
    if (item.source == "manager") return {inv.manager_uri};
    return item.related;
}

bool related_to(const BmcInventory& inv, const FirmwareItem& item, const std::string& prefix) {
    for (const auto& r : related_of(inv, item))
        if (r.rfind(prefix, 0) == 0 && (r.size() == prefix.size() || r[prefix.size()] == '/' || prefix.back() == '/'))
            return true;
    return false;
}

}  // namespace

bool glob_match(std::string_view pattern, std::string_view text) {
    // Iterative, with one backtrack point per '*': linear in practice, never recursive.
    size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
    while (t < text.size()) {
        if (p < pattern.size() && (pattern[p] == '?' || fold(pattern[p]) == fold(text[t]))) {
            ++p;
            ++t;
        } else if (p < pattern.size() && pattern[p] == '*') {
            star = p++;
            mark = t;
        } else if (star != std::string_view::npos) {
            p = star + 1;
            t = ++mark;
        } else {
            return false;
        }
    }
    while (p < pattern.size() && pattern[p] == '*') ++p;
    return p == pattern.size();
}

std::vector<FirmwareItem> matched_members(const BmcInventory& inv, const ComponentSelector& sel) {
    std::vector<FirmwareItem> out;
    for (const auto& c : inv.components) {
        const bool named = iequals(c.id, sel.name) || iequals(c.name, sel.name);
        const bool fits = !sel.match.empty() && (glob_match(sel.match, c.id) || glob_match(sel.match, c.name));
        if (named || fits) out.push_back(c);
    }
    if (out.empty())
        if (auto alias = find_component(inv, sel.name)) out.push_back(*alias);
    // On a BMC that fronts several systems, members that belong to another
    // system (RelatedItem under /Systems/ but not this one) are not this node's.
    out.erase(std::remove_if(out.begin(), out.end(),
                             [&](const FirmwareItem& c) {
                                 bool other = false, own = false;
                                 for (const auto& r : related_of(inv, c)) {
                                     if (r.find("/Systems/") == std::string::npos) continue;
                                     const bool mine =
                                         r.rfind(inv.system_uri, 0) == 0 &&
                                         (r.size() == inv.system_uri.size() || r[inv.system_uri.size()] == '/');
                                     (mine ? own : other) = true;
                                 }
                                 return other && !own && !inv.system_uri.empty();
                             }),
              out.end());
    if (!sel.related_item.empty())
        out.erase(std::remove_if(out.begin(), out.end(),
                                 [&](const FirmwareItem& c) { return !related_to(inv, c, sel.related_item); }),
                  out.end());
    return out;
}

ComponentState component_state(const BmcInventory& inv, const ComponentSelector& sel, const std::string& version) {
    ComponentState st;
    st.members = matched_members(inv, sel);
    std::map<std::string, size_t> by_version;
    for (const auto& m : st.members) {
        ++by_version[m.version];
        if (!version_matches(m.version, version, inv.vendor)) st.off.push_back(m);
    }
    std::vector<std::pair<std::string, size_t>> counts(by_version.begin(), by_version.end());
    std::stable_sort(counts.begin(), counts.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    for (const auto& [v, n] : counts) {
        if (st.counts.empty())
            st.counts = fmt::format("{} of {} at {}", n, st.members.size(), v.empty() ? "no version" : v);
        else
            st.counts += fmt::format(", {} at {}", n, v.empty() ? "no version" : v);
    }
    return st;
}

}  // namespace kiln::firmware
