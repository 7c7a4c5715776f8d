// The GPU path of kiln-smoke: inventory, NVML health, copy bandwidths, bf16
// GEMM through cuBLASLt, the P2P matrix, NCCL all-reduce across local GPUs
// and VMs, and a short bf16 training loop. Each step returns its checks; the
// caller runs it under the watchdog, so a wedged GPU or NCCL peer becomes a
// failed check.
#include "pipelines/smoke/gpu_checks.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "pipelines/smoke/gpu_health.h"
#include "pipelines/smoke/nvml_loader.h"
#include "pipelines/smoke/ring_allreduce.h"
#include "pipelines/smoke/xid_log.h"

namespace kiln::smoke {

namespace {

struct CudaError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

void cuda_ok(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw CudaError(std::string(what) + ": " + cudaGetErrorString(e));
}
void lt_ok(cublasStatus_t s, const char* what) {
    if (s != CUBLAS_STATUS_SUCCESS) throw CudaError(std::string(what) + ": cuBLASLt status " + std::to_string(int(s)));
}
void nccl_ok(ncclResult_t r, const char* what) {
    if (r != ncclSuccess) throw CudaError(std::string(what) + ": " + ncclGetErrorString(r));
}

int device_count() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
    return n;
}

Check make(const char* name, const char* unit, const char* compare = ">=") {
    Check c;
    c.name = name;
    c.unit = unit;
    c.compare = compare;
    c.verdict = Verdict::Pass;
    return c;
}

std::string fmt2(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f", v);
    return b;
}

// Seconds between two events around `fn`, on `stream`.
template <class F>
double time_on(cudaStream_t stream, F fn) {
    cudaEvent_t a, b;
    cuda_ok(cudaEventCreate(&a), "cudaEventCreate");
    cuda_ok(cudaEventCreate(&b), "cudaEventCreate");
    cuda_ok(cudaEventRecord(a, stream), "cudaEventRecord");
    fn();
    cuda_ok(cudaEventRecord(b, stream), "cudaEventRecord");
    cuda_ok(cudaEventSynchronize(b), "cudaEventSynchronize");
    float ms = 0;
    cuda_ok(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms / 1000.0;
}

std::vector<Check> nvml_checks(GpuOptions::NvmlState* state) {
    std::string err;
    Nvml* nvml = Nvml::instance(&err);
    std::vector<GpuRead> reads;
    if (nvml) {
        for (int d = 0; d < device_count(); ++d) {
            char bus[32] = {};
            GpuRead r{"gpu" + std::to_string(d), {}};
            if (cudaDeviceGetPCIBusId(bus, sizeof bus, d) != cudaSuccess)
                r.health.error = "no PCI bus id from CUDA";
            else {
                r.gpu += std::string(" ") + bus;
                r.health = nvml->health(bus);
            }
            reads.push_back(std::move(r));
        }
    }
    auto read = gpu_state_json(nvml ? "" : err, reads);
    {
        std::lock_guard<std::mutex> lock(state->mu);
        state->value = std::move(read);
    }
    return nvml_health_checks(nvml ? "" : err, reads);
}

std::vector<Check> copy_checks(const GpuOptions& o) {
    Check h2d = make("h2d_bandwidth_gbps", "GB/s"), d2h = make("d2h_bandwidth_gbps", "GB/s");
    double min_h2d = 1e30, min_d2h = 1e30;
    for (int d = 0; d < device_count(); ++d) {
        cuda_ok(cudaSetDevice(d), "cudaSetDevice");
        void *host = nullptr, *dev = nullptr;
        cuda_ok(cudaMallocHost(&host, o.copy_bytes), "cudaMallocHost");
        cuda_ok(cudaMalloc(&dev, o.copy_bytes), "cudaMalloc");
        cudaStream_t s;
        cuda_ok(cudaStreamCreate(&s), "cudaStreamCreate");
        double best_up = 0, best_down = 0;
        for (int it = 0; it < o.iterations; ++it) {
            double t = time_on(
                s, [&] { cuda_ok(cudaMemcpyAsync(dev, host, o.copy_bytes, cudaMemcpyHostToDevice, s), "H2D"); });
            best_up = std::max(best_up, o.copy_bytes / t / 1e9);
            t = time_on(s,
                        [&] { cuda_ok(cudaMemcpyAsync(host, dev, o.copy_bytes, cudaMemcpyDeviceToHost, s), "D2H"); });
            best_down = std::max(best_down, o.copy_bytes / t / 1e9);
        }
        cudaStreamDestroy(s);
        cudaFree(dev);
        cudaFreeHost(host);
        min_h2d = std::min(min_h2d, best_up);
        min_d2h = std::min(min_d2h, best_down);
        h2d.detail += "gpu" + std::to_string(d) + " " + fmt2(best_up) + "; ";
        d2h.detail += "gpu" + std::to_string(d) + " " + fmt2(best_down) + "; ";
    }
    h2d.figure = min_h2d;
    d2h.figure = min_d2h;
    return {h2d, d2h};
}

std::vector<Check> hbm_check(const GpuOptions& o) {
    Check c = make("hbm_bandwidth_gbps", "GB/s");
    double worst = 1e30;
    for (int d = 0; d < device_count(); ++d) {
        cuda_ok(cudaSetDevice(d), "cudaSetDevice");
        void *a = nullptr, *b = nullptr;
        cuda_ok(cudaMalloc(&a, o.copy_bytes), "cudaMalloc");
        cuda_ok(cudaMalloc(&b, o.copy_bytes), "cudaMalloc");
        cuda_ok(cudaMemset(a, 1, o.copy_bytes), "cudaMemset");
        cudaStream_t s;
        cuda_ok(cudaStreamCreate(&s), "cudaStreamCreate");
        double best = 0;
        for (int it = 0; it < o.iterations; ++it) {
            double t =
                time_on(s, [&] { cuda_ok(cudaMemcpyAsync(b, a, o.copy_bytes, cudaMemcpyDeviceToDevice, s), "D2D"); });
            best = std::max(best, 2.0 * o.copy_bytes / t / 1e9);  // read + write
        }
        cudaStreamDestroy(s);
        cudaFree(a);
        cudaFree(b);
        worst = std::min(worst, best);
        c.detail += "gpu" + std::to_string(d) + " " + fmt2(best) + "; ";
    }
    c.figure = worst;
    c.detail += "device-to-device copy, read+write bytes";
    return {c};
}

__global__ void fill_bf16(__nv_bfloat16* p, size_t n, unsigned seed) {
    size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
    if (i < n) p[i] = __float2bfloat16(float((i * 2654435761u + seed) % 1000) / 1000.0f - 0.5f);
}

std::vector<Check> gemm_check(const GpuOptions& o) {
    Check c = make("bf16_gemm_tflops", "TFLOP/s");
    double worst = 1e30;
    const int n = o.gemm_n;
    const size_t elems = size_t(n) * n;
    for (int d = 0; d < device_count(); ++d) {
        cuda_ok(cudaSetDevice(d), "cudaSetDevice");
        __nv_bfloat16 *A, *B, *C;
        cuda_ok(cudaMalloc(&A, elems * 2), "cudaMalloc");
        cuda_ok(cudaMalloc(&B, elems * 2), "cudaMalloc");
        cuda_ok(cudaMalloc(&C, elems * 2), "cudaMalloc");
        fill_bf16<<<(elems + 255) / 256, 256>>>(A, elems, 1);
        fill_bf16<<<(elems + 255) / 256, 256>>>(B, elems, 2);
        cuda_ok(cudaGetLastError(), "fill");
        size_t ws_size = 64u << 20;
        void* ws;
        cuda_ok(cudaMalloc(&ws, ws_size), "cudaMalloc");
        cublasLtHandle_t lt;
        lt_ok(cublasLtCreate(&lt), "cublasLtCreate");
        cublasLtMatmulDesc_t op;
        lt_ok(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "MatmulDescCreate");
        cublasLtMatrixLayout_t la, lb, lc;
        lt_ok(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, n, n, n), "LayoutCreate");
        lt_ok(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, n, n, n), "LayoutCreate");
        lt_ok(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, n, n, n), "LayoutCreate");
        cublasLtMatmulPreference_t pref;
        lt_ok(cublasLtMatmulPreferenceCreate(&pref), "PreferenceCreate");
        lt_ok(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_size,
                                                   sizeof ws_size),
              "PreferenceSetAttribute");
        cublasLtMatmulHeuristicResult_t heur{};
        int found = 0;
        lt_ok(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &heur, &found), "AlgoGetHeuristic");
        if (!found) throw CudaError("cuBLASLt found no bf16 algorithm");
        const float alpha = 1, beta = 0;
        cudaStream_t s;
        cuda_ok(cudaStreamCreate(&s), "cudaStreamCreate");
        auto run = [&] {
            lt_ok(cublasLtMatmul(lt, op, &alpha, A, la, B, lb, &beta, C, lc, C, lc, &heur.algo, ws, ws_size, s),
                  "cublasLtMatmul");
        };
        run();  // warm-up
        double best = 0;
        for (int it = 0; it < o.iterations; ++it) {
            double t = time_on(s, run);
            best = std::max(best, 2.0 * double(n) * n * n / t / 1e12);
        }
        cudaStreamDestroy(s);
        cublasLtMatmulPreferenceDestroy(pref);
        cublasLtMatrixLayoutDestroy(la);
        cublasLtMatrixLayoutDestroy(lb);
        cublasLtMatrixLayoutDestroy(lc);
        cublasLtMatmulDescDestroy(op);
        cublasLtDestroy(lt);
        cudaFree(ws);
        cudaFree(A);
        cudaFree(B);
        cudaFree(C);
        worst = std::min(worst, best);
        c.detail += "gpu" + std::to_string(d) + " " + fmt2(best) + "; ";
    }
    c.figure = worst;
    c.detail += std::to_string(n) + "^3 bf16, fp32 accumulate";
    return {c};
}

