#include "pipelines/smoke/stage/local_process_transport.h"

#include <thread>

#include "provisioner/vm/guest_contract.h"

namespace kiln::smoke {

LocalProcessTransport::LocalProcessTransport(LocalProcessOptions options) : options_(std::move(options)) {
    if (!options_.runner) options_.runner = std::make_shared<ProcessRunner>();
}

Result<std::vector<std::string>> LocalProcessTransport::list_vms(const config::Node& node) {
    std::vector<std::string> vms;
    for (int i = 0; i < options_.vms_per_node; ++i) vms.push_back(vm::domain_name(node.name, i));
    return vms;
}

RankAddress LocalProcessTransport::address(int ordinal) const {
    const int port = options_.port_base + ordinal;
    return {"127.0.0.1", port, "127.0.0.1", port};
}

Result<std::vector<RankOutput>> LocalProcessTransport::run(const config::Node& /*node*/,
                                                           const std::vector<RankLaunch>& ranks,
                                                           std::chrono::milliseconds timeout) {
    std::vector<RankOutput> outputs(ranks.size());
    std::vector<std::optional<Error>> errors(ranks.size());
    std::vector<std::thread> threads;
    // ProcessRunner blocks until its child ends: one thread per rank, so the
    // ranks meet each other.
    for (size_t i = 0; i < ranks.size(); ++i)
        threads.emplace_back([&, i] {
            CommandSpec spec;
            spec.argv.push_back(options_.smoke_binary);
            for (const auto& a : ranks[i].args) spec.argv.push_back(a);
            spec.timeout = timeout;
            spec.kill_grace = std::chrono::seconds(2);
            auto r = options_.runner->run(spec);
            outputs[i].vm = ranks[i].vm;
            if (!r) {
                errors[i] = r.error();
                return;
            }
            outputs[i].exit_code = r->exit_code;
            outputs[i].timed_out = r->timed_out;
            outputs[i].out = std::move(r->out);
            outputs[i].err = std::move(r->err);
        });
    for (auto& t : threads) t.join();
    for (auto& e : errors)
        if (e) return make_error("smoke", "smoke.start", "cannot start kiln-smoke: " + e->message);
    return outputs;
}

}  // namespace kiln::smoke
