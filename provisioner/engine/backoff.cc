#include "provisioner/engine/backoff.h"

#include <algorithm>

namespace kiln::engine {

std::chrono::milliseconds backoff_delay(int attempt, std::chrono::milliseconds initial, std::chrono::milliseconds max,
                                        std::mt19937_64& rng) {
    if (attempt < 1) attempt = 1;
    int64_t step = std::max<int64_t>(initial.count(), 1);
    const int64_t cap = std::max<int64_t>(max.count(), step);
    for (int i = 1; i < attempt && step < cap; ++i) step = std::min(cap, step * 2);
    step = std::min(step, cap);
    std::uniform_int_distribution<int64_t> dist(step / 2, step);
    return std::chrono::milliseconds(dist(rng));
}

}  // namespace kiln::engine
