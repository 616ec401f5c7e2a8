#include "posenc/kernels/dpb.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "posenc/error.h"

namespace posenc::kernels {
namespace {

// Below this many multiply-adds a call stays on one thread (thread start-up dominates).
constexpr int64_t kParallelWork = int64_t{1} << 18;

int threads_for(int64_t work) noexcept { return work < kParallelWork ? 1 : std::max(1, omp_get_max_threads()); }

// Thread t of n takes items [begin, end): contiguous chunks, so the per-thread
// sums are reduced in a fixed order for a given thread count.
struct Chunk {
  int64_t begin, end;
};
Chunk chunk_of(int64_t items, int t, int n) noexcept { return {items * t / n, items * (t + 1) / n}; }

inline double sigmoid(double u) noexcept { return 1.0 / (1.0 + std::exp(-u)); }

template <class T>
void require_weight(const T* p, const char* op, const char* name) {
  require(p != nullptr, op, name, " must not be null");
}

// ---- DPB

// The MLP of one column, activations kept for the backward. Sizes [depth, hidden].
struct DpbColumn {
  std::vector<double> u;        // SiLU input (after the norm)
  std::vector<double> a;        // SiLU output
  std::vector<double> n;        // normalised pre-activation (norm only)
  std::vector<double> inv_std;  // [depth] (norm only)
  std::vector<double> z;        // [hidden] scratch: one layer's pre-activation
  explicit DpbColumn(const DpbParams& p)
      : u(static_cast<size_t>(p.depth * p.hidden)),
        a(u.size()),
        n(p.norm ? u.size() : 0),
        inv_std(p.norm ? static_cast<size_t>(p.depth) : 0),
        z(static_cast<size_t>(p.hidden)) {}
};

// Runs layers 0 .. depth-1 for input x, filling col (u, a, n, inv_std).
template <class T>
void dpb_hidden_layers(const DpbParams& p, const DpbWeights<T>& w, double x, DpbColumn& col) noexcept {
  const int64_t hd = p.hidden;
  double* z = col.z.data();
  for (int64_t l = 0; l < p.depth; ++l) {
    if (l == 0) {
      for (int64_t k = 0; k < hd; ++k)
        z[k] = static_cast<double>(w.in_weight[k]) * x + static_cast<double>(w.in_bias[k]);
    } else {
      const T* W = w.hidden_weight + (l - 1) * hd * hd;
      const T* b = w.hidden_bias + (l - 1) * hd;
      const double* prev = col.a.data() + (l - 1) * hd;
      for (int64_t k = 0; k < hd; ++k) {
        double s = static_cast<double>(b[k]);
        const T* row = W + k * hd;
        for (int64_t m = 0; m < hd; ++m) s += static_cast<double>(row[m]) * prev[m];
        z[k] = s;
      }
    }
    double* u = col.u.data() + l * hd;
    if (p.norm) {
      double mean = 0.0;
      for (int64_t k = 0; k < hd; ++k) mean += z[k];
      mean /= static_cast<double>(hd);
      double var = 0.0;  // biased, as LayerNorm
      for (int64_t k = 0; k < hd; ++k) var += (z[k] - mean) * (z[k] - mean);
      const double inv = 1.0 / std::sqrt(var / static_cast<double>(hd) + kDpbNormEps);
      col.inv_std[static_cast<size_t>(l)] = inv;
      double* n = col.n.data() + l * hd;
      const T* gamma = w.norm_weight + l * hd;
      const T* beta = w.norm_bias + l * hd;
      for (int64_t k = 0; k < hd; ++k) {
        n[k] = (z[k] - mean) * inv;
        u[k] = static_cast<double>(gamma[k]) * n[k] + static_cast<double>(beta[k]);
      }
    } else {
      for (int64_t k = 0; k < hd; ++k) u[k] = z[k];
    }
    double* a = col.a.data() + l * hd;
    for (int64_t k = 0; k < hd; ++k) a[k] = u[k] * sigmoid(u[k]);
  }
}

void check_dpb_weights(const DpbParams& p, const auto& w, const char* op) {
  require_weight(w.in_weight, op, "in_weight");
  require_weight(w.in_bias, op, "in_bias");
  if (p.depth > 1) {
    require_weight(w.hidden_weight, op, "hidden_weight");
    require_weight(w.hidden_bias, op, "hidden_bias");
  }
  if (p.norm) {
    require_weight(w.norm_weight, op, "norm_weight");
    require_weight(w.norm_bias, op, "norm_bias");
  }
  require_weight(w.out_weight, op, "out_weight");
  require_weight(w.out_bias, op, "out_bias");
}

// Offsets of each gradient inside one flat accumulator.
struct DpbLayout {
  int64_t in_weight, in_bias, hidden_weight, hidden_bias, norm_weight, norm_bias, out_weight, out_bias, total;
  explicit DpbLayout(const DpbParams& p) {
    const int64_t hd = p.hidden, L = p.depth;
    in_weight = 0;
    in_bias = in_weight + hd;
    hidden_weight = in_bias + hd;
    hidden_bias = hidden_weight + (L - 1) * hd * hd;
    norm_weight = hidden_bias + (L - 1) * hd;
    norm_bias = norm_weight + (p.norm ? L * hd : 0);
    out_weight = norm_bias + (p.norm ? L * hd : 0);
    out_bias = out_weight + p.num_heads * hd;
    total = out_bias + p.num_heads;
  }
};

// ---- CPB

int64_t cpb_points(const CpbParams& p) noexcept { return cpb_rows(p) * cpb_cols(p); }

// The log-spaced (c_y, c_x) of grid point (row, col), Swin's (dy, dx) = (H-1-row, W-1-col).
struct CpbInput {
  double cy, cx;
};
CpbInput cpb_input(const CpbParams& p, int64_t row, int64_t col) noexcept {
  const int64_t ny = p.pretrained_height > 0 ? p.pretrained_height : p.height;
  const int64_t nx = p.pretrained_width > 0 ? p.pretrained_width : p.width;
  return {cpb_coordinate(p.height - 1 - row, ny), cpb_coordinate(p.width - 1 - col, nx)};
}

void check_cpb_weights(const auto& w, const char* op) {
  require_weight(w.fc1_weight, op, "fc1_weight");
  require_weight(w.fc1_bias, op, "fc1_bias");
  require_weight(w.fc2_weight, op, "fc2_weight");
}

}  // namespace

// ---------------------------------------------------------------------------
// DPB

double dpb_input(int64_t r, bool log_distance) noexcept {
  const double x = static_cast<double>(r);
  if (!log_distance) return x;
  // sign(0) = 0 and log1p(0) = 0 agree at r = 0.
  return std::copysign(std::log1p(std::abs(x)), x);
}

int64_t dpb_columns(const DpbParams& params) noexcept {
  return params.q_len > 0 && params.k_len > 0 ? params.q_len + params.k_len - 1 : 0;
}

void validate(const DpbParams& params, const char* op) {
  require(params.num_heads >= 1, op, "num_heads must be >= 1, got ", params.num_heads);
  require(params.hidden >= 1, op, "hidden must be >= 1, got ", params.hidden);
  require(params.depth >= 1, op, "depth must be >= 1, got ", params.depth);
  require(params.q_len >= 0, op, "q_len must be >= 0, got ", params.q_len);
  require(params.k_len >= 0, op, "k_len must be >= 0, got ", params.k_len);
}

// out: [H, C], C = q_len + k_len - 1; column c holds r = i' - j = k_len - 1 - c.
template <class T>
void dpb_offset_bias(const DpbParams& params, const DpbWeights<T>& weights, T* out, const char* op) {
  validate(params, op);
  const int64_t columns = dpb_columns(params);
  if (columns == 0) return;
  check_dpb_weights(params, weights, op);
  require(out != nullptr, op, "out must not be null");
  const int64_t hd = params.hidden, heads = params.num_heads;
  const int64_t work = columns * hd * (hd * (params.depth - 1) + heads + 1);
  const int threads = threads_for(work);
  // Scratch allocated here: nothing may throw inside the parallel region.
  std::vector<DpbColumn> scratch(static_cast<size_t>(threads), DpbColumn(params));
#pragma omp parallel num_threads(threads)
  {
    DpbColumn& col = scratch[static_cast<size_t>(omp_get_thread_num())];
    const Chunk chunk = chunk_of(columns, omp_get_thread_num(), omp_get_num_threads());
    for (int64_t c = chunk.begin; c < chunk.end; ++c) {
      dpb_hidden_layers(params, weights, dpb_input(params.k_len - 1 - c, params.log_distance), col);
      const double* a = col.a.data() + (params.depth - 1) * hd;
      for (int64_t h = 0; h < heads; ++h) {
        const T* row = weights.out_weight + h * hd;
        double s = static_cast<double>(weights.out_bias[h]);
        for (int64_t k = 0; k < hd; ++k) s += static_cast<double>(row[k]) * a[k];
        out[h * columns + c] = static_cast<T>(s);
      }
    }
  }
}

template <class T>
void dpb_offset_bias_backward(const DpbParams& params, const DpbWeights<T>& weights, const T* grad,
                              const DpbGradients<T>& grads, const char* op) {
  validate(params, op);
  check_dpb_weights(params, grads, op);
  const int64_t columns = dpb_columns(params);
  if (columns > 0) {
    check_dpb_weights(params, weights, op);
    require(grad != nullptr, op, "grad must not be null");
  }
  const DpbLayout at(params);
  const int64_t hd = params.hidden, heads = params.num_heads, L = params.depth;
  const int64_t work = columns * hd * (2 * hd * (L - 1) + 2 * heads + 1);
  const int threads = columns > 0 ? threads_for(work) : 1;
  // Per-thread sums and scratch, allocated here: nothing may throw inside the parallel region.
  std::vector<std::vector<double>> sums(static_cast<size_t>(threads),
                                        std::vector<double>(static_cast<size_t>(at.total)));
  std::vector<DpbColumn> scratch(static_cast<size_t>(threads), DpbColumn(params));
  std::vector<std::vector<double>> da_all(static_cast<size_t>(threads), std::vector<double>(static_cast<size_t>(hd)));
  std::vector<std::vector<double>> dz_all = da_all;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    std::vector<double>& acc = sums[static_cast<size_t>(t)];
    DpbColumn& col = scratch[static_cast<size_t>(t)];
    std::vector<double>& da = da_all[static_cast<size_t>(t)];
    std::vector<double>& dz = dz_all[static_cast<size_t>(t)];
    const Chunk chunk = chunk_of(columns, t, omp_get_num_threads());
    for (int64_t c = chunk.begin; c < chunk.end; ++c) {
      const double x = dpb_input(params.k_len - 1 - c, params.log_distance);
      dpb_hidden_layers(params, weights, x, col);
      // Output layer: b_h = W_out a + b_out.
      const double* a_last = col.a.data() + (L - 1) * hd;
      std::fill(da.begin(), da.end(), 0.0);
      for (int64_t h = 0; h < heads; ++h) {
        const double g = static_cast<double>(grad[h * columns + c]);
        if (g == 0.0) continue;
        acc[static_cast<size_t>(at.out_bias + h)] += g;
        double* gw = acc.data() + at.out_weight + h * hd;
        const T* w_row = weights.out_weight + h * hd;
        for (int64_t k = 0; k < hd; ++k) {
          gw[k] += g * a_last[k];
          da[static_cast<size_t>(k)] += static_cast<double>(w_row[k]) * g;
        }
      }
      for (int64_t l = L - 1; l >= 0; --l) {
        const double* u = col.u.data() + l * hd;
        // SiLU'(u) = s (1 + u (1 - s)), s = sigmoid(u).
        for (int64_t k = 0; k < hd; ++k) {
          const double s = sigmoid(u[k]);
          dz[static_cast<size_t>(k)] = da[static_cast<size_t>(k)] * s * (1.0 + u[k] * (1.0 - s));
        }
        if (params.norm) {
          const double* n = col.n.data() + l * hd;
          const T* gamma = weights.norm_weight + l * hd;
          double* g_gamma = acc.data() + at.norm_weight + l * hd;
          double* g_beta = acc.data() + at.norm_bias + l * hd;
          double mean_dn = 0.0, mean_dn_n = 0.0;
          for (int64_t k = 0; k < hd; ++k) {
            const double du = dz[static_cast<size_t>(k)];
            g_gamma[k] += du * n[k];
            g_beta[k] += du;
            const double dn = du * static_cast<double>(gamma[k]);
            dz[static_cast<size_t>(k)] = dn;
            mean_dn += dn;
            mean_dn_n += dn * n[k];
          }
          mean_dn /= static_cast<double>(hd);
          mean_dn_n /= static_cast<double>(hd);
          const double inv = col.inv_std[static_cast<size_t>(l)];
          for (int64_t k = 0; k < hd; ++k) {
            dz[static_cast<size_t>(k)] = inv * (dz[static_cast<size_t>(k)] - mean_dn - n[k] * mean_dn_n);
          }
        }
        if (l == 0) {
          for (int64_t k = 0; k < hd; ++k) {
            acc[static_cast<size_t>(at.in_weight + k)] += dz[static_cast<size_t>(k)] * x;
            acc[static_cast<size_t>(at.in_bias + k)] += dz[static_cast<size_t>(k)];
          }
        } else {
          const double* prev = col.a.data() + (l - 1) * hd;
          const T* W = weights.hidden_weight + (l - 1) * hd * hd;
          double* gW = acc.data() + at.hidden_weight + (l - 1) * hd * hd;
          double* gb = acc.data() + at.hidden_bias + (l - 1) * hd;
          std::fill(da.begin(), da.end(), 0.0);
          for (int64_t k = 0; k < hd; ++k) {
            const double g = dz[static_cast<size_t>(k)];
            gb[k] += g;
            double* g_row = gW + k * hd;
            const T* w_row = W + k * hd;
            for (int64_t m = 0; m < hd; ++m) {
              g_row[m] += g * prev[m];
              da[static_cast<size_t>(m)] += static_cast<double>(w_row[m]) * g;
            }
          }
        }
      }
    }
  }
  // Reduce in thread order, round once.
  auto write = [&](T* dst, int64_t offset, int64_t count) {
    if (count == 0) return;
    for (int64_t e = 0; e < count; ++e) {
      double s = 0.0;
      for (const std::vector<double>& acc : sums) s += acc[static_cast<size_t>(offset + e)];
      dst[e] = static_cast<T>(s);
    }
  };
  write(grads.in_weight, at.in_weight, hd);
  write(grads.in_bias, at.in_bias, hd);
  write(grads.hidden_weight, at.hidden_weight, (L - 1) * hd * hd);
  write(grads.hidden_bias, at.hidden_bias, (L - 1) * hd);
  if (params.norm) {
    write(grads.norm_weight, at.norm_weight, L * hd);
    write(grads.norm_bias, at.norm_bias, L * hd);
  }
  write(grads.out_weight, at.out_weight, heads * hd);
  write(grads.out_bias, at.out_bias, heads);
}

