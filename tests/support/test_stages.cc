#include "tests/support/test_stages.h"

#include "tests/support/greeter_module.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

namespace kiln::test {

namespace {

std::atomic<int> g_process_applies{0};

std::string resource_for(const std::string& kind, const config::Node& node) {
    if (kind.empty()) return "";
    if (kind == "bmc") return "bmc:" + node.bmc.url;
    return kind + ":" + node.rack;
}

// The probe file: one line "key current peak" per key, rewritten under an
// exclusive flock, so processes count together.
std::map<std::string, std::pair<int, int>> parse_probe(const std::string& text) {
    std::map<std::string, std::pair<int, int>> out;
    std::istringstream in(text);
    std::string key;
    int cur = 0, peak = 0;
    while (in >> key >> cur >> peak) out[key] = {cur, peak};
    return out;
}

void probe_step(const std::string& path, const std::vector<std::string>& keys, int delta) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;
    ::flock(fd, LOCK_EX);
    std::string text;
    char buf[4096];
    for (ssize_t n; (n = ::pread(fd, buf, sizeof buf, static_cast<off_t>(text.size()))) > 0;)
        text.append(buf, static_cast<size_t>(n));
    auto counts = parse_probe(text);
    for (const auto& k : keys) {
        auto& [cur, peak] = counts[k];
        cur += delta;
        peak = std::max(peak, cur);
    }
    std::string out;
    for (const auto& [k, v] : counts) out += k + " " + std::to_string(v.first) + " " + std::to_string(v.second) + "\n";
    if (::ftruncate(fd, 0) == 0) {
        ssize_t written = ::pwrite(fd, out.data(), out.size(), 0);
        (void)written;  // a short probe file fails the test that reads it
    }
    ::flock(fd, LOCK_UN);
    ::close(fd);
}

}  // namespace

std::map<std::string, int> LedgerStage::read_probe_peaks(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    std::map<std::string, int> out;
    for (const auto& [k, v] : parse_probe(ss.str())) out[k] = v.second;
    return out;
}

// ---- LedgerStage -----------------------------------------------------------

std::map<std::string, int> LedgerStage::read_ledger(const std::string& path) {
    std::map<std::string, int> out;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line))
        if (!line.empty()) ++out[line];
    return out;
}

std::vector<std::string> LedgerStage::resources(const config::Fleet&, const config::Node& node) const {
    auto r = resource_for(o_.resource_kind, node);
    if (r.empty()) return {};
    return {r};
}

Result<engine::Observation> LedgerStage::observe(engine::StageContext& ctx) {
    engine::Observation obs;
    obs.state["done"] = nlohmann::json::array();
    const std::string prefix = ctx.node().name + " " + o_.name + " ";
    for (const auto& [line, count] : read_ledger(o_.ledger)) {
        if (line.rfind(prefix, 0) == 0) obs.state["done"].push_back(line.substr(prefix.size()));
    }
    return obs;
}

Result<std::vector<engine::Action>> LedgerStage::plan(engine::StageContext& ctx, const engine::Observation& observed) {
    std::set<std::string> done;
    for (const auto& d : observed.state["done"]) done.insert(d.get<std::string>());
    std::vector<engine::Action> actions;
    for (int i = 0; i < o_.actions; ++i) {
        std::string id = "a" + std::to_string(i);
        if (!done.count(id)) actions.push_back({id, o_.name + " " + id + " on " + ctx.node().name});
    }
    return actions;
}

