// A stage added without touching the core: the test driver registers the
// greeter module (tests/support/greeter_module.h), which brings its stage,
// its [greeter] table with its own reader, and its inputs. The loader reads
// the table through the registration, errors come out as FILE:LINE:COL with
// the table's keys, the engine hashes what the stage states, the secret it
// names is scrubbed like the core's, and the shipped kiln, which does not
// register the module, refuses the table.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "provisioner/cli/product_stages.h"
#include "provisioner/config/fleet_loader.h"
#include "provisioner/engine/stage_registry.h"
#include "provisioner/evidence/secret_scrub.h"
#include "tests/support/child.h"
#include "tests/support/greeter_module.h"
#include "tests/support/temp_dir.h"

using kiln::test::run_child;
using kiln::test::TempDir;

namespace {

struct GreeterFleet {
    TempDir dir;
    std::string fleet;
    explicit GreeterFleet(const std::string& greeter_table) {
        dir.write("pipelines/greet.toml", "schema = 1\nname = \"greet\"\nstages = [\"greeter\"]\n");
        fleet = dir.write("fleet.toml",
                          "schema = 1\n"
                          "[fleet]\nname = \"greeted\"\npipelines = \"pipelines\"\n"
                          "[[racks]]\nname = \"r1\"\n"
                          "[[nodes]]\nname = \"n1\"\nrack = \"r1\"\nrole = \"greet\"\n"
                          "[[nodes]]\nname = \"n2\"\nrack = \"r1\"\nrole = \"greet\"\n" +
                              greeter_table);
    }
    kiln::test::ChildResult driver(std::vector<std::string> args) const {
        args.insert(args.begin(), KILN_TEST_DRIVER);
        return run_child(args, {{"KILN_TEST_LEDGER", dir.file("ledger")}});
    }
    std::string greeting(const std::string& node) const {
        return kiln::test::read_file(dir.file("ledger.greeter-" + node + ".txt"));
    }
};

kiln::engine::StageRegistry greeter_registry() {
    kiln::engine::StageRegistry registry;
    kiln::test::register_greeter_module(registry, "/nonexistent/");
    return registry;
}

}  // namespace

TEST_CASE("stage module: a table registered by a module is read by its own reader, typed", "[engine][module]") {
    const auto registry = greeter_registry();
    GreeterFleet g("[greeter]\nmessage = \"hello\"\ntoken = \"env:KILN_TEST_GREETER_TOKEN\"\n");
    auto r = kiln::config::load_fleet(g.fleet, registry.load_options());
    INFO((r.errors.empty() ? "" : r.errors.front().str()));
    REQUIRE(r.fleet);
    const auto* c = kiln::test::greeter_config(*r.fleet);
    REQUIRE(c != nullptr);
    CHECK(c->message == "hello");
    REQUIRE(c->token);
    CHECK(c->token->reference() == "env:KILN_TEST_GREETER_TOKEN");
    CHECK(r.fleet->tables.at("greeter").pos.line == 15);  // where [greeter] is

    // The secret the module's table names is scrubbed like a BMC password,
    // though the scrubber knows nothing of the table.
    ::setenv("KILN_TEST_GREETER_TOKEN", "s3cret-greeting-token", 1);
    auto scrubber = kiln::evidence::SecretScrubber::from_fleet(*r.fleet);
    std::string text = "sent s3cret-greeting-token to n1";
    CHECK(scrubber.scrub(text) == 1);
    CHECK(text.find("s3cret-greeting-token") == std::string::npos);
    ::unsetenv("KILN_TEST_GREETER_TOKEN");
}

TEST_CASE("stage module: its table's errors are FILE:LINE:COL with its keys, and an unregistered table is refused",
          "[engine][module]") {
    const auto registry = greeter_registry();
    // Line 15 is [greeter]; 16 the misspelt key; 17 a literal secret.
    GreeterFleet bad("[greeter]\nmesage = \"hello\"\ntoken = \"hunter2\"\n");
    auto r = kiln::config::load_fleet(bad.fleet, registry.load_options());
    REQUIRE_FALSE(r.fleet);
    std::vector<std::string> lines;
    for (const auto& d : r.errors) lines.push_back(d.str());
    INFO(Catch::rangeToString(lines));
    REQUIRE(lines.size() == 3);
    CHECK(lines[0] == bad.fleet + ":15:1: greeter.message: required key is missing");
    CHECK(lines[1] == bad.fleet + ":16:1: greeter.mesage: unknown key 'mesage'; expected one of: message, token");
    CHECK_THAT(lines[2], Catch::StartsWith(bad.fleet + ":17:9: greeter.token: a literal secret is not allowed"));
    for (const auto& l : lines) CHECK(l.find("hunter2") == std::string::npos);

    // Without the module, [greeter] is a key the fleet file may not have.
    kiln::engine::StageRegistry bare;
    bare.declare("greeter");
    GreeterFleet good("[greeter]\nmessage = \"hello\"\n");
    auto u = kiln::config::load_fleet(good.fleet, bare.load_options());
    REQUIRE_FALSE(u.fleet);
    REQUIRE(u.errors.size() == 1);
    CHECK_THAT(u.errors[0].str(), Catch::StartsWith(good.fleet + ":15:2: greeter: unknown key 'greeter'"));
}

