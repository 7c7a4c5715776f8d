#include "network/sonic/pg_lookup.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

namespace kiln::network::sonic {

namespace {

bool all_digits(const std::string& s, bool allow_minus = false) {
    if (s.empty()) return false;
    size_t i = (allow_minus && s[0] == '-') ? 1 : 0;
    if (i == s.size()) return false;
    return std::all_of(s.begin() + static_cast<long>(i), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

Result<PgLookup> parse_pg_lookup(const std::string& text, const std::string& source) {
    PgLookup out;
    std::istringstream in(text);
    std::string line;
    int lineno = 0;
    while (std::getline(in, line)) {
        ++lineno;
        if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
        std::istringstream fields(line);
        std::vector<std::string> f;
        for (std::string w; fields >> w;) f.push_back(w);
        if (f.empty()) continue;
        auto bad = [&](const std::string& why) {
            return make_error("network", "network.bad_pg_lookup", fmt::format("{}:{}: {}", source, lineno, why));
        };
        if (f.size() != 6 && f.size() != 7)
            return bad(
                fmt::format("expected 'speed cable size xon xoff threshold [xon_offset]', got {} fields", f.size()));
        if (!all_digits(f[0])) return bad("speed '" + f[0] + "' is not a number");
        if (f[1].size() < 2 || f[1].back() != 'm' || !all_digits(f[1].substr(0, f[1].size() - 1)))
            return bad("cable length '" + f[1] + "' is not like 5m");
        for (size_t i = 2; i < f.size(); ++i)
            if (!all_digits(f[i], i == 5)) return bad("'" + f[i] + "' is not a number");
        PgLookupRow r;
        r.speed_mbps = std::stoi(f[0]);
        r.cable_m = std::stoi(f[1].substr(0, f[1].size() - 1));
        r.size = f[2];
        r.xon = f[3];
        r.xoff = f[4];
        r.threshold = f[5];
        if (f.size() == 7) r.xon_offset = f[6];
        out.rows.push_back(std::move(r));
    }
    if (out.rows.empty()) return make_error("network", "network.bad_pg_lookup", fmt::format("{}: no rows", source));
    return out;
}

Result<PgLookupRow> PgLookup::row_for(int speed_mbps, int cable_m) const {
    const PgLookupRow* best = nullptr;
    std::vector<int> lengths;
    for (const auto& r : rows) {
        if (r.speed_mbps != speed_mbps) continue;
        lengths.push_back(r.cable_m);
        if (r.cable_m >= cable_m && (best == nullptr || r.cable_m < best->cable_m)) best = &r;
    }
    if (best != nullptr) return *best;
    if (lengths.empty()) {
        std::vector<int> speeds;
        for (const auto& r : rows)
            if (std::find(speeds.begin(), speeds.end(), r.speed_mbps) == speeds.end()) speeds.push_back(r.speed_mbps);
        std::string have;
        for (int s : speeds) have += (have.empty() ? "" : ", ") + std::to_string(s);
        return make_error(
            "network", "network.no_headroom_row",
            fmt::format("the SKU's pg_profile_lookup.ini has no row for speed {} (speeds: {})", speed_mbps, have));
    }
    std::sort(lengths.begin(), lengths.end());
    std::string have;
    for (int l : lengths) have += (have.empty() ? "" : ", ") + std::to_string(l) + "m";
    return make_error("network", "network.no_headroom_row",
                      fmt::format("a {} m cable is longer than any the SKU's pg_profile_lookup.ini sizes for speed {} "
                                  "({}): the switch would give the port no lossless headroom",
                                  cable_m, speed_mbps, have));
}

}  // namespace kiln::network::sonic
