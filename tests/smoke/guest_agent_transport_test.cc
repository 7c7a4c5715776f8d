// GuestAgentTransport against libvirt's own test driver (test:///default,
// in process, no daemon): the domains it finds for a node, the addresses it
// gives ranks, and how a missing guest agent comes back.
#include <catch2/catch.hpp>

#include <libvirt/libvirt.h>

#include <nlohmann/json.hpp>

#include "pipelines/smoke/stage/guest_agent_transport.h"

using kiln::smoke::GuestAgentOptions;
using kiln::smoke::GuestAgentTransport;

namespace {
void define(virConnectPtr conn, const std::string& name) {
    const std::string xml =
        "<domain type='test'><name>" + name + "</name><memory>1024</memory><os><type>hvm</type></os></domain>";
    virDomainPtr d = virDomainDefineXML(conn, xml.c_str());
    REQUIRE(d);
    virDomainCreate(d);
    virDomainFree(d);
}
}  // namespace

TEST_CASE("the guest agent transport finds a node's VMs in index order and no one else's") {
    // test:///default is shared by every connection of this process.
    virConnectPtr conn = virConnectOpen("test:///default");
    REQUIRE(conn);
    for (const char* n : {"kiln-gpu1-vm1", "kiln-gpu1-vm0", "kiln-gpu10-vm0", "kiln-gpu1-vmx", "kiln-gpu1-vm01"})
        define(conn, n);
    GuestAgentOptions o;
    o.uri = "qemu:///nowhere";  // the node's own URI must win
    GuestAgentTransport t(o);
    kiln::config::Node gpu1, gpu2;
    gpu1.name = "gpu1";
    gpu2.name = "gpu2";
    gpu1.libvirt_uri = gpu2.libvirt_uri = "test:///default";
    auto vms = t.list_vms(gpu1);
    REQUIRE(vms.ok());
    CHECK(*vms == std::vector<std::string>{"kiln-gpu1-vm0", "kiln-gpu1-vm1"});
    auto none = t.list_vms(gpu2);
    REQUIRE(none.ok());
    CHECK(none->empty());

    // Ranks dial the host's forwards and listen on the guest port.
    auto a = t.address(3);
    CHECK(a.dial_host == "10.0.2.2");
    CHECK(a.dial_port == 29603);
    CHECK(a.listen_addr == "0.0.0.0");
    CHECK(a.listen_port == 29500);

    // The test driver has no guest agent: starting fails with the reason.
    auto r = t.run(gpu1, {{"kiln-gpu1-vm0", {"--rank", "0"}}}, std::chrono::seconds(5));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == "smoke.start");
    CHECK(r.error().message.find("kiln-gpu1-vm0: guest-exec") != std::string::npos);
    auto missing = t.run(gpu1, {{"kiln-nope-vm0", {}}}, std::chrono::seconds(5));
    REQUIRE_FALSE(missing.ok());
    CHECK(missing.error().code == "smoke.vm");
    virConnectClose(conn);
}

TEST_CASE("guest-exec runs kiln-smoke by path with its arguments and captures the output") {
    auto j = nlohmann::json::parse(kiln::smoke::guest_exec_command("/usr/local/bin/kiln-smoke", {"--rank", "1"}));
    CHECK(j["execute"] == "guest-exec");
    CHECK(j["arguments"]["path"] == "/usr/local/bin/kiln-smoke");
    CHECK(j["arguments"]["arg"] == nlohmann::json::array({"--rank", "1"}));
    CHECK(j["arguments"]["capture-output"] == true);
}