Status LedgerStage::apply(engine::StageContext& ctx, const engine::Action& action) {
    std::unique_ptr<engine::StageContext::Hold> held;
    if (!o_.exclusive.empty()) {
        auto h = ctx.hold_exclusive(o_.exclusive);
        if (!h) return h.error();
        held = std::move(*h);
    }
    if (!o_.gate.empty()) {
        // The test opens the gate once what it waits for has happened.
        for (int i = 0; i < 12000 && ::access(o_.gate.c_str(), F_OK) != 0; ++i) {
            if (ctx.stopping()) return make_error(o_.name, "gate", "stopped at the gate");
            ctx.wait_for(std::chrono::milliseconds(10));
        }
        if (::access(o_.gate.c_str(), F_OK) != 0)
            return make_error(o_.name, "gate", "gate " + o_.gate + " never opened");
    }
    const std::vector<std::string> probe_keys = {"total", "rack:" + ctx.node().rack};
    if (!o_.probe.empty()) probe_step(o_.probe, probe_keys, +1);
    struct Leave {
        const std::string& probe;
        const std::vector<std::string>& keys;
        ~Leave() {
            if (!probe.empty()) probe_step(probe, keys, -1);
        }
    } leave{o_.probe, probe_keys};
    const int n = ++g_process_applies;
    if (o_.kill_at == n && !o_.kill_after_write) ::kill(::getpid(), SIGKILL);
    const std::string line = ctx.node().name + " " + o_.name + " " + action.id + "\n";
    int fd = ::open(o_.ledger.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return make_error(o_.name, "ledger.open", "cannot open ledger " + o_.ledger);
    ssize_t w = ::write(fd, line.data(), line.size());
    ::close(fd);
    if (w != static_cast<ssize_t>(line.size())) return make_error(o_.name, "ledger.write", "short write");
    if (o_.kill_at == n && o_.kill_after_write) ::kill(::getpid(), SIGKILL);
    if (o_.sleep_ms > 0) ctx.wait_for(std::chrono::milliseconds(o_.sleep_ms));
    if (o_.interrupt_at == n) {
        ::kill(::getpid(), SIGINT);
        // The signal is taken by kiln's watcher thread: hold this action
        // until the engine has seen it, as a real long action would.
        for (int i = 0; i < 500 && !ctx.stopping(); ++i) ctx.wait_for(std::chrono::milliseconds(10));
    }
    return ok_status();
}

Status LedgerStage::verify(engine::StageContext& ctx) {
    auto obs = observe(ctx);
    if (!obs) return obs.error();
    auto remaining = plan(ctx, *obs);
    if (!remaining) return remaining.error();
    if (!remaining->empty())
        return make_error(o_.name, "ledger.verify", std::to_string(remaining->size()) + " actions missing");
    return ok_status();
}

// ---- ConcurrencyProbe ------------------------------------------------------

std::vector<std::string> ConcurrencyProbe::resources(const config::Fleet&, const config::Node& node) const {
    auto r = resource_for(resource_kind_, node);
    if (r.empty()) return {};
    return {r};
}

Result<engine::Observation> ConcurrencyProbe::observe(engine::StageContext&) {
    return engine::Observation{};
}

Result<std::vector<engine::Action>> ConcurrencyProbe::plan(engine::StageContext& ctx, const engine::Observation&) {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_.count(ctx.node().name)) return std::vector<engine::Action>{};
    return std::vector<engine::Action>{{"hold", "hold a slot"}};
}

Status ConcurrencyProbe::apply(engine::StageContext& ctx, const engine::Action&) {
    const auto& node = ctx.node();
    const auto res = resource_for(resource_kind_, node);
    std::unique_lock<std::mutex> lock(mu_);
    ++applies_;
    max_total_ = std::max(max_total_, ++total_);
    max_rack_[node.rack] = std::max(max_rack_[node.rack], ++rack_[node.rack]);
    if (!res.empty()) max_res_[res] = std::max(max_res_[res], ++res_[res]);
    cv_.notify_all();
    // Hold until `target` run together, so the peak is the limit itself.
    if (!cv_.wait_for(lock, std::chrono::seconds(5), [&] { return total_ >= target_ || max_total_ >= target_; }))
        ++timeouts_;
    --total_;
    --rack_[node.rack];
    if (!res.empty()) --res_[res];
    done_.insert(node.name);
    return ok_status();
}