TEST_CASE("stage module: kiln plans, applies and converges a stage the core never names", "[engine][module][cli]") {
    GreeterFleet g("[greeter]\nmessage = \"hello\"\n");
    auto v = g.driver({"validate", g.fleet});
    INFO(v.out << v.err);
    REQUIRE(v.exit_code == 0);
    auto p = g.driver({"plan", g.fleet, "--detailed-exitcode"});
    INFO(p.out << p.err);
    REQUIRE(p.exit_code == 2);
    auto a = g.driver({"apply", g.fleet});
    INFO(a.out << a.err);
    REQUIRE(a.exit_code == 0);
    CHECK(g.greeting("n1") == "hello");
    CHECK(g.greeting("n2") == "hello");
    CHECK(g.driver({"plan", g.fleet, "--detailed-exitcode"}).exit_code == 0);

    // A new message in the module's table: new inputs, so work again.
    g.dir.write("fleet.toml",
                kiln::test::read_file(g.fleet).substr(0, kiln::test::read_file(g.fleet).find("[greeter]")) +
                    "[greeter]\nmessage = \"good morning\"\n");
    auto p2 = g.driver({"plan", g.fleet, "--detailed-exitcode", "--json"});
    INFO(p2.out << p2.err);
    REQUIRE(p2.exit_code == 2);
    CHECK(nlohmann::json::parse(p2.out)["summary"]["work"] == 2);
    REQUIRE(g.driver({"apply", g.fleet}).exit_code == 0);
    CHECK(g.greeting("n1") == "good morning");

    // The shipped kiln does not register the module: it refuses the table
    // (and the stage) at load, and changes nothing.
    auto product = run_child({KILN_BINARY, "validate", g.fleet}, {});
    REQUIRE(product.exit_code == 1);
    CHECK_THAT(product.err, Catch::Contains("greeter: unknown key 'greeter'"));
}

TEST_CASE("stage module: a table under a key the core or another module reads is refused at registration",
          "[engine][module]") {
    auto table = [](const std::string& key, const std::string& node_key) {
        kiln::config::ConfigTable t;
        t.key = key;
        t.node_key = node_key;
        t.read = [](kiln::config::TableReader&, kiln::config::TableScope&) { return std::any(); };
        return t;
    };
    kiln::engine::StageRegistry registry;
    registry.add_table(table("quota", "quota"));
    CHECK_THROWS_WITH(registry.add_table(table("limits", "")),
                      Catch::Contains("[limits]") && Catch::Contains("the core reads [limits] itself"));
    CHECK_THROWS_WITH(registry.add_table(table("racking", "rack")),
                      Catch::Contains("the core reads the node key 'rack' itself"));
    CHECK_THROWS_WITH(registry.add_table(table("quota", "")), Catch::Contains("another module registered it"));
    CHECK_THROWS_WITH(registry.add_table(table("quotas", "quota")),
                      Catch::Contains("the node key 'quota' is [quota]'s"));
    // Nothing refused was kept; a table of its own key and node key is.
    CHECK(registry.config_tables().size() == 1);
    registry.add_table(table("quotas", "quotas"));
    CHECK(registry.config_tables().size() == 2);
    // The shipped registrations pass the same guard.
    kiln::engine::StageRegistry product;
    CHECK_NOTHROW(kiln::engine::register_product_stages(product));
    CHECK(product.config_tables().size() == 9);
}

TEST_CASE("stage module: a module's command runs in kiln over the fleet the shell loads, and only where registered",
          "[engine][module][cli]") {
    GreeterFleet g("[greeter]\nmessage = \"hello\"\n");
    auto shown = g.driver({"greeter", "show", g.fleet});
    INFO(shown.out << shown.err);
    REQUIRE(shown.exit_code == 0);
    CHECK(shown.out == "n1: hello\nn2: hello\n");
    auto one = g.driver({"greeter", "show", g.fleet, "--node", "n2"});
    CHECK(one.out == "n2: hello\n");
    // The shell's --help lists it with the description it registered.
    auto help = g.driver({"--help"});
    CHECK_THAT(help.out, Catch::Contains("greeter") && Catch::Contains("the greeter module's own command"));
    // The fleet is loaded as every command loads it: the module's table
    // errors come out as FILE:LINE:COL, and nothing is printed for a bad one.
    GreeterFleet bad("[greeter]\nmesage = \"hello\"\n");
    auto refused = bad.driver({"greeter", "show", bad.fleet});
    CHECK(refused.exit_code == 1);
    CHECK(refused.out.empty());
    CHECK_THAT(refused.err,
               Catch::Contains(bad.fleet + ":") && Catch::Contains("greeter.mesage: unknown key 'mesage'"));
    // The shipped kiln has no such command.
    auto product = run_child({KILN_BINARY, "greeter", "show", g.fleet}, {});
    CHECK(product.exit_code != 0);
    CHECK(product.out.find("n1: hello") == std::string::npos);
}

TEST_CASE("stage module: a command under a name the shell or another module uses is refused at registration",
          "[engine][module]") {
    auto command = [](const std::string& name) {
        return kiln::engine::StageCommandSpec{name, "", [] { return std::unique_ptr<kiln::engine::StageCommand>(); }};
    };
    kiln::engine::StageRegistry registry;
    registry.add_command(command("audit"));
    for (const auto& core : {"validate", "plan", "apply", "status", "report", "worker", "stages"})
        CHECK_THROWS_WITH(registry.add_command(command(core)),
                          Catch::Contains("the CLI shell has a command of that name"));
    CHECK_THROWS_WITH(registry.add_command(command("audit")), Catch::Contains("another module registered it"));
    CHECK_THROWS_WITH(registry.add_command({"empty", "", nullptr}), Catch::Contains("no name or no factory"));
    CHECK(registry.commands().size() == 1);
    // The product's modules bring their commands; the shell's core names none.
    kiln::engine::StageRegistry product;
    kiln::engine::register_product_stages(product);
    std::vector<std::string> names;
    for (const auto& c : product.commands()) names.push_back(c.name);
    CHECK(names == std::vector<std::string>{"firmware", "network", "image", "vm", "host", "evidence"});
}
