// The fleet keys the firmware stage reads: [artifact_server], [host_os.NAME]
// with a node's host_os, and a firmware profile's apply_time.
#include <catch2/catch.hpp>

#include "firmware/stage/firmware_config.h"
#include "firmware/stage/firmware_inputs.h"
#include "provisioner/config/fleet_loader.h"
#include "tests/support/temp_dir.h"

using namespace kiln;

namespace {

config::LoadResult load(const std::string& extra) {
    static kiln::test::TempDir dir;
    dir.write("pipelines/fw.toml", "schema = 1\nname = \"fw\"\nstages = [\"firmware\"]\n");
    std::string path = dir.write("fleet.toml", "schema = 1\n[fleet]\nname = \"x\"\n" + extra +
                                                   "[[racks]]\nname = \"r\"\n[[nodes]]\nname = \"n\"\nrack = \"r\"\n"
                                                   "role = \"fw\"\nbmc = { url = \"http://127.0.0.1:1\" }\n");
    config::LoadOptions opts;
    opts.known_stages = {"firmware"};
    opts.tables = firmware::firmware_tables();
    return config::load_fleet(path, opts);
}

}  // namespace

TEST_CASE("artifact_server listen and advertise are read") {
    auto r = load("[artifact_server]\nlisten = \"0.0.0.0:8088\"\nadvertise = \"http://10.0.0.5:8088\"\n");
    REQUIRE(r.fleet);
    CHECK(firmware::artifact_server_table(*r.fleet)->listen == "0.0.0.0:8088");
    CHECK(firmware::artifact_server_table(*r.fleet)->advertise == "http://10.0.0.5:8088");
    CHECK(firmware::artifact_server_table(*r.fleet)->pos.line == 4);

    auto d = load("");
    REQUIRE(d.fleet);
    // Absent: the stage serves on its default (FirmwareStageOptions).
    CHECK(firmware::artifact_server_table(*d.fleet) == nullptr);
}

TEST_CASE("a bad artifact_server address is refused at FILE LINE COL with its key") {
    auto r = load("[artifact_server]\nlisten = \"bmc-net:80\"\nadvertise = \"ftp//x\"\nport = 1\n");
    REQUIRE_FALSE(r.fleet);
    std::string all;
    for (const auto& e : r.errors) all += e.str() + "\n";
    INFO(all);
    CHECK(all.find("fleet.toml:5:10: artifact_server.listen: expected an IPv4 HOST:PORT") != std::string::npos);
    CHECK(all.find("artifact_server.advertise") != std::string::npos);
    CHECK(all.find("artifact_server.port") != std::string::npos);
}

// ---- [host_os.NAME], a node's host_os, a firmware profile's apply_time ----

namespace {

// A fleet with [defaults] host_os and two nodes, one overriding it.
config::LoadResult load_host_os(const std::string& tables, const std::string& defaults = "host_os = \"a\"\n",
                                const std::string& node1 = "host_os = \"b\"\n", bool firmware_module = true) {
    static kiln::test::TempDir dir;
    dir.write("pipelines/fw.toml", "schema = 1\nname = \"fw\"\nstages = [\"firmware\"]\n");
    std::string path = dir.write("fleet.toml", "schema = 1\n[fleet]\nname = \"x\"\n" + tables +
                                                   "[[racks]]\nname = \"r\"\n[defaults]\nrole = \"fw\"\n" + defaults +
                                                   "bmc = { url = \"http://127.0.0.1:1\" }\n"
                                                   "[[nodes]]\nname = \"n0\"\nrack = \"r\"\n"
                                                   "[[nodes]]\nname = \"n1\"\nrack = \"r\"\n" +
                                                   node1);
    config::LoadOptions opts;
    opts.known_stages = {"firmware"};
    if (firmware_module) opts.tables = firmware::firmware_tables();
    return config::load_fleet(path, opts);
}

std::string all_errors(const config::LoadResult& r) {
    std::string all;
    for (const auto& e : r.errors) all += e.str() + "\n";
    return all;
}

const std::string kSha(64, 'A');

}  // namespace

TEST_CASE("host_os images are read and nodes take them from defaults or their own key") {
    auto r = load_host_os("[host_os.a]\nimage = \"iso/debian.iso\"\nsha256 = \"" + kSha +
                          "\"\n[host_os.b]\nimage = \"/srv/other.iso\"\nsha256 = \"" + std::string(64, 'b') + "\"\n");
    INFO(all_errors(r));
    REQUIRE(r.fleet);
    const auto& a = firmware::host_os_images(*r.fleet)->at("a");
    CHECK(a.image == r.fleet->dir + "/iso/debian.iso");  // relative to the fleet file's folder
    CHECK(a.sha256 == std::string(64, 'a'));             // kept lowercase
    CHECK(a.pos.line == 4);
    CHECK(firmware::host_os_images(*r.fleet)->at("b").image == "/srv/other.iso");
    CHECK(r.fleet->nodes[0].profile("host_os") == "a");
    CHECK(r.fleet->nodes[1].profile("host_os") == "b");
    // Part of the firmware stage's inputs only where set.
    auto with = kiln::firmware::firmware_inputs(*r.fleet, r.fleet->nodes[0]);
    CHECK(with["host_os"]["sha256"] == std::string(64, 'a'));
    auto none = load_host_os("", "", "");
    REQUIRE(none.fleet);
    CHECK(kiln::firmware::firmware_inputs(*none.fleet, none.fleet->nodes[0]).contains("host_os") == false);
}