Status ConcurrencyProbe::verify(engine::StageContext&) {
    return ok_status();
}

int ConcurrencyProbe::max_per_rack() const {
    int m = 0;
    for (const auto& [k, v] : max_rack_) m = std::max(m, v);
    return m;
}

int ConcurrencyProbe::max_per_resource() const {
    int m = 0;
    for (const auto& [k, v] : max_res_) m = std::max(m, v);
    return m;
}

// ---- ScriptedStage ---------------------------------------------------------

Result<engine::Observation> ScriptedStage::observe(engine::StageContext&) {
    return engine::Observation{};
}

Result<std::vector<engine::Action>> ScriptedStage::plan(engine::StageContext& ctx, const engine::Observation&) {
    std::lock_guard<std::mutex> lock(mu_);
    if (converged_.count(ctx.node().name)) return std::vector<engine::Action>{};
    return std::vector<engine::Action>{{"do", name_ + " on " + ctx.node().name}};
}

Status ScriptedStage::apply(engine::StageContext& ctx, const engine::Action&) {
    const auto& node = ctx.node().name;
    Script s;
    int attempt = 0;
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = scripts_.find(node);
        if (it != scripts_.end()) s = it->second;
        attempt = ++attempts_[node];
    }
    auto succeed = [&] {
        std::lock_guard<std::mutex> lock(mu_);
        ++successes_[node];
        converged_.insert(node);
        return ok_status();
    };
    switch (s.mode) {
        case Mode::Ok:
            return succeed();
        case Mode::FlakyThenOk:
            if (attempt <= s.failures)
                return make_error(name_, "flaky", "BMC busy (attempt " + std::to_string(attempt) + ")", true);
            return succeed();
        case Mode::AlwaysTransient:
            return make_error(name_, "busy", "BMC busy", true);
        case Mode::Permanent:
            return make_error(name_, "broken", "firmware image rejected");
        case Mode::Quarantine: {
            Error e = make_error(name_, "unhealthy", "GPU 3 has pending row remaps");
            e.quarantine = true;
            return e;
        }
        case Mode::SlowTransient:
            if (!ctx.wait_for(std::chrono::milliseconds(s.failures)))
                return make_error(name_, "cut", "work cut short by the deadline");
            return make_error(name_, "busy", "BMC busy after a slow attempt", true);
        case Mode::Hang:
            if (!ctx.wait_for(std::chrono::seconds(60))) return make_error(name_, "cut", "wait cut short");
            return succeed();
    }
    return ok_status();
}

Status ScriptedStage::verify(engine::StageContext&) {
    return ok_status();
}

int ScriptedStage::attempts(const std::string& node) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = attempts_.find(node);
    return it == attempts_.end() ? 0 : it->second;
}

int ScriptedStage::successes(const std::string& node) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = successes_.find(node);
    return it == successes_.end() ? 0 : it->second;
}

// ---- ParkingStage ----------------------------------------------------------

