// kiln's SONiC render merged onto the CONFIG_DB SONiC's own templates give a
// fresh switch of a real SKU (rendered with Jinja2 by
// render_sonic_templates.py, a ctest fixture, from the templates under
// tests/fixtures/network/sonic-templates/), through SonicDriver as it runs
// against a switch: read_state()'s shape, project_running, render_for, check
// (SONiC's YANG models on the merged config) and patch_for.
//
// What the switch's software does beside the templates is played here from
// its sources (sonic-utilities pfcwd/main.py start_default, sonic-swss
// cfgmgr/buffermgr.cpp doSpeedUpdateTask), each noted where it is done.
//
// When the fixture could not run for want of jinja2 these tests exit with 77,
// which ctest reports as skipped (Catch2 2 has no skip of its own).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "network/sonic/config_db.h"
#include "network/sonic/json_patch.h"
#include "network/sonic/managed_scope.h"
#include "network/sonic/sonic_driver.h"
#include "tests/network/network_test_util.h"

using nlohmann::json;
using namespace kiln;
using namespace kiln::network;
using namespace kiln::network::sonic;
namespace tn = kiln::test::network;

namespace {

constexpr int kSkipped = 77;  // SKIP_RETURN_CODE of these tests

struct Sku {
    std::string platform, hwsku;
    bool dynamic = false;  // SONiC's dynamic buffer model (buffers_dynamic.json.j2)
    std::string dir() const { return platform + "/" + hwsku; }
};

const Sku kSn5600{"x86_64-nvidia_sn5600-r0", "Mellanox-SN5600-O128"};       // Spectrum-4
const Sku kZ9332f{"x86_64-dellemc_z9332f_d1508-r0", "DellEMC-Z9332f-O32"};  // Tomahawk 3
const Sku kSn5600Dynamic{"x86_64-nvidia_sn5600-r0", "Mellanox-SN5600-O128", true};

// The stock CONFIG_DB the fixture rendered for `sku`.
json stock_config(const Sku& sku) {
    const std::filesystem::path dir = KILN_SONIC_STOCK_DIR;
    const auto path = dir / (sku.hwsku + (sku.dynamic ? "-dynamic" : "") + ".json");
    if (!std::filesystem::exists(path)) {
        if (std::filesystem::exists(dir / "SKIPPED")) {
            std::printf("SKIPPED: %s", tn::read_file((dir / "SKIPPED").string()).c_str());
            std::fflush(stdout);
            std::exit(kSkipped);
        }
        FAIL("no " << path << ": the kiln_sonic_stock_configs fixture did not render it");
    }
    json db = json::parse(tn::read_file(path.string()), nullptr, false);
    REQUIRE(db.is_object());
    return db;
}

std::string pg_lookup_text(const Sku& sku) {
    return tn::read_file(std::string(KILN_NETWORK_FIXTURES) + "/sonic-device/" + sku.dir() + "/pg_profile_lookup.ini");
}

// The SKU's pg_profile_lookup.ini read here on its own (not with kiln's
// parser, which is under test): (speed, cable) -> the row's fields.
struct VendorRow {
    int cable_m = 0;
    std::map<std::string, std::string> fields;  // size, xon, xoff, threshold, xon_offset
};
std::map<int, std::vector<VendorRow>> vendor_rows(const std::string& text) {
    std::map<int, std::vector<VendorRow>> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
        std::istringstream words(line);
        std::vector<std::string> w;
        for (std::string s; words >> s;) w.push_back(s);
        if (w.size() < 6) continue;
        VendorRow r;
        r.cable_m = std::stoi(w[1]);  // "40m" -> 40
        r.fields = {{"size", w[2]}, {"xon", w[3]}, {"xoff", w[4]}, {"threshold", w[5]}};
        if (w.size() > 6) r.fields["xon_offset"] = w[6];
        out[std::stoi(w[0])].push_back(std::move(r));
    }
    for (auto& [speed, rows] : out)
        std::sort(rows.begin(), rows.end(),
                  [](const VendorRow& a, const VendorRow& b) { return a.cable_m < b.cable_m; });
    return out;
}

