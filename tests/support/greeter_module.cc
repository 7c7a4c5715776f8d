#include "tests/support/greeter_module.h"

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include <CLI/CLI.hpp>

#include "provisioner/config/toml_reader.h"

namespace kiln::test {

namespace {

constexpr const char* kTable = "greeter";

class GreeterStage : public engine::Stage {
public:
    explicit GreeterStage(std::string prefix) : prefix_(std::move(prefix)) {}
    std::string name() const override { return kTable; }

    Result<nlohmann::json> inputs(const engine::StageContext& ctx) const override {
        const GreeterConfig* c = greeter_config(ctx.fleet());
        if (!c) return nlohmann::json{{"message", nullptr}};
        // The token's reference, never its value.
        return nlohmann::json{{"message", c->message},
                              {"token", c->token ? nlohmann::json(c->token->reference()) : nlohmann::json(nullptr)}};
    }
    Result<engine::Observation> observe(engine::StageContext& ctx) override {
        engine::Observation o;
        o.state = {{"greeting", read(ctx.node().name)}};
        return o;
    }
    Result<std::vector<engine::Action>> plan(engine::StageContext& ctx, const engine::Observation& observed) override {
        const GreeterConfig* c = greeter_config(ctx.fleet());
        if (!c) return make_error("greeter", "greeter.no_table", "the fleet has no [greeter] table");
        if (observed.state["greeting"] == c->message) return std::vector<engine::Action>{};
        engine::Action a;
        a.id = "greet";
        a.description = "write the greeting";
        return std::vector<engine::Action>{a};
    }
    Status apply(engine::StageContext& ctx, const engine::Action&) override {
        std::ofstream(path(ctx.node().name), std::ios::trunc) << greeter_config(ctx.fleet())->message;
        return ok_status();
    }
    Status verify(engine::StageContext& ctx) override {
        if (read(ctx.node().name) == greeter_config(ctx.fleet())->message) return ok_status();
        return make_error("greeter", "greeter.verify", "the greeting file does not hold the message");
    }

private:
    std::string path(const std::string& node) const { return prefix_ + "greeter-" + node + ".txt"; }
    std::string read(const std::string& node) const {
        std::ifstream in(path(node));
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    }
    std::string prefix_;
};

// `kiln greeter show FLEET [--node N]`: what each node would be greeted with.
class GreeterCommand : public engine::StageCommand {
public:
    void add_to(CLI::App& command) override {
        command.require_subcommand(1);
        auto* show = command.add_subcommand("show", "print each node's greeting; changes nothing");
        show->add_option("FLEET", fleet_, "fleet config (TOML)")->required();
        show->add_option("--node", node_, "only this node");
    }
    int run(const engine::CommandEnv& env) override {
        auto fleet = env.load_fleet(fleet_);
        if (!fleet) return 1;
        const GreeterConfig* c = greeter_config(*fleet);
        if (!c) {
            std::fprintf(stderr, "kiln: greeter: %s has no [greeter] table\n", fleet_.c_str());
            return 1;
        }
        for (const auto& n : fleet->nodes)
            if (node_.empty() || n.name == node_) std::printf("%s: %s\n", n.name.c_str(), c->message.c_str());
        return 0;
    }

private:
    std::string fleet_;
    std::string node_;
};

}  // namespace

config::ConfigTable greeter_table() {
    return {kTable, [](config::TableReader& r, config::TableScope& scope) -> std::any {
                GreeterConfig c;
                if (auto v = r.str("message", true)) c.message = *v;
                c.token = scope.secret(r, "token");
                return c;
            }};
}

const GreeterConfig* greeter_config(const config::Fleet& fleet) {
    return fleet.table<GreeterConfig>(kTable);
}

void register_greeter_module(engine::StageRegistry& registry, const std::string& state_prefix) {
    registry.declare(kTable);
    registry.add(std::make_shared<GreeterStage>(state_prefix));
    registry.add_table(greeter_table());
    registry.add_command(
        {kTable, "the greeter module's own command", [] { return std::make_unique<GreeterCommand>(); }});
}

}  // namespace kiln::test
