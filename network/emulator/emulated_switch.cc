#include "network/emulator/emulated_switch.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "network/emulator/eapi_service.h"
#include "network/emulator/nvue_service.h"
#include "provisioner/core/base64.h"

namespace kiln::network::emulator {

namespace {

using nlohmann::json;

// Constant-time for equal lengths: the emulator should not teach timing leaks.
bool same(const std::string& a, const std::string& b) {
    if (a.size() != b.size()) return false;
    unsigned char d = 0;
    for (size_t i = 0; i < a.size(); ++i) d |= static_cast<unsigned char>(a[i] ^ b[i]);
    return d == 0;
}

SwitchResponse json_reply(int status, const json& body) {
    return {status, body.dump(), "application/json"};
}

}  // namespace

Result<Faults> parse_faults(const std::string& spec) {
    Faults f;
    size_t start = 0;
    while (start <= spec.size()) {
        size_t end = spec.find(',', start);
        if (end == std::string::npos) end = spec.size();
        const std::string item = spec.substr(start, end - start);
        start = end + 1;
        if (item.empty()) continue;
        const auto eq = item.find('=');
        const std::string key = item.substr(0, eq);
        const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
        try {
            if (key == "delay") {
                f.delay_ms = std::stoi(value);
            } else if (key == "fail-applies") {
                f.fail_applies = value == "all" ? -1 : std::stoi(value);
            } else {
                return make_error("emulator", "emulator.bad_fault",
                                  fmt::format("unknown fault '{}'; expected delay=MS or fail-applies=N|all", key));
            }
        } catch (...) {
            return make_error("emulator", "emulator.bad_fault", fmt::format("fault '{}': expected a number", item));
        }
    }
    return f;
}

Result<std::unique_ptr<EmulatedSwitch>> EmulatedSwitch::open(const SwitchSpec& spec) {
    std::unique_ptr<EmulatedSwitch> sw(new EmulatedSwitch(spec));
    if (spec.os == "nvue")
        sw->service_ = std::make_unique<NvueService>(spec.user);
    else if (spec.os == "eos") {
        const std::string model = spec.model.empty() ? kDefaultEosModel : spec.model;
        if (!find_eos_model(model)) {
            std::string known;
            for (const auto& m : emulated_eos_models()) known += std::string(known.empty() ? "" : ", ") + m.name;
            return make_error(
                "emulator", "emulator.bad_model",
                fmt::format("switch {}: EOS model '{}' is not emulated here ({})", spec.name, model, known));
        }
        sw->service_ = std::make_unique<EapiService>(model);
    } else
        return make_error("emulator", "emulator.bad_os",
                          fmt::format("switch {}: os '{}' is not emulated here (nvue, eos)", spec.name, spec.os));
    if (spec.os != "eos" && !spec.model.empty())
        return make_error("emulator", "emulator.bad_model",
                          fmt::format("switch {}: a model is for eos switches, not {}", spec.name, spec.os));
    sw->faults_ = spec.faults;
    if (!spec.state_file.empty() && std::filesystem::exists(spec.state_file)) {
        std::ifstream in(spec.state_file);
        if (!in) return make_error("emulator", "emulator.state_unreadable", "cannot read " + spec.state_file);
        std::stringstream ss;
        ss << in.rdbuf();
        auto doc = json::parse(ss.str(), nullptr, false);
        if (doc.is_discarded() || !doc.is_object() || doc.value("os", "") != spec.os || !doc.contains("running"))
            return make_error("emulator", "emulator.state_malformed",
                              fmt::format("{} is not a {} switch state file", spec.state_file, spec.os));
        if (auto s = sw->service_->restore(doc["running"]); !s) return s.error();
    }
    return sw;
}

Status EmulatedSwitch::save() const {
    if (spec_.state_file.empty()) return ok_status();
    // Temp file and rename: a crash leaves the old state or the new one.
    const std::string tmp = spec_.state_file + ".tmp";
    {
        std::ofstream out(tmp, std::ios::trunc);
        out << json{{"os", spec_.os}, {"running", service_->running()}}.dump(2) << "\n";
        out.flush();
        if (!out) return make_error("emulator", "emulator.state_write_failed", "cannot write " + tmp);
    }
    if (std::rename(tmp.c_str(), spec_.state_file.c_str()) != 0)
        return make_error("emulator", "emulator.state_write_failed", "cannot rename " + tmp);
    return ok_status();
}

bool EmulatedSwitch::authorised(const SwitchRequest& request) const {
    return same(request.authorization, "Basic " + base64_encode(spec_.user + ":" + spec_.password));
}

bool EmulatedSwitch::allow_apply() {
    if (faults_.fail_applies == 0) return true;
    if (faults_.fail_applies > 0) --faults_.fail_applies;
    return false;
}

json EmulatedSwitch::running() const {
    std::lock_guard<std::mutex> lock(mu_);
    return service_->running();
}

Status EmulatedSwitch::change_behind_back(const json& change) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto s = service_->change_behind_back(change); !s) return s;
    return save();
}

void EmulatedSwitch::set_faults(const Faults& f) {
    std::lock_guard<std::mutex> lock(mu_);
    faults_ = f;
}

Faults EmulatedSwitch::faults() const {
    std::lock_guard<std::mutex> lock(mu_);
    return faults_;
}

SwitchResponse EmulatedSwitch::handle(const SwitchRequest& request) {
    if (!authorised(request)) return json_reply(401, {{"error", "authentication required"}});
    const std::string control = "/_emulator/";
    if (request.path.rfind(control, 0) == 0) {
        const std::string what = request.path.substr(control.size());
        if (what == "faults") {
            if (request.method == "GET") {
                auto f = faults();
                return json_reply(200, {{"delay_ms", f.delay_ms}, {"fail_applies", f.fail_applies}});
            }
            if (request.method != "PUT") return json_reply(405, {{"error", "GET or PUT"}});
            auto body = json::parse(request.body, nullptr, false);
            if (body.is_discarded() || !body.is_object()) return json_reply(400, {{"error", "expected an object"}});
            Faults f;
            f.delay_ms = body.value("delay_ms", 0);
            f.fail_applies = body.value("fail_applies", 0);
            set_faults(f);
            return json_reply(200, {{"delay_ms", f.delay_ms}, {"fail_applies", f.fail_applies}});
        }
        if (what == "running") {
            if (request.method == "GET") return json_reply(200, running());
            if (request.method != "POST") return json_reply(405, {{"error", "GET or POST"}});
            auto body = json::parse(request.body, nullptr, false);
            if (body.is_discarded()) return json_reply(400, {{"error", "body is not JSON"}});
            if (auto s = change_behind_back(body); !s) return json_reply(400, {{"error", s.error().message}});
            return json_reply(200, running());
        }
        return json_reply(404, {{"error", "no such control resource"}});
    }
    const int delay = faults().delay_ms;
    // Outside the lock: a slow answer must not hold up the control path.
    if (delay > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    std::lock_guard<std::mutex> lock(mu_);
    const json before = service_->running();
    SwitchResponse r = service_->handle(request, *this);
    if (service_->running() != before) {
        if (auto s = save(); !s) return json_reply(500, {{"error", s.error().message}});
    }
    return r;
}

}  // namespace kiln::network::emulator