// The row for a cable: the exact length, else the next longer one.
const VendorRow* vendor_row(const std::map<int, std::vector<VendorRow>>& rows, int speed, int cable_m) {
    auto s = rows.find(speed);
    if (s == rows.end()) return nullptr;
    for (const auto& r : s->second)
        if (r.cable_m >= cable_m) return &r;
    return nullptr;
}

// db[table][key] without creating it; null when absent.
json entry(const json& db, const std::string& table, const std::string& key) {
    auto t = db.find(table);
    if (t == db.end()) return nullptr;
    auto k = t->find(key);
    return k == t->end() ? json(nullptr) : *k;
}

std::string str_field(const json& db, const std::string& table, const std::string& key, const std::string& field) {
    const json* e = nullptr;
    if (auto t = db.find(table); t != db.end())
        if (auto k = t->find(key); k != t->end()) e = &*k;
    if (!e) return "<absent>";
    auto f = e->find(field);
    return f != e->end() && f->is_string() ? f->get<std::string>() : "<absent>";
}

// What the switch's own software adds to the templates' output once it runs.
// - sonic-swss buffermgrd (traditional model, doSpeedUpdateTask): for every
//   port with a CABLE_LENGTH and pfc_enable, BUFFER_PROFILE
//   pg_lossless_<speed>_<cable>_profile from the SKU's table and
//   BUFFER_PG|<port>|<pfc_enable as a range> on it ("3,4" -> "3-4").
// - sonic-utilities `pfcwd start_default`: PFC_WD on every port with a
//   neighbour (here: all) at 200 ms times the port count's multiple of 32,
//   and PFC_WD|GLOBAL POLL_INTERVAL the same, capped at 1000 ms; `poll_ms`
//   > 0 sets the poll instead (the cases the issue names).
// In the dynamic model buffermgrd computes the headroom of "NULL" PGs
// itself (from cable length, speed and MTU, with the vendor's plugin) and
// writes it to APPL_DB, not CONFIG_DB: nothing of it is played here.
void run_switch_daemons(json& db, const std::string& lookup_text, int poll_ms = 0) {
    const auto rows = vendor_rows(lookup_text);
    const std::string pool_mode = str_field(db, "BUFFER_POOL", "ingress_lossless_pool", "mode");
    const json& cables = db["CABLE_LENGTH"]["AZURE"];
    const bool traditional = str_field(db, "DEVICE_METADATA", "localhost", "buffer_model") != "dynamic";
    for (auto p = db["PORT"].begin(); traditional && p != db["PORT"].end(); ++p) {
        const std::string pfc = str_field(db, "PORT_QOS_MAP", p.key(), "pfc_enable");
        if (pfc != "3,4" || !cables.contains(p.key())) continue;
        const std::string cable = cables[p.key()].get<std::string>();
        const std::string speed = (*p)["speed"].get<std::string>();
        const VendorRow* r = vendor_row(rows, std::stoi(speed), std::stoi(cable));
        if (!r || fmt::format("{}m", r->cable_m) != cable) continue;  // buffermgrd wants the exact row
        const std::string name = "pg_lossless_" + speed + "_" + cable + "_profile";
        json prof = {{"pool", "ingress_lossless_pool"},
                     {"xon", r->fields.at("xon")},
                     {"xoff", r->fields.at("xoff")},
                     {"size", r->fields.at("size")},
                     {pool_mode + "_th", r->fields.at("threshold")}};
        if (r->fields.count("xon_offset")) prof["xon_offset"] = r->fields.at("xon_offset");
        db["BUFFER_PROFILE"][name] = prof;
        db["BUFFER_PG"][p.key() + "|3-4"] = {{"profile", name}};
    }
    const int ports = static_cast<int>(db["PORT"].size());
    const int multiply = std::max(1, (ports - 1) / 32 + 1);
    const int poll = poll_ms > 0 ? poll_ms : std::min(200 * multiply, 1000);
    // A switch whose poll was set by hand keeps its ports' times valid.
    const std::string times = std::to_string(std::max(200 * multiply, poll));
    for (auto p = db["PORT"].begin(); p != db["PORT"].end(); ++p)
        db["PFC_WD"][p.key()] = {{"action", "drop"},
                                 {"detection_time", times},
                                 {"restoration_time", times},
                                 {"pfc_stat_history", "disable"}};
    db["PFC_WD"]["GLOBAL"] = {{"POLL_INTERVAL", std::to_string(poll)}};
}