// ---------------------------------------------------------------------------
// CPB

double cpb_coordinate(int64_t t, int64_t extent) noexcept {
  if (extent <= 1) return 0.0;  // only t = 0 exists; Swin's 0/0 would be NaN
  const double v = 8.0 * static_cast<double>(t) / static_cast<double>(extent - 1);
  return std::copysign(std::log2(1.0 + std::abs(v)), v) / 3.0;  // log2(8) = 3
}

int64_t cpb_rows(const CpbParams& params) noexcept { return 2 * params.height - 1; }
int64_t cpb_cols(const CpbParams& params) noexcept { return 2 * params.width - 1; }

void validate(const CpbParams& params, const char* op) {
  require(params.num_heads >= 1, op, "num_heads must be >= 1, got ", params.num_heads);
  require(params.hidden >= 1, op, "hidden must be >= 1, got ", params.hidden);
  require(params.height >= 1, op, "height must be >= 1, got ", params.height);
  require(params.width >= 1, op, "width must be >= 1, got ", params.width);
  // A pretrained window of 1 would divide by 0, as a negative one makes no sense.
  require(params.pretrained_height == 0 || params.pretrained_height >= 2, op,
          "pretrained_height must be 0 (the grid's) or >= 2, got ", params.pretrained_height);
  require(params.pretrained_width == 0 || params.pretrained_width >= 2, op,
          "pretrained_width must be 0 (the grid's) or >= 2, got ", params.pretrained_width);
}

