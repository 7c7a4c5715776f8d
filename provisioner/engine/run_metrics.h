// A worker's metrics in the Prometheus text exposition format: nodes by
// state and stage, stage durations (a histogram per stage), stage results
// by outcome, and the lease heartbeat's renewals and losses. It listens to
// the engine's events as a sink in front of the printer (forwarding each
// one), so the engine needs no knowledge of it. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "provisioner/engine/engine.h"
#include "provisioner/journal/leases.h"

namespace kiln::engine {

class RunMetrics : public EventSink {
public:
    // `next` receives every event after it is counted (may be null);
    // `counters` reads the store's lease counters at each scrape (may be
    // empty: no lease metrics).
    RunMetrics(EventSink* next, std::function<journal::LeaseCounters()> counters);

    void on_event(const EngineEvent& event) override;
    // The exposition text (text/plain; version=0.0.4).
    std::string render() const;

    // Upper bounds of the duration histogram's buckets, in seconds.
    static const std::vector<double>& buckets();

private:
    using Clock = std::chrono::steady_clock;
    struct Histogram {
        std::vector<int64_t> counts;  // per bucket, not cumulative
        int64_t count = 0;
        double sum = 0;
    };
    EventSink* next_;
    std::function<journal::LeaseCounters()> counters_;
    mutable std::mutex mu_;
    std::map<std::string, std::pair<std::string, std::string>> nodes_;  // node -> state, stage
    std::map<std::string, Clock::time_point> started_;                  // "node\tstage" -> start
    std::map<std::string, Histogram> durations_;                        // stage -> histogram
    std::map<std::pair<std::string, std::string>, int64_t> results_;    // stage, outcome -> count
};

}  // namespace kiln::engine
