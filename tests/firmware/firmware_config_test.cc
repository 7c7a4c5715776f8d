// The [artifact_server] fleet keys the firmware stage reads.
#include <catch2/catch.hpp>

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
    return config::load_fleet(path, opts);
}

}  // namespace

TEST_CASE("artifact_server listen and advertise are read") {
    auto r = load("[artifact_server]\nlisten = \"0.0.0.0:8088\"\nadvertise = \"http://10.0.0.5:8088\"\n");
    REQUIRE(r.fleet);
    CHECK(r.fleet->artifact_server.listen == "0.0.0.0:8088");
    CHECK(r.fleet->artifact_server.advertise == "http://10.0.0.5:8088");
    CHECK(r.fleet->artifact_server.pos.line == 4);

    auto d = load("");
    REQUIRE(d.fleet);
    CHECK(d.fleet->artifact_server.listen == "127.0.0.1:0");
    CHECK(d.fleet->artifact_server.pos.line == 0);
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