// out: [H, rows, cols] = 16 sigmoid(W2 ReLU(W1 c + b1)).
template <class T>
void cpb_grid_bias(const CpbParams& params, const CpbWeights<T>& weights, T* out, const char* op) {
  validate(params, op);
  check_cpb_weights(weights, op);
  require(out != nullptr, op, "out must not be null");
  const int64_t hd = params.hidden, heads = params.num_heads, points = cpb_points(params), cols = cpb_cols(params);
  const int threads = threads_for(points * hd * (heads + 2));
  std::vector<std::vector<double>> hidden(static_cast<size_t>(threads), std::vector<double>(static_cast<size_t>(hd)));
#pragma omp parallel num_threads(threads)
  {
    std::vector<double>& a = hidden[static_cast<size_t>(omp_get_thread_num())];
    const Chunk chunk = chunk_of(points, omp_get_thread_num(), omp_get_num_threads());
    for (int64_t pt = chunk.begin; pt < chunk.end; ++pt) {
      const CpbInput in = cpb_input(params, pt / cols, pt % cols);
      for (int64_t k = 0; k < hd; ++k) {
        const double z = static_cast<double>(weights.fc1_weight[2 * k]) * in.cy +
                         static_cast<double>(weights.fc1_weight[2 * k + 1]) * in.cx +
                         static_cast<double>(weights.fc1_bias[k]);
        a[static_cast<size_t>(k)] = z > 0.0 ? z : 0.0;
      }
      for (int64_t h = 0; h < heads; ++h) {
        const T* row = weights.fc2_weight + h * hd;
        double s = 0.0;
        for (int64_t k = 0; k < hd; ++k) s += static_cast<double>(row[k]) * a[static_cast<size_t>(k)];
        out[h * points + pt] = static_cast<T>(16.0 * sigmoid(s));
      }
    }
  }
}