Status ParkingStage::append(const std::string& line) {
    const std::string text = line + "\n";
    int fd = ::open(o_.ledger.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return make_error(o_.name, "ledger.open", "cannot open ledger " + o_.ledger);
    ssize_t w = ::write(fd, text.data(), text.size());
    ::close(fd);
    if (w != static_cast<ssize_t>(text.size())) return make_error(o_.name, "ledger.write", "short write");
    return ok_status();
}

Result<engine::Observation> ParkingStage::observe(engine::StageContext& ctx) {
    engine::Observation obs;
    const std::string prefix = ctx.node().name + " " + o_.name + " ";
    auto lines = LedgerStage::read_ledger(o_.ledger);
    obs.state["started"] = lines.count(prefix + "start") != 0;
    obs.state["done"] = lines.count(prefix + "done") != 0;
    return obs;
}

Result<std::vector<engine::Action>> ParkingStage::plan(engine::StageContext& ctx, const engine::Observation& observed) {
    if (observed.state.value("done", false)) return std::vector<engine::Action>{};
    return std::vector<engine::Action>{{"wait", "start a long task on " + ctx.node().name + " and wait for it"}};
}

Status ParkingStage::apply(engine::StageContext& ctx, const engine::Action&) {
    const std::string prefix = ctx.node().name + " " + o_.name + " ";
    if (const auto* state = ctx.resumed()) {
        --parked_now_;
        ++resumes_;
        if (state->value("phase", "") != "waiting")
            return make_error(o_.name, "resume.state", "resumed with an unexpected state " + state->dump());
        return append(prefix + "done");
    }
    // Crash safety: a task started by an earlier (killed) run is waited
    // for, not started again.
    if (!LedgerStage::read_ledger(o_.ledger).count(prefix + "start")) {
        if (auto s = append(prefix + "start"); !s) return s;
        ++starts_;
    }
    const auto wait = std::chrono::milliseconds(wait_ms_.load());
    if (o_.block || !ctx.can_park()) {
        if (!ctx.wait_for(wait)) return make_error(o_.name, "cut", "wait cut short");
        return append(prefix + "done");
    }
    ++parks_;
    int now = ++parked_now_;
    for (int peak = peak_parked_.load(); now > peak && !peak_parked_.compare_exchange_weak(peak, now);) {
    }
    return ctx.park_for(wait, nlohmann::json{{"phase", "waiting"}}, "the task on " + ctx.node().name);
}

Status ParkingStage::verify(engine::StageContext& ctx) {
    auto obs = observe(ctx);
    if (!obs) return obs.error();
    if (!obs->state.value("done", false)) return make_error(o_.name, "verify", "the task has not ended");
    return ok_status();
}

// ---- driver registry -------------------------------------------------------

void register_driver_stages(engine::StageRegistry& registry) {
    auto env = [](const char* name, const char* def) {
        const char* v = std::getenv(name);
        return std::string(v ? v : def);
    };
    const std::string ledger = env("KILN_TEST_LEDGER", "/tmp/kiln-test-ledger");
    const int actions = std::atoi(env("KILN_TEST_ACTIONS", "2").c_str());
    const int kill_at = std::atoi(env("KILN_TEST_KILL_AT", "0").c_str());
    const bool after = env("KILN_TEST_KILL_PHASE", "before") == "after";
    const int interrupt_at = std::atoi(env("KILN_TEST_INTERRUPT_AT", "0").c_str());
    const int sleep_ms = std::atoi(env("KILN_TEST_SLEEP_MS", "0").c_str());
    const std::string probe = env("KILN_TEST_PROBE", "");
    const std::string exclusive = env("KILN_TEST_EXCLUSIVE", "");
    const std::string gate = env("KILN_TEST_GATE", "");
    const std::string gate_stage = env("KILN_TEST_GATE_STAGE", "");  // "": every stage waits at the gate
    for (const char* name : {"alpha", "beta", "gamma", "t-handover"}) {
        LedgerStage::Options o;
        o.name = name;
        o.ledger = ledger;
        o.actions = actions;
        o.hands_over = std::string(name) == "t-handover";
        o.kill_at = kill_at;
        o.kill_after_write = after;
        o.interrupt_at = interrupt_at;
        o.sleep_ms = sleep_ms;
        o.probe = probe;
        o.exclusive = exclusive;
        o.gate = gate_stage.empty() || gate_stage == name ? gate : "";
        o.resource_kind = std::string(name) == "alpha" ? "bmc" : "";
        registry.add(std::make_shared<LedgerStage>(o));
    }
    ParkingStage::Options park;
    park.ledger = ledger;
    park.wait_ms = std::atoi(env("KILN_TEST_PARK_MS", "1000").c_str());
    registry.add(std::make_shared<ParkingStage>(park));
    register_greeter_module(registry, ledger + ".");
}

}  // namespace kiln::test