TEST_CASE("bad host_os tables and references are refused at FILE LINE COL with their key") {
    auto r =
        load_host_os("[host_os.a]\nimage = \"\"\nsha256 = \"abc\"\nurl = \"http://x/y.iso\"\n[host_os.b]\nsha256 = \"" +
                         kSha + "\"\n",
                     "host_os = \"missing\"\n", "host_os = 3\n");
    REQUIRE_FALSE(r.fleet);
    std::string all = all_errors(r);
    INFO(all);
    CHECK(all.find("fleet.toml:5:9: host_os.a.image: expected a non-empty string") != std::string::npos);
    CHECK(all.find("fleet.toml:6:10: host_os.a.sha256: expected 64 hex digits, found 3 characters") !=
          std::string::npos);
    CHECK(all.find("host_os.a.url") != std::string::npos);  // unknown key
    CHECK(all.find("fleet.toml:8:1: host_os.b.image: required key is missing") != std::string::npos);
    CHECK(all.find("defaults.host_os: no host_os profile 'missing'; defined: a, b") != std::string::npos);
    CHECK(all.find("nodes[1].host_os: expected string") != std::string::npos);
}

TEST_CASE("a firmware profile's apply_time is Immediate unless it says OnReset") {
    const std::string comp =
        "[[firmware.p.components]]\nname = \"BIOS\"\nversion = \"2\"\nartifact = \"a.bin\"\n"
        "sha256 = \"" +
        kSha + "\"\n";
    auto d = load_host_os("[firmware.p]\n" + comp, "firmware = \"p\"\n", "");
    INFO(all_errors(d));
    REQUIRE(d.fleet);
    CHECK(firmware::firmware_profiles(*d.fleet)->at("p").apply_time == "Immediate");
    CHECK(kiln::firmware::firmware_inputs(*d.fleet, d.fleet->nodes[0]).contains("apply_time") == false);

    auto o = load_host_os("[firmware.p]\napply_time = \"OnReset\"\n" + comp, "firmware = \"p\"\n", "");
    REQUIRE(o.fleet);
    CHECK(firmware::firmware_profiles(*o.fleet)->at("p").apply_time == "OnReset");
    CHECK(kiln::firmware::firmware_inputs(*o.fleet, o.fleet->nodes[0])["apply_time"] == "OnReset");

    auto bad = load_host_os("[firmware.p]\napply_time = \"Later\"\n" + comp, "", "");
    REQUIRE_FALSE(bad.fleet);
    CHECK(all_errors(bad).find("fleet.toml:5:14: firmware.p.apply_time: expected one of Immediate, OnReset, found "
                               "\"Later\"") != std::string::npos);
}

TEST_CASE("the firmware stage's tables and node keys are its module's: a build without it refuses them") {
    const std::string tables =
        "[firmware.p]\n[[firmware.p.components]]\nname = \"BIOS\"\nversion = \"2\"\n"
        "artifact = \"a.bin\"\nsha256 = \"" +
        kSha + "\"\n[bios.b]\nsriov = true\n[artifact_server]\nlisten = \"127.0.0.1:0\"\n";
    const std::string refs = "firmware = \"p\"\nbios = \"b\"\n";
    auto with = load_host_os(tables, refs, "bios = \"b\"\n");
    INFO(all_errors(with));
    REQUIRE(with.fleet);
    CHECK(with.fleet->nodes[0].profile("firmware") == "p");  // from [defaults]
    CHECK(with.fleet->nodes[1].profile("bios") == "b");      // its own key over the default's
    CHECK(firmware::bios_profile(*with.fleet, with.fleet->nodes[1])->sriov == true);
    CHECK(firmware::firmware_profile(*with.fleet, with.fleet->nodes[1])->components.at(0).version == "2");

    auto without = load_host_os(tables, refs, "bios = \"b\"\n", false);
    REQUIRE_FALSE(without.fleet);
    const std::string all = all_errors(without);
    INFO(all);
    for (const char* key : {"firmware", "bios", "artifact_server"})
        CHECK(all.find(std::string(": ") + key + ": unknown key '" + key + "'") != std::string::npos);
    CHECK(all.find("defaults.firmware: unknown key 'firmware'") != std::string::npos);
    CHECK(all.find("defaults.bios: unknown key 'bios'") != std::string::npos);
    CHECK(all.find("nodes[1].bios: unknown key 'bios'") != std::string::npos);
}