template <class T>
void cpb_grid_bias_backward(const CpbParams& params, const CpbWeights<T>& weights, const T* grad,
                            const CpbGradients<T>& grads, const char* op) {
  validate(params, op);
  check_cpb_weights(weights, op);
  check_cpb_weights(grads, op);
  require(grad != nullptr, op, "grad must not be null");
  const int64_t hd = params.hidden, heads = params.num_heads, points = cpb_points(params), cols = cpb_cols(params);
  // Accumulator layout: fc1_weight [hd, 2], fc1_bias [hd], fc2_weight [heads, hd].
  const int64_t total = 3 * hd + heads * hd;
  const int threads = threads_for(points * hd * (2 * heads + 4));
  // Allocated here: nothing may throw inside the parallel region.
  std::vector<std::vector<double>> sums(static_cast<size_t>(threads), std::vector<double>(static_cast<size_t>(total)));
  std::vector<std::vector<double>> a_all(static_cast<size_t>(threads), std::vector<double>(static_cast<size_t>(hd)));
  std::vector<std::vector<double>> da_all = a_all;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    std::vector<double>& acc = sums[static_cast<size_t>(t)];
    double* g_fc1 = acc.data();
    double* g_b1 = acc.data() + 2 * hd;
    double* g_fc2 = acc.data() + 3 * hd;
    std::vector<double>& a = a_all[static_cast<size_t>(t)];
    std::vector<double>& da = da_all[static_cast<size_t>(t)];
    const Chunk chunk = chunk_of(points, t, omp_get_num_threads());
    for (int64_t pt = chunk.begin; pt < chunk.end; ++pt) {
      const CpbInput in = cpb_input(params, pt / cols, pt % cols);
      for (int64_t k = 0; k < hd; ++k) {
        const double z = static_cast<double>(weights.fc1_weight[2 * k]) * in.cy +
                         static_cast<double>(weights.fc1_weight[2 * k + 1]) * in.cx +
                         static_cast<double>(weights.fc1_bias[k]);
        a[static_cast<size_t>(k)] = z > 0.0 ? z : 0.0;
      }
      std::fill(da.begin(), da.end(), 0.0);
      for (int64_t h = 0; h < heads; ++h) {
        const double g = static_cast<double>(grad[h * points + pt]);
        if (g == 0.0) continue;
        const T* row = weights.fc2_weight + h * hd;
        double s = 0.0;
        for (int64_t k = 0; k < hd; ++k) s += static_cast<double>(row[k]) * a[static_cast<size_t>(k)];
        const double sig = sigmoid(s);
        const double go = g * 16.0 * sig * (1.0 - sig);
        double* gw = g_fc2 + h * hd;
        for (int64_t k = 0; k < hd; ++k) {
          gw[k] += go * a[static_cast<size_t>(k)];
          da[static_cast<size_t>(k)] += static_cast<double>(row[k]) * go;
        }
      }
      for (int64_t k = 0; k < hd; ++k) {
        // ReLU'(z) = [z > 0], as torch's threshold_backward (a = 0 exactly when z <= 0).
        if (a[static_cast<size_t>(k)] <= 0.0) continue;
        const double dz = da[static_cast<size_t>(k)];
        g_fc1[2 * k] += dz * in.cy;
        g_fc1[2 * k + 1] += dz * in.cx;
        g_b1[k] += dz;
      }
    }
  }
  auto reduced = [&](int64_t e) {
    double s = 0.0;
    for (const std::vector<double>& acc : sums) s += acc[static_cast<size_t>(e)];
    return s;
  };
  for (int64_t e = 0; e < 2 * hd; ++e) grads.fc1_weight[e] = static_cast<T>(reduced(e));
  for (int64_t e = 0; e < hd; ++e) grads.fc1_bias[e] = static_cast<T>(reduced(2 * hd + e));
  for (int64_t e = 0; e < heads * hd; ++e) grads.fc2_weight[e] = static_cast<T>(reduced(3 * hd + e));
}