// kiln's ports on the switch: the SKU's own names, lanes, speed and alias,
// cabled to nodes with the lengths given.
std::vector<Port> sku_ports(const json& db, const std::vector<std::pair<std::string, int>>& cables) {
    std::vector<Port> out;
    int n = 0;
    for (const auto& [name, metres] : cables) {
        const json& e = db.at("PORT").at(name);
        Port p;
        p.name = name;
        p.speed_mbps = std::stoi(e.at("speed").get<std::string>());
        p.lanes = e.at("lanes").get<std::string>();
        p.alias = e.value("alias", "");
        p.cable_length_m = metres;
        p.peer = Cable{fmt::format("n{}", ++n), "mlx5_0"};
        out.push_back(std::move(p));
    }
    return out;
}

// A switch as SonicDriver::read_state() returns it: the whole CONFIG_DB and
// the SKU's headroom table under "_kiln".
json switch_state(const Sku& sku, const json& config_db) {
    json state = config_db;
    const std::string path = pg_lookup_path(sku.platform, sku.hwsku);
    state[kFactsKey] = {{"pg_lookup", pg_lookup_text(sku)}, {"pg_lookup_path", path}};
    return state;
}

struct Merge {
    json running, desired, patch, merged;
    Status checked = ok_status();
};

Merge merge(const SonicDriver& driver, const Sku& sku, const json& config_db, const std::vector<Port>& ports,
            const network::RoceProfile& profile) {
    Merge m;
    m.running = driver.project_running(switch_state(sku, config_db), ports);
    auto desired = driver.render_for(profile, ports, m.running);
    REQUIRE(desired.ok());
    m.desired = *desired;
    m.checked = driver.check(m.desired, m.running);
    m.patch = driver.patch_for(m.desired, m.running);
    auto merged = json_patch_apply(config_db, m.patch);
    REQUIRE(merged.ok());
    m.merged = *merged;
    return m;
}

SonicDriver make_driver() {
    return SonicDriver("leaf1", nullptr);  // no runner: nothing here reaches the switch
}

// The entries of a ranged table on `port` whose range covers `index`.
std::vector<std::string> covering(const json& db, const std::string& table, const std::string& port, int index) {
    std::vector<std::string> out;
    if (!db.contains(table)) return out;
    for (auto e = db[table].begin(); e != db[table].end(); ++e) {
        const auto parts = split_key(e.key());
        if (parts.size() != 2 || parts[0] != port) continue;
        const auto [lo, hi] = parse_index_range(parts[1]);
        if (lo <= index && index <= hi) out.push_back(e.key());
    }
    return out;
}

bool within_1pct(const std::string& got, const std::string& want) {
    const double g = std::stod(got), w = std::stod(want);
    return std::fabs(g - w) <= 0.01 * std::fabs(w);
}

