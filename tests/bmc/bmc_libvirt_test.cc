// kiln-bmc's libvirt backend against the real libvirt daemon: a tiny TCG
// domain with no disk (it sits in its firmware) is started, reset and
// powered off through Redfish ComputerSystem.Reset, and PowerState is read
// from the domain. Needs libvirtd (scripts/services.sh starts it); labelled
// heavy since it boots a VM.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <fstream>

#include "tests/bmc/bmc_test_util.h"

using namespace kiln::bmc;
using kiln::bmc::test::BmcChild;
using kiln::bmc::test::ScratchDir;
using nlohmann::json;

namespace {

const char* kUri = "qemu:///system";

std::string virsh(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"virsh", "-c", kUri};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = test::run_program(argv);
    INFO("virsh " << args.at(0) << ": " << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    std::string out = r.out;
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
}

// Defines the domain now and undefines it (destroying it first) at the end.
struct TinyDomain {
    std::string name = "kiln-bmc-test-" + std::to_string(getpid());
    explicit TinyDomain(const ScratchDir& dir) {
        const std::string xml = dir.file("domain.xml");
        std::ofstream(xml) << "<domain type='qemu'><name>" << name
                           << "</name><memory unit='MiB'>64</memory><vcpu>1</vcpu>"
                              "<os><type arch='x86_64' machine='pc'>hvm</type><boot dev='network'/></os>"
                              "<devices><graphics type='vnc' autoport='yes' listen='127.0.0.1'/></devices>"
                              "</domain>";
        virsh({"define", xml});
    }
    ~TinyDomain() {
        test::run_program({"virsh", "-c", kUri, "destroy", name});
        test::run_program({"virsh", "-c", kUri, "undefine", name});
    }
};

}  // namespace

TEST_CASE("kiln-bmc libvirt backend powers a real domain through ComputerSystem.Reset") {
    ScratchDir dir;
    TinyDomain dom(dir);
    BmcChild child;
    const std::map<std::string, std::string> env = {{"KILN_BMC_PASSWORD", test::kPassword}};
    if (!child.start({"--mockup", test::mockup_path("dmtf-public-rackmount1"), "--port", "0", "--libvirt-domain",
                      dom.name, "--libvirt-uri", kUri},
                     env)) {
        FAIL("kiln-bmc did not come up: " << child.output() << child.errors());
    }
    CHECK(child.output().find("power libvirt qemu:///system domain " + dom.name) != std::string::npos);
    const json basic = {{"Authorization", test::basic_auth("admin", test::kPassword)}};
    const std::string system = "/redfish/v1/Systems/437XR1138R2";
    auto get_power = [&] {
        auto r = test::probe(child.url(), json::array({{{"method", "GET"}, {"path", system}, {"headers", basic}}}));
        return r[0]["body"]["PowerState"].get<std::string>();
    };
    auto reset = [&](const std::string& type) {
        auto r = test::probe(child.url(), json::array({{{"method", "POST"},
                                                        {"path", system + "/Actions/ComputerSystem.Reset"},
                                                        {"headers", basic},
                                                        {"body", {{"ResetType", type}}}}}));
        return r[0]["status"].get<int>();
    };
    CHECK(get_power() == "Off");
    CHECK(virsh({"domstate", dom.name}) == "shut off");

    REQUIRE(reset("On") == 204);
    CHECK(virsh({"domstate", dom.name}) == "running");
    CHECK(get_power() == "On");

    CHECK(reset("ForceRestart") == 204);
    CHECK(virsh({"domstate", dom.name}) == "running");

    CHECK(reset("ForceOff") == 204);
    CHECK(virsh({"domstate", dom.name}) == "shut off");
    CHECK(get_power() == "Off");
    CHECK(child.stop() == 0);

    // A domain libvirt does not know is refused at start, by name.
    auto missing = test::run_program({KILN_BMC_BINARY, "--mockup", test::mockup_path("hpe-dl325"), "--port", "0",
                                      "--libvirt-domain", "kiln-bmc-no-such-domain"},
                                     env);
    CHECK(missing.exit_code == 1);
    CHECK(missing.err.find("kiln-bmc-no-such-domain") != std::string::npos);
}
