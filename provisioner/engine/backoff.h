// Jittered exponential backoff for transient stage errors.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>

namespace kiln::engine {

// Delay before retry number `attempt` (1 = first retry): the exponential
// step initial * 2^(attempt-1), capped at `max`, then drawn uniformly from
// [step/2, step] so that many nodes failing together do not retry together.
std::chrono::milliseconds backoff_delay(int attempt, std::chrono::milliseconds initial, std::chrono::milliseconds max,
                                        std::mt19937_64& rng);

}  // namespace kiln::engine