// (b) and (c) for every port kiln configured, against the merged CONFIG_DB.
void check_lossless(const Sku& sku, const json& stock, const json& merged, const std::vector<Port>& ports) {
    const auto rows = vendor_rows(pg_lookup_text(sku));
    for (const auto& port : ports) {
        const std::string& n = port.name;
        INFO(sku.hwsku << " " << n << " " << port.cable_length_m << " m");
        const auto pgs = covering(merged, "BUFFER_PG", n, 3);
        REQUIRE(pgs.size() == 1);  // no stock "3-4" left overlapping kiln's "3"
        CHECK(pgs[0] == n + "|3");
        const std::string profile = str_field(merged, "BUFFER_PG", pgs[0], "profile");
        if (sku.dynamic) {
            // (b) dynamic: the switch sizes the headroom; kiln gives it the
            // true cable length and leaves the PG's profile "NULL".
            CHECK(profile == "NULL");
            CHECK(str_field(merged, "CABLE_LENGTH", "AZURE", n) == fmt::format("{}m", port.cable_length_m));
        }
    }
    for (const auto& port : ports) {
        if (sku.dynamic) break;
        const std::string& n = port.name;
        INFO(sku.hwsku << " " << n << " " << port.cable_length_m << " m");
        // (b) the lossless PG's headroom is the row buffermgrd would pick.
        const std::string profile = str_field(merged, "BUFFER_PG", n + "|3", "profile");
        const VendorRow* want = vendor_row(rows, port.speed_mbps, port.cable_length_m);
        REQUIRE(want != nullptr);
        const std::string cable = fmt::format("{}m", want->cable_m);
        // buffermgrd keys its row by CABLE_LENGTH, and names the profile after it.
        CHECK(str_field(merged, "CABLE_LENGTH", "AZURE", n) == cable);
        CHECK(profile == fmt::format("pg_lossless_{}_{}_profile", port.speed_mbps, cable));
        for (const char* f : {"xoff", "xon", "size"}) {
            const std::string got = str_field(merged, "BUFFER_PROFILE", profile, f);
            INFO(f << ": kiln " << got << ", " << sku.hwsku << "'s table " << want->fields.at(f));
            REQUIRE(got != "<absent>");
            CHECK(within_1pct(got, want->fields.at(f)));
        }
        CHECK(str_field(merged, "BUFFER_PROFILE", profile, "pool") == "ingress_lossless_pool");
        std::printf("%s %s %dm -> row %s: xoff %s/%s xon %s/%s size %s/%s (kiln/SKU)\n", sku.hwsku.c_str(), n.c_str(),
                    port.cable_length_m, cable.c_str(), str_field(merged, "BUFFER_PROFILE", profile, "xoff").c_str(),
                    want->fields.at("xoff").c_str(), str_field(merged, "BUFFER_PROFILE", profile, "xon").c_str(),
                    want->fields.at("xon").c_str(), str_field(merged, "BUFFER_PROFILE", profile, "size").c_str(),
                    want->fields.at("size").c_str());
    }
    for (const auto& port : ports) {
        const std::string& n = port.name;
        INFO(sku.hwsku << " " << n);
        // (c) lossless end to end: DSCP 26 -> TC 3 -> PG 3 (headroom above) and
        // queue 3; PFC on priority 3, mapped to PG 3 where the SKU maps them.
        const std::string pfc = str_field(merged, "PORT_QOS_MAP", n, "pfc_enable");
        CHECK(pfc == "3");
        const std::string dscp_map = str_field(merged, "PORT_QOS_MAP", n, "dscp_to_tc_map");
        CHECK(str_field(merged, "DSCP_TO_TC_MAP", dscp_map, "26") == "3");
        CHECK(str_field(merged, "TC_TO_PRIORITY_GROUP_MAP", str_field(merged, "PORT_QOS_MAP", n, "tc_to_pg_map"),
                        "3") == "3");
        CHECK(str_field(merged, "TC_TO_QUEUE_MAP", str_field(merged, "PORT_QOS_MAP", n, "tc_to_queue_map"), "3") ==
              "3");
        CHECK(str_field(merged, "MAP_PFC_PRIORITY_TO_QUEUE", str_field(merged, "PORT_QOS_MAP", n, "pfc_to_queue_map"),
                        "3") == "3");
        if (str_field(stock, "PORT_QOS_MAP", n, "pfc_to_pg_map") != "<absent>") {
            const std::string m = str_field(merged, "PORT_QOS_MAP", n, "pfc_to_pg_map");
            CHECK(str_field(merged, "PFC_PRIORITY_TO_PRIORITY_GROUP_MAP", m, "3") == "3");
        }
        const auto queues = covering(merged, "BUFFER_QUEUE", n, 3);
        REQUIRE(queues.size() == 1);
        CHECK(str_field(merged, "BUFFER_QUEUE", queues[0], "profile") ==
              str_field(stock, "BUFFER_QUEUE", n + "|3-4", "profile"));
        // Lossy queues on the profile the SKU's template gives them (Mellanox:
        // q_lossy_profile; egress_lossy_profile is its port-level one).
        for (int q : {0, 1, 2, 4, 5, 6}) {
            const auto lossy = covering(merged, "BUFFER_QUEUE", n, q);
            REQUIRE(lossy.size() == 1);
            CHECK(str_field(merged, "BUFFER_QUEUE", lossy[0], "profile") ==
                  str_field(stock, "BUFFER_QUEUE", n + "|0-2", "profile"));
        }
        CHECK(str_field(merged, "QUEUE", n + "|3", "wred_profile") != "<absent>");
        CHECK(str_field(merged, "PFC_WD", n, "detection_time") != "<absent>");
    }
}

