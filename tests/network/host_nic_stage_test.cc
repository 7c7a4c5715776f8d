// The network stage's host side against real interfaces: a node whose fleet
// `host` is a network namespace this test creates, with a veth as its NIC.
// The stage plans the MTU, apply sets 9000, verify passes, a re-run plans
// nothing; what a veth lacks (DCB, RoCE ECN) is reported as unsupported in
// the observation, the plan output and the journal, not skipped. Needs root
// (network namespaces), as CI runs; without it each test says so and passes.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "network/stage/network_config.h"
#include "network/stage/network_stage.h"
#include "provisioner/config/fleet_loader.h"
#include "provisioner/engine/cancel.h"
#include "provisioner/journal/sqlite_store.h"
#include "tests/network/veth_netns.h"
#include "tests/support/child.h"
#include "tests/support/skip.h"
#include "tests/support/temp_dir.h"

using namespace kiln;
using nlohmann::json;

namespace {

bool have_root() {
    if (::geteuid() == 0) return true;
    kiln::test::report_skipped("creating network namespaces needs root");
    return false;
}

// One node n1 in rack r1, no switches: only the host side has work.
struct HostFleet {
    test::TempDir dir;
    std::string path;
    config::LoadResult loaded;

    HostFleet(const std::string& host, const std::string& nics) {
        dir.write("pipelines/net.toml", "schema = 1\nname = \"net\"\nstages = [\"network\"]\n");
        path = dir.write("fleet.toml",
                         "schema = 1\n[fleet]\nname = \"hostnic\"\npipelines = \"pipelines\"\n"
                         "[[racks]]\nname = \"r1\"\n[network.roce]\n"
                         "[defaults]\nrole = \"net\"\nnetwork = \"roce\"\n"
                         "[[nodes]]\nname = \"n1\"\nrack = \"r1\"\nhost = " +
                             host + "\nnics = " + nics + "\n");
        config::LoadOptions o;
        o.known_stages = {"firmware", "network", "image", "vm", "smoke", "handover"};
        o.tables = {network::network_table()};
        loaded = config::load_fleet(path, o);
        std::string errors;
        for (const auto& d : loaded.errors) errors += d.str() + "\n";
        INFO(errors);
        REQUIRE(loaded.fleet);
    }
    const config::Fleet& f() const { return *loaded.fleet; }
};

struct Ctx {
    engine::StopToken stop;
    engine::StageContext ctx;
    explicit Ctx(const config::Fleet& f)
        : ctx(f, f.nodes[0], "network", stop, engine::StageContext::Clock::now() + std::chrono::minutes(2), nullptr,
              nullptr) {}
};

const json* item(const json& obs, const std::string& setting) {
    for (const auto& n : obs["host_nics"]["nics"])
        for (const auto& i : n["items"])
            if (i["setting"] == setting) return &i;
    return nullptr;
}

test::ChildResult kiln_cli(const std::vector<std::string>& args) {
    std::vector<std::string> argv{KILN_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    return test::run_child(argv);
}

}  // namespace

TEST_CASE("network stage host NICs: a netns veth is planned, set to MTU 9000, verified, then nothing to do") {
    if (!have_root()) return;
    ::kiln::test::VethNetns h{"kiln-hs-"};
    HostFleet fleet("{ netns = \"" + h.ns + "\" }", "[{ name = \"mlx5_0\", ifname = \"rdma0\" }]");
    network::NetworkStage stage;
    Ctx c(fleet.f());

    auto obs = stage.observe(c.ctx);
    INFO((obs ? obs->state.dump(2) : obs.error().str()));
    REQUIRE(obs);
    CHECK(obs->state["host_nics"]["managed"] == true);
    CHECK(obs->state["host_nics"]["host"] == "netns " + h.ns);
    REQUIRE(item(obs->state, "mtu"));
    CHECK((*item(obs->state, "mtu"))["outcome"] == "drift");
    CHECK((*item(obs->state, "mtu"))["observed"] == "1500");
    CHECK(h.mtu("rdma0") == 1500);  // observe changes nothing

    auto plan = stage.plan(c.ctx, *obs);
    REQUIRE(plan);
    REQUIRE(plan->size() == 1);
    CHECK((*plan)[0].id == "host-nics:n1");
    CHECK_THAT((*plan)[0].description, Catch::StartsWith("set host NICs of n1 (netns " + h.ns +
                                                         "): 1 change: mlx5_0 (rdma0) mtu: 1500 -> 9000 (drift)"));
    CHECK_THAT((*plan)[0].description, Catch::Contains("unsupported settings left as is"));
    CHECK_FALSE(stage.verify(c.ctx));

    auto st = stage.apply(c.ctx, (*plan)[0]);
    INFO((st ? "" : st.error().str()));
    REQUIRE(st);
    CHECK(h.mtu("rdma0") == 9000);
    CHECK(h.mtu("rdma1") == 1500);  // the peer is not the node's NIC
    auto verified = stage.verify(c.ctx);
    INFO((verified ? "" : verified.error().str()));
    CHECK(verified);

    auto again = stage.observe(c.ctx);
    REQUIRE(again);
    CHECK((*item(again->state, "mtu"))["outcome"] == "ok");
    auto replan = stage.plan(c.ctx, *again);
    REQUIRE(replan);
    CHECK(replan->empty());
    // Unsupported items stay warnings on every observe: never work, never dropped.
    CHECK_FALSE(again->notes.empty());
}

TEST_CASE("network stage host NICs: a veth's missing DCB and RoCE ECN are unsupported in the observation") {
    if (!have_root()) return;
    ::kiln::test::VethNetns h{"kiln-hs-"};
    HostFleet fleet("{ netns = \"" + h.ns + "\" }", "[{ name = \"mlx5_0\", ifname = \"rdma0\" }]");
    network::NetworkStage stage;
    Ctx c(fleet.f());
    auto obs = stage.observe(c.ctx);
    REQUIRE(obs);
    INFO(obs->state.dump(2));
    for (const char* s : {"dscp_trust", "pfc"}) {
        const json* i = item(obs->state, s);
        REQUIRE(i);
        CHECK((*i)["outcome"] == "unsupported");
        CHECK_THAT((*i)["detail"].get<std::string>(), Catch::Contains("no DCB"));
        CHECK((*i)["required"] == false);
    }
    REQUIRE(item(obs->state, "ecn roce_np prio 3"));
    CHECK((*item(obs->state, "ecn roce_np prio 3"))["outcome"] == "unsupported");
    CHECK(obs->state["host_nics"]["counts"]["unsupported"].get<int>() >= 4);
    // One note per NIC, naming each unsupported setting and why.
    REQUIRE(obs->notes.size() == 1);
    CHECK_THAT(obs->notes[0], Catch::StartsWith("host NIC mlx5_0 (rdma0): unsupported, left as is: dscp_trust ("));
    CHECK_THAT(obs->notes[0], Catch::Contains("pfc ("));
    CHECK_THAT(obs->notes[0], Catch::Contains("ecn roce_rp prio 3 ("));
}

TEST_CASE("network stage host NICs: a required setting the NIC lacks fails the plan, naming node, NIC and setting") {
    if (!have_root()) return;
    ::kiln::test::VethNetns h{"kiln-hs-"};
    HostFleet fleet("{ netns = \"" + h.ns + "\", require = [\"pfc\"] }", "[{ name = \"mlx5_0\", ifname = \"rdma0\" }]");
    network::NetworkStage stage;
    Ctx c(fleet.f());
    auto obs = stage.observe(c.ctx);
    REQUIRE(obs);
    CHECK((*item(obs->state, "pfc"))["required"] == true);
    auto plan = stage.plan(c.ctx, *obs);
    REQUIRE_FALSE(plan);
    CHECK(plan.error().code == "network.host_nic_required");
    CHECK_THAT(plan.error().message,
               Catch::StartsWith("node n1: mlx5_0 (rdma0) pfc is required (host.require) but unsupported: "));
    CHECK_FALSE(Catch::Contains("dscp_trust").match(plan.error().message));  // not required
}

TEST_CASE("network stage host NICs: a NIC the host lacks is an error naming the node and the NIC") {
    if (!have_root()) return;
    ::kiln::test::VethNetns h{"kiln-hs-"};
    {
        HostFleet fleet("{ netns = \"" + h.ns + "\" }", "[{ name = \"mlx5_0\", ifname = \"nosuch0\" }]");
        network::NetworkStage stage;
        Ctx c(fleet.f());
        auto obs = stage.observe(c.ctx);
        REQUIRE_FALSE(obs);
        CHECK(obs.error().code == "network.no_such_nic");
        CHECK_THAT(obs.error().message, Catch::StartsWith("node n1 NIC mlx5_0: interface nosuch0"));
    }
    {
        // The string form: the NIC's name is taken as its netdev, and the error says how to give another.
        HostFleet fleet("{ netns = \"" + h.ns + "\" }", "[\"mlx5_7\"]");
        network::NetworkStage stage;
        Ctx c(fleet.f());
        auto obs = stage.observe(c.ctx);
        REQUIRE_FALSE(obs);
        CHECK(obs.error().code == "network.no_such_nic");
        CHECK_THAT(obs.error().message, Catch::StartsWith("node n1 NIC mlx5_7: interface mlx5_7"));
        CHECK_THAT(obs.error().message, Catch::EndsWith("(give the NIC's netdev as ifname in the node's nics)"));
    }
}

TEST_CASE("network stage host NICs: a namespace that does not exist is one error naming the node and the way in") {
    if (!have_root()) return;
    HostFleet fleet("{ netns = \"kiln-no-such-ns\" }", "[{ name = \"mlx5_0\", ifname = \"rdma0\" }]");
    network::NetworkStage stage;
    Ctx c(fleet.f());
    auto obs = stage.observe(c.ctx);
    REQUIRE_FALSE(obs);
    CHECK(obs.error().code == "network.host_unusable");
    CHECK_THAT(obs.error().message,
               Catch::StartsWith("node n1 host (netns kiln-no-such-ns): cannot run commands there: exit "));
}

TEST_CASE("kiln CLI: host NIC drift is named by network drift, shown with its warnings by plan, repaired by apply") {
    if (!have_root()) return;
    ::kiln::test::VethNetns h{"kiln-hs-"};
    HostFleet fleet("{ netns = \"" + h.ns + "\" }", "[{ name = \"mlx5_0\", ifname = \"rdma0\" }]");

    auto drift = kiln_cli({"network", "drift", fleet.path, "--json"});
    INFO(drift.out + drift.err);
    CHECK(drift.exit_code == 2);
    auto doc = json::parse(drift.out);
    CHECK(doc["hosts_checked"] == json::array({"n1"}));
    REQUIRE(doc["host_drift"].size() == 1);
    CHECK(doc["host_drift"][0]["node"] == "n1");
    CHECK(doc["host_drift"][0]["nic"] == "mlx5_0");
    CHECK(doc["host_drift"][0]["ifname"] == "rdma0");
    CHECK(doc["host_drift"][0]["setting"] == "mtu");
    CHECK(doc["host_drift"][0]["running"] == "1500");
    CHECK(doc["host_drift"][0]["desired"] == "9000");
    REQUIRE(doc["host_warnings"].size() == 1);
    CHECK_THAT(doc["host_warnings"][0]["warning"].get<std::string>(), Catch::Contains("dscp_trust"));

    auto plan = kiln_cli({"plan", fleet.path, "--detailed-exitcode"});
    INFO(plan.out + plan.err);
    CHECK(plan.exit_code == 2);
    CHECK_THAT(plan.out, Catch::Contains("+ set host NICs of n1 (netns " + h.ns + "): 1 change: mlx5_0 (rdma0) mtu"));
    CHECK_THAT(plan.out, Catch::Contains("! host NIC mlx5_0 (rdma0): unsupported, left as is: dscp_trust ("));

    auto apply = kiln_cli({"apply", fleet.path});
    INFO(apply.out + apply.err);
    REQUIRE(apply.exit_code == 0);
    CHECK(h.mtu("rdma0") == 9000);
    CHECK_THAT(apply.out, Catch::Contains("warning: host NIC mlx5_0 (rdma0): unsupported"));
    // The journal holds the warning beside the run.
    {
        auto store = journal::open_sqlite_store(fleet.dir.file(".kiln/journal.db"), {.read_only = true});
        REQUIRE(store);
        auto hist = (*store)->history("n1", 0);
        REQUIRE(hist);
        bool warned = false;
        for (const auto& e : *hist)
            warned =
                warned || (e.kind == "event" && e.name == "warning" && e.text.find("dscp_trust") != std::string::npos);
        CHECK(warned);
    }

    auto clean = kiln_cli({"network", "drift", fleet.path});
    INFO(clean.out + clean.err);
    CHECK(clean.exit_code == 0);
    CHECK_THAT(clean.out, Catch::Contains("Drift: 0 differences on 0 switches and 1 host checked, 0 errors."));
    auto converged = kiln_cli({"plan", fleet.path, "--detailed-exitcode"});
    INFO(converged.out + converged.err);
    CHECK(converged.exit_code == 0);  // warnings are not work

    // Behind kiln's back: drift names the node, NIC and setting; apply repairs it.
    h.set_mtu("rdma0", 1500);
    auto text = kiln_cli({"network", "drift", fleet.path});
    CHECK(text.exit_code == 2);
    CHECK_THAT(text.out, Catch::Contains("n1 mlx5_0 (rdma0) mtu: 1500 -> 9000 (drift)"));
    CHECK(kiln_cli({"plan", fleet.path, "--detailed-exitcode"}).exit_code == 2);
    CHECK(kiln_cli({"apply", fleet.path}).exit_code == 0);
    CHECK(h.mtu("rdma0") == 9000);
}