std::vector<Check> p2p_check() {
    Check c = make("p2p_missing_pairs", "pairs", "<=");
    const int n = device_count();
    if (n < 2) {
        c.verdict = Verdict::Skip;
        c.detail = "one GPU: no pairs";
        return {c};
    }
    int missing = 0;
    for (int a = 0; a < n; ++a) {
        c.detail += "gpu" + std::to_string(a) + ":";
        for (int b = 0; b < n; ++b) {
            int ok = 1;
            if (a != b) cuda_ok(cudaDeviceCanAccessPeer(&ok, a, b), "cudaDeviceCanAccessPeer");
            if (!ok) ++missing;
            c.detail += a == b ? "x" : (ok ? "1" : "0");
        }
        c.detail += " ";
    }
    c.figure = missing;
    return {c};
}

std::vector<Check> nccl_checks(const GpuOptions& o, TcpRing* ring, Deadline ring_deadline) {
    Check busbw = make("nccl_allreduce_busbw_gbps", "GB/s");
    Check errors = make("allreduce_errors", "elements", "<=");
    const int local = device_count();
    const int nodes = ring ? ring->size() : 1;
    const int me = ring ? ring->rank() : 0;
    const int total = local * nodes;
    if (total < 2) {
        busbw.verdict = errors.verdict = Verdict::Skip;
        busbw.detail = errors.detail = "one GPU in all: nothing to reduce with";
        return {errors, busbw};
    }
    ncclUniqueId id;
    std::string blob;
    if (me == 0) {
        nccl_ok(ncclGetUniqueId(&id), "ncclGetUniqueId");
        blob.assign(reinterpret_cast<const char*>(&id), sizeof id);
    }
    if (ring && nodes > 1) {
        std::string err;
        if (!ring->broadcast(blob, ring_deadline, &err)) throw CudaError("NCCL id bootstrap: " + err);
        if (blob.size() != sizeof id) throw CudaError("NCCL id bootstrap: wrong size");
        std::copy(blob.begin(), blob.end(), reinterpret_cast<char*>(&id));
    }
    const size_t count = o.nccl_bytes / sizeof(float);
    std::vector<ncclComm_t> comms(local);
    std::vector<float*> bufs(local);
    std::vector<cudaStream_t> streams(local);
    std::vector<float> host(count);
    for (int d = 0; d < local; ++d) {
        cuda_ok(cudaSetDevice(d), "cudaSetDevice");
        cuda_ok(cudaMalloc(&bufs[d], count * sizeof(float)), "cudaMalloc");
        cuda_ok(cudaStreamCreate(&streams[d]), "cudaStreamCreate");
        const int rank = me * local + d;
        for (size_t i = 0; i < count; ++i) host[i] = float((rank + 1) * int(i % 97 + 1));
        cuda_ok(cudaMemcpy(bufs[d], host.data(), count * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
    }
    nccl_ok(ncclGroupStart(), "ncclGroupStart");
    for (int d = 0; d < local; ++d) {
        cuda_ok(cudaSetDevice(d), "cudaSetDevice");
        nccl_ok(ncclCommInitRank(&comms[d], total, id, me * local + d), "ncclCommInitRank");
    }
    nccl_ok(ncclGroupEnd(), "ncclGroupEnd");
    auto allreduce = [&] {
        nccl_ok(ncclGroupStart(), "ncclGroupStart");
        for (int d = 0; d < local; ++d)
            nccl_ok(ncclAllReduce(bufs[d], bufs[d], count, ncclFloat, ncclSum, comms[d], streams[d]), "ncclAllReduce");
        nccl_ok(ncclGroupEnd(), "ncclGroupEnd");
        for (int d = 0; d < local; ++d) {
            cuda_ok(cudaSetDevice(d), "cudaSetDevice");
            cuda_ok(cudaStreamSynchronize(streams[d]), "cudaStreamSynchronize");
        }
    };
    allreduce();
    const float rank_sum = float(total * (total + 1) / 2);
    size_t wrong = 0;
    for (int d = 0; d < local; ++d) {
        cuda_ok(cudaMemcpy(host.data(), bufs[d], count * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
        for (size_t i = 0; i < count; ++i)
            if (host[i] != rank_sum * float(i % 97 + 1)) ++wrong;
    }
    errors.figure = double(wrong);
    errors.detail = std::to_string(count) + " float32 elements over " + std::to_string(total) + " GPUs";
    double best = 0;
    for (int it = 0; it < o.iterations; ++it) {
        auto t0 = std::chrono::steady_clock::now();
        allreduce();
        double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best = std::max(best, count * sizeof(float) / t / 1e9 * allreduce_bus_factor(total));
    }
    busbw.figure = best;
    busbw.detail = std::to_string(o.nccl_bytes) + " bytes over " + std::to_string(total) + " GPUs in " +
                   std::to_string(nodes) + " VM(s), busbw = algbw * 2(n-1)/n";
    for (int d = 0; d < local; ++d) {
        ncclCommDestroy(comms[d]);
        cudaFree(bufs[d]);
        cudaStreamDestroy(streams[d]);
    }
    return {errors, busbw};
}

// A 16-64-1 tanh MLP, bf16 weights and activations, fp32 gradients: one
// thread per sample forward and backward, atomics for the gradient sums.
constexpr int kIn = 16, kHid = 64, kSamples = 4096;

__global__ void mlp_step(const float* X, const float* Y, const __nv_bfloat16* W1, const __nv_bfloat16* W2, float* gW1,
                         float* gW2, float* loss) {
    int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= kSamples) return;
    const float* x = X + s * kIn;
    float h[kHid];
    float out = 0;
    for (int j = 0; j < kHid; ++j) {
        float a = 0;
        for (int i = 0; i < kIn; ++i) a += __bfloat162float(W1[j * kIn + i]) * x[i];
        h[j] = __bfloat162float(__float2bfloat16(tanhf(a)));
        out += __bfloat162float(W2[j]) * h[j];
    }
    float d = out - Y[s];
    atomicAdd(loss, d * d / kSamples);
    float g = 2 * d / kSamples;
    for (int j = 0; j < kHid; ++j) {
        atomicAdd(&gW2[j], g * h[j]);
        float gh = g * __bfloat162float(W2[j]) * (1 - h[j] * h[j]);
        for (int i = 0; i < kIn; ++i) atomicAdd(&gW1[j * kIn + i], gh * x[i]);
    }
}

__global__ void sgd(__nv_bfloat16* W, float* master, float* g, int n, float lr) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    master[i] -= lr * g[i];
    W[i] = __float2bfloat16(master[i]);
    g[i] = 0;
}

std::vector<Check> training_check(const GpuOptions& o) {
    Check c = make("loss_drop_fraction", "fraction");
    cuda_ok(cudaSetDevice(0), "cudaSetDevice");
    // Data and initial weights from a fixed-seed generator on the host.
    unsigned long long s = o.seed * 0x9E3779B97F4A7C15ull + 1;
    auto uni = [&] {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        return float((s * 0x2545F4914F6CDD1Dull) >> 40) / float(1 << 24) * 2 - 1;
    };
    std::vector<float> X(kSamples * kIn), Y(kSamples), w(kIn), W1(kHid * kIn), W2(kHid);
    for (auto& v : w) v = uni();
    for (int i = 0; i < kSamples; ++i) {
        float dot = 0;
        for (int k = 0; k < kIn; ++k) dot += (X[i * kIn + k] = uni()) * w[k] * 0.5f;
        Y[i] = std::sin(dot);
    }
    for (auto& v : W1) v = uni() * 0.3f;
    for (auto& v : W2) v = uni() * 0.3f;
    std::vector<__nv_bfloat16> W1b(W1.size()), W2b(W2.size());
    for (size_t i = 0; i < W1.size(); ++i) W1b[i] = __float2bfloat16(W1[i]);
    for (size_t i = 0; i < W2.size(); ++i) W2b[i] = __float2bfloat16(W2[i]);
    float *dX, *dY, *dM1, *dM2, *dG1, *dG2, *dLoss;
    __nv_bfloat16 *dW1, *dW2;
    cuda_ok(cudaMalloc(&dX, X.size() * 4), "cudaMalloc");
    cuda_ok(cudaMalloc(&dY, Y.size() * 4), "cudaMalloc");
    cuda_ok(cudaMalloc(&dM1, W1.size() * 4), "cudaMalloc");
    cuda_ok(cudaMalloc(&dM2, W2.size() * 4), "cudaMalloc");
    cuda_ok(cudaMalloc(&dG1, W1.size() * 4), "cudaMalloc");
    cuda_ok(cudaMalloc(&dG2, W2.size() * 4), "cudaMalloc");
    cuda_ok(cudaMalloc(&dLoss, 4), "cudaMalloc");
    cuda_ok(cudaMalloc(&dW1, W1.size() * 2), "cudaMalloc");
    cuda_ok(cudaMalloc(&dW2, W2.size() * 2), "cudaMalloc");
    cuda_ok(cudaMemcpy(dX, X.data(), X.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
    cuda_ok(cudaMemcpy(dY, Y.data(), Y.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
    cuda_ok(cudaMemcpy(dM1, W1.data(), W1.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
    cuda_ok(cudaMemcpy(dM2, W2.data(), W2.size() * 4, cudaMemcpyHostToDevice), "cudaMemcpy");
    cuda_ok(cudaMemcpy(dW1, W1b.data(), W1b.size() * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
    cuda_ok(cudaMemcpy(dW2, W2b.data(), W2b.size() * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
    cuda_ok(cudaMemset(dG1, 0, W1.size() * 4), "cudaMemset");
    cuda_ok(cudaMemset(dG2, 0, W2.size() * 4), "cudaMemset");
    float first = 0, last = 0;
    for (int step = 0; step < o.train_steps; ++step) {
        cuda_ok(cudaMemset(dLoss, 0, 4), "cudaMemset");
        mlp_step<<<(kSamples + 127) / 128, 128>>>(dX, dY, dW1, dW2, dG1, dG2, dLoss);
        sgd<<<(kHid * kIn + 255) / 256, 256>>>(dW1, dM1, dG1, kHid * kIn, 0.2f);
        sgd<<<1, kHid>>>(dW2, dM2, dG2, kHid, 0.2f);
        float loss = 0;
        cuda_ok(cudaMemcpy(&loss, dLoss, 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
        if (step == 0) first = loss;
        last = loss;
    }
    for (void* p :
         {(void*)dX, (void*)dY, (void*)dM1, (void*)dM2, (void*)dG1, (void*)dG2, (void*)dLoss, (void*)dW1, (void*)dW2})
        cudaFree(p);
    c.figure = first > 0 ? 1.0 - last / first : 0;
    char b[160];
    std::snprintf(b, sizeof b, "16-64-1 MLP, bf16, seed %u, %d steps on gpu0: loss %.5f -> %.5f", o.seed, o.train_steps,
                  first, last);
    c.detail = b;
    if (!std::isfinite(last)) c.verdict = Verdict::Fail;
    return {c};
}

}  // namespace

GpuInventory gpu_inventory() {
    GpuInventory inv;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        inv.error = std::string("no GPU: ") + cudaGetErrorString(e);
        return inv;
    }
    // A device CUDA lists but cannot read is not a usable GPU.
    for (int d = 0; d < n; ++d) {
        cudaDeviceProp p{};
        cudaError_t pe = cudaGetDeviceProperties(&p, d);
        if (pe == cudaSuccess)
            inv.names.push_back(p.name);
        else
            inv.error += (inv.error.empty() ? "" : "; ") + std::string("gpu") + std::to_string(d) + ": " +
                         cudaGetErrorString(pe);
    }
    inv.count = static_cast<int>(inv.names.size());
    if (!inv.names.empty()) inv.model = inv.names[0];
    if (n == 0) inv.error = "no GPU";
    return inv;
}

std::vector<GpuCheckStep> gpu_check_steps(const GpuOptions& o, TcpRing* ring, Deadline ring_deadline) {
    return {
        {{"row_remaps_pending", "clock_slowdown_reasons", "retired_pages_pending", "retired_pages",
          "ecc_uncorrected_volatile", "ecc_uncorrected_aggregate", "xid_events"},
         [state = o.nvml_state] {
             auto checks = nvml_checks(state.get());
             std::string log, err;
             const bool read = read_kernel_log(&log, &err);
             checks.push_back(xid_check(read ? parse_xid_events(log) : std::vector<XidEvent>{}, read ? "" : err));
             return checks;
         }},
        {{"h2d_bandwidth_gbps", "d2h_bandwidth_gbps"}, [o] { return copy_checks(o); }},
        {{"hbm_bandwidth_gbps"}, [o] { return hbm_check(o); }},
        {{"bf16_gemm_tflops"}, [o] { return gemm_check(o); }},
        {{"p2p_missing_pairs"}, [] { return p2p_check(); }},
        {{"allreduce_errors", "nccl_allreduce_busbw_gbps"},
         [o, ring, ring_deadline] { return nccl_checks(o, ring, ring_deadline); }},
        {{"loss_drop_fraction"}, [o] { return training_check(o); }},
    };
}

}  // namespace kiln::smoke