// ---------------------------------------------------------------------------
// References: the formulas of the header, one (query, key) pair at a time.

namespace reference {
namespace {

using Vec = std::vector<long double>;

// y = W x + b for W [rows, x.size()] row-major (b may be null).
Vec linear(const double* W, const double* b, const Vec& x, int64_t rows) {
  Vec y(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    long double s = b ? b[r] : 0.0L;
    for (size_t m = 0; m < x.size(); ++m)
      s += static_cast<long double>(W[r * static_cast<int64_t>(x.size()) + m]) * x[m];
    y[static_cast<size_t>(r)] = s;
  }
  return y;
}

void layer_norm(Vec& z, const double* gamma, const double* beta) {
  long double mean = 0, var = 0;
  for (long double v : z) mean += v;
  mean /= static_cast<long double>(z.size());
  for (long double v : z) var += (v - mean) * (v - mean);
  var /= static_cast<long double>(z.size());
  for (size_t k = 0; k < z.size(); ++k) {
    z[k] = gamma[k] * (z[k] - mean) / std::sqrt(var + static_cast<long double>(kDpbNormEps)) + beta[k];
  }
}

}  // namespace

std::vector<double> dpb_bias(const DpbParams& p, const DpbWeights<double>& w) {
  validate(p, "dpb");
  const int64_t hd = p.hidden;
  std::vector<double> out(static_cast<size_t>(p.num_heads * p.q_len * p.k_len));
  for (int64_t i = 0; i < p.q_len; ++i) {
    for (int64_t j = 0; j < p.k_len; ++j) {
      const long double r = static_cast<long double>(i + p.k_len - p.q_len - j);
      const long double x = p.log_distance ? (r > 0 ? 1 : r < 0 ? -1 : 0) * std::log(1.0L + std::fabs(r)) : r;
      Vec a{x};
      for (int64_t l = 0; l < p.depth; ++l) {
        a = l == 0 ? linear(w.in_weight, w.in_bias, a, hd)
                   : linear(w.hidden_weight + (l - 1) * hd * hd, w.hidden_bias + (l - 1) * hd, a, hd);
        if (p.norm) layer_norm(a, w.norm_weight + l * hd, w.norm_bias + l * hd);
        for (long double& v : a) v = v / (1.0L + std::exp(-v));  // SiLU
      }
      const Vec b = linear(w.out_weight, w.out_bias, a, p.num_heads);
      for (int64_t h = 0; h < p.num_heads; ++h) {
        out[static_cast<size_t>((h * p.q_len + i) * p.k_len + j)] = static_cast<double>(b[static_cast<size_t>(h)]);
      }
    }
  }
  return out;
}

std::vector<double> cpb_bias(const CpbParams& p, const CpbWeights<double>& w) {
  validate(p, "cpb");
  const int64_t cells = p.height * p.width;
  const long double ny = p.pretrained_height > 0 ? p.pretrained_height : p.height;
  const long double nx = p.pretrained_width > 0 ? p.pretrained_width : p.width;
  auto coordinate = [](long double t, long double n) -> long double {
    if (n <= 1) return 0;
    const long double v = t / (n - 1) * 8;
    return (v > 0 ? 1 : v < 0 ? -1 : 0) * std::log2(std::fabs(v) + 1) / std::log2(8.0L);
  };
  std::vector<double> out(static_cast<size_t>(p.num_heads * cells * cells));
  for (int64_t i = 0; i < cells; ++i) {
    for (int64_t j = 0; j < cells; ++j) {
      const long double dy = static_cast<long double>(i / p.width - j / p.width);
      const long double dx = static_cast<long double>(i % p.width - j % p.width);
      Vec a = linear(w.fc1_weight, w.fc1_bias, Vec{coordinate(dy, ny), coordinate(dx, nx)}, p.hidden);
      for (long double& v : a) v = v > 0 ? v : 0;
      const Vec b = linear(w.fc2_weight, nullptr, a, p.num_heads);
      for (int64_t h = 0; h < p.num_heads; ++h) {
        out[static_cast<size_t>((h * cells + i) * cells + j)] =
            static_cast<double>(16.0L / (1.0L + std::exp(-b[static_cast<size_t>(h)])));
      }
    }
  }
  return out;
}

}  // namespace reference

#define POSENC_INSTANTIATE(T)                                                                                         \
  template void dpb_offset_bias<T>(const DpbParams&, const DpbWeights<T>&, T*, const char*);                          \
  template void dpb_offset_bias_backward<T>(const DpbParams&, const DpbWeights<T>&, const T*, const DpbGradients<T>&, \
                                            const char*);                                                             \
  template void cpb_grid_bias<T>(const CpbParams&, const CpbWeights<T>&, T*, const char*);                            \
  template void cpb_grid_bias_backward<T>(const CpbParams&, const CpbWeights<T>&, const T*, const CpbGradients<T>&,   \
                                          const char*);
POSENC_INSTANTIATE(float)
POSENC_INSTANTIATE(double)
#undef POSENC_INSTANTIATE

}  // namespace posenc::kernels