// Ports kiln was not given keep exactly what the templates gave them.
void check_others_untouched(const json& stock, const json& merged, const std::vector<Port>& ports) {
    std::set<std::string> mine;
    for (const auto& p : ports) mine.insert(p.name);
    int seen = 0;
    for (auto p = stock["PORT"].begin(); p != stock["PORT"].end(); ++p) {
        if (mine.count(p.key())) continue;
        ++seen;
        for (const char* t : {"PORT", "PORT_QOS_MAP", "PFC_WD"})
            CHECK(entry(merged, t, p.key()) == entry(stock, t, p.key()));
        CHECK(entry(merged, "BUFFER_PG", p.key() + "|3-4") == entry(stock, "BUFFER_PG", p.key() + "|3-4"));
        CHECK(entry(merged, "BUFFER_QUEUE", p.key() + "|3-4") == entry(stock, "BUFFER_QUEUE", p.key() + "|3-4"));
        CHECK(str_field(merged, "CABLE_LENGTH", "AZURE", p.key()) ==
              str_field(stock, "CABLE_LENGTH", "AZURE", p.key()));
    }
    CHECK(seen > 0);
    CHECK(entry(merged, "DSCP_TO_TC_MAP", "AZURE") == entry(stock, "DSCP_TO_TC_MAP", "AZURE"));
}

// The YANG issues of a whole CONFIG_DB, as SonicDriver::check counts them.
std::vector<std::string> yang_issues(const json& db) {
    static auto validator = YangValidator::load();
    REQUIRE(validator.ok());
    json known = json::object();
    const auto tables = validator->tables();
    for (auto t = db.begin(); t != db.end(); ++t)
        if (std::binary_search(tables.begin(), tables.end(), t.key())) known[t.key()] = *t;
    std::vector<std::string> out;
    for (const auto& i : validator->check(known)) out.push_back(i.str());
    return out;
}

void merge_case(const Sku& sku, const std::vector<std::pair<std::string, int>>& cables) {
    json stock = stock_config(sku);
    run_switch_daemons(stock, pg_lookup_text(sku));
    // SONiC's own config is valid with its own models (or the comparison below means little).
    CHECK(yang_issues(stock) == std::vector<std::string>{});
    const auto ports = sku_ports(stock, cables);
    const SonicDriver driver = make_driver();
    const Merge m = merge(driver, sku, stock, ports, tn::roce_profile());
    INFO((m.checked.ok() ? std::string() : m.checked.error().message));
    // (a) the switch's YANG models take the merged config whole.
    CHECK(m.checked.ok());
    CHECK(yang_issues(m.merged) == std::vector<std::string>{});
    check_lossless(sku, stock, m.merged, ports);
    check_others_untouched(stock, m.merged, ports);
    // Applied, the switch is converged: a second read gives an empty patch.
    const json again = driver.project_running(switch_state(sku, m.merged), ports);
    CHECK(driver.patch_for(m.desired, again) == json::array());
}

}  // namespace

TEST_CASE("sonic template merge: Mellanox SN5600 stock config plus kiln's render is valid and lossless") {
    // 5 m in the rack, 7 m (-> 40m row), 40 m and 100 m (-> 300m row).
    merge_case(kSn5600, {{"Ethernet0", 5},
                         {"Ethernet4", 5},
                         {"Ethernet8", 5},
                         {"Ethernet12", 7},
                         {"Ethernet16", 40},
                         {"Ethernet20", 100},
                         {"Ethernet24", 300}});
}

TEST_CASE("sonic template merge: Dell Z9332f (Tomahawk 3) stock config plus kiln's render is valid and lossless") {
    // The template's default cable is 300m: kiln's short host cables lower it.
    merge_case(kZ9332f, {{"Ethernet0", 5},
                         {"Ethernet8", 5},
                         {"Ethernet16", 5},
                         {"Ethernet24", 40},
                         {"Ethernet32", 300},
                         {"Ethernet40", 200}});
}

TEST_CASE(
    "sonic template merge: Mellanox SN5600 in the dynamic buffer model keeps its headroom computed by the switch") {
    // SONiC's dynamic model (buffers_dynamic.json.j2): lossless PGs "NULL",
    // no fixed ingress pool sizes; kiln writes cable lengths as they are.
    merge_case(kSn5600Dynamic, {{"Ethernet0", 5}, {"Ethernet4", 7}, {"Ethernet8", 40}, {"Ethernet12", 300}});
    json stock = stock_config(kSn5600Dynamic);
    CHECK(str_field(stock, "DEVICE_METADATA", "localhost", "buffer_model") == "dynamic");
    CHECK(str_field(stock, "BUFFER_PG", "Ethernet0|3-4", "profile") == "NULL");
}

TEST_CASE("sonic template merge: kiln's poll interval lets a 200 ms detection onto a big switch") {
    // `pfcwd start_default` on the SKUs' own port counts: the Z9332f-O32 has 34
    // ports (two 10G beside the 32 400G: 400 ms), the SN5600-O128 129 (the
    // 25G port beside the 128: 1000 ms, the cap). Then both polls on both.
    for (const Sku& sku : {kSn5600, kZ9332f}) {
        for (int poll : {0, 400, 1000}) {
            INFO(sku.hwsku << ", the switch's POLL_INTERVAL " << (poll ? std::to_string(poll) : "its own"));
            json stock = stock_config(sku);
            run_switch_daemons(stock, pg_lookup_text(sku), poll);
            if (poll == 0)
                CHECK(str_field(stock, "PFC_WD", "GLOBAL", "POLL_INTERVAL") ==
                      (sku.hwsku == kSn5600.hwsku ? "1000" : "400"));
            const std::string before = str_field(stock, "PFC_WD", "Ethernet16", "detection_time");
            const auto ports = sku_ports(stock, {{"Ethernet0", 5}, {"Ethernet8", 40}});
            const SonicDriver driver = make_driver();
            auto profile = tn::roce_profile();
            REQUIRE(profile.pfc_watchdog_detection_ms == 200);
            REQUIRE(profile.pfc_watchdog_poll_ms == 200);

            const Merge m = merge(driver, sku, stock, ports, profile);
            INFO((m.checked.ok() ? std::string() : m.checked.error().message));
            CHECK(m.checked.ok());
            CHECK(str_field(m.merged, "PFC_WD", "GLOBAL", "POLL_INTERVAL") == "200");
            CHECK(str_field(m.merged, "PFC_WD", "Ethernet0", "detection_time") == "200");
            // Ports kiln was not given keep their times, at or above the new poll.
            CHECK(str_field(m.merged, "PFC_WD", "Ethernet16", "detection_time") == before);
            CHECK(yang_issues(m.merged) == std::vector<std::string>{});

            // Had kiln left the switch's poll alone, SONiC would refuse the change.
            json without_poll = m.desired;
            without_poll["PFC_WD"].erase("GLOBAL");
            const Status refused = driver.check(without_poll, m.running);
            REQUIRE_FALSE(refused.ok());
            CHECK(refused.error().code == "network.yang_invalid");
            CHECK_THAT(refused.error().message,
                       Catch::Contains("PFC_WD|Ethernet0") &&
                           Catch::Contains("detection_time must be greater than or equal to POLL_INTERVAL"));
        }
    }
}
