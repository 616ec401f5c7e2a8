// 2D relative logits (Bello et al. 2019, BoTNet): expand (rel_to_abs as index
// arithmetic) and its adjoint reduce, against plain references, on
// contiguous and strided views.
#include "posenc/kernels/relative_2d.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "check.h"

namespace posenc::kernels {
namespace {

using test::expect_error;

// A (B, H, rows, cols) array in its own storage; `padded` lays it out head-major
// ((H, B, rows, cols + 3)) so batch, head and row strides are all unusual.
template <class T>
struct Stack {
  std::vector<T> storage;
  BatchedMatrix<T> view;

  Stack(int64_t batch, int64_t heads, int64_t rows, int64_t cols, bool padded, T fill) {
    const int64_t stride_r = padded ? cols + 3 : cols;
    storage.assign(static_cast<size_t>(std::max<int64_t>(1, batch * heads * rows * stride_r)), fill);
    view = {storage.data(), batch, heads, rows, cols, 0, 0, stride_r};
    if (padded) {
      view.stride_b = rows * stride_r;
      view.stride_h = batch * rows * stride_r;
    } else {
      view.stride_h = rows * stride_r;
      view.stride_b = heads * rows * stride_r;
    }
  }
  T& at(int64_t b, int64_t h, int64_t r, int64_t c) { return view.row(b, h, r)[c]; }
  BatchedMatrix<const T> cview() const {
    return {view.data, view.batch, view.heads, view.rows, view.cols, view.stride_b, view.stride_h, view.stride_r};
  }
  void randomize(unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (int64_t b = 0; b < view.batch; ++b)
      for (int64_t h = 0; h < view.heads; ++h)
        for (int64_t r = 0; r < view.rows; ++r)
          for (int64_t c = 0; c < view.cols; ++c) at(b, h, r, c) = static_cast<T>(u(rng));
  }
  // Storage outside the view still holds `fill`.
  int64_t touched_padding(T fill) {
    std::vector<char> inside(storage.size(), 0);
    for (int64_t b = 0; b < view.batch; ++b)
      for (int64_t h = 0; h < view.heads; ++h)
        for (int64_t r = 0; r < view.rows; ++r)
          for (int64_t c = 0; c < view.cols; ++c) inside[&at(b, h, r, c) - storage.data()] = 1;
    int64_t touched = 0;
    for (size_t k = 0; k < storage.size(); ++k) touched += !inside[k] && storage[k] != fill;
    return touched;
  }
};

struct Grid {
  int64_t batch, heads, height, width;
  bool padded;
  std::string str() const {
    std::ostringstream s;
    s << "B=" << batch << " H=" << heads << " grid=" << height << "x" << width << (padded ? " strided" : "");
    return s.str();
  }
  int64_t hw() const { return height * width; }
};

// BoTNet's 14x14 and 7x7 feature maps (4 heads), non-square and one-wide grids.
const std::vector<Grid> kGrids = {
    {2, 3, 3, 5, false}, {2, 3, 3, 5, true}, {1, 2, 1, 7, true}, {1, 2, 4, 1, false}, {3, 1, 1, 1, true},
    {1, 4, 7, 7, true},  {1, 4, 14, 14, false}, {2, 2, 5, 3, true},
};

template <class T>
void check_expand(const Grid& g) {
  const int64_t hw = g.hw();
  Stack<T> rel_h(g.batch, g.heads, hw, 2 * g.height - 1, g.padded, T(0));
  Stack<T> rel_w(g.batch, g.heads, hw, 2 * g.width - 1, g.padded, T(0));
  Stack<T> out(g.batch, g.heads, hw, hw, g.padded, T(9));
  rel_h.randomize(1);
  rel_w.randomize(2);
  relative_2d_expand<T>({g.height, g.width}, rel_h.cview(), rel_w.cview(), out.view);
  double worst = 0;
  for (int64_t b = 0; b < g.batch; ++b) {
    for (int64_t h = 0; h < g.heads; ++h) {
      for (int64_t y = 0; y < g.height; ++y) {
        for (int64_t x = 0; x < g.width; ++x) {
          for (int64_t yk = 0; yk < g.height; ++yk) {
            for (int64_t xk = 0; xk < g.width; ++xk) {
              const int64_t q = y * g.width + x, k = yk * g.width + xk;
              const long double want = static_cast<long double>(rel_h.at(b, h, q, yk - y + g.height - 1)) +
                                       rel_w.at(b, h, q, xk - x + g.width - 1);
              worst = std::max(worst, static_cast<double>(std::fabs(out.at(b, h, q, k) - want)));
            }
          }
        }
      }
    }
  }
  // One rounding of a sum of two values of magnitude < 1: half an ulp of 2.
  EXPECT_LE(worst, std::numeric_limits<T>::epsilon()) << g.str();
  EXPECT_EQ(out.touched_padding(T(9)), 0) << g.str();
}

template <class T>
void check_reduce(const Grid& g) {
  const int64_t hw = g.hw();
  Stack<T> grad(g.batch, g.heads, hw, hw, g.padded, T(0));
  Stack<T> rel_h(g.batch, g.heads, hw, 2 * g.height - 1, g.padded, T(9));
  Stack<T> rel_w(g.batch, g.heads, hw, 2 * g.width - 1, g.padded, T(9));
  grad.randomize(3);
  relative_2d_reduce<T>({g.height, g.width}, grad.cview(), rel_h.view, rel_w.view);
  for (int64_t b = 0; b < g.batch; ++b) {
    for (int64_t h = 0; h < g.heads; ++h) {
      // The adjoint by its definition: every grad entry scattered to the two table columns it came from.
      std::vector<long double> want_h(static_cast<size_t>(hw * (2 * g.height - 1)), 0.0L);
      std::vector<long double> want_w(static_cast<size_t>(hw * (2 * g.width - 1)), 0.0L);
      for (int64_t q = 0; q < hw; ++q) {
        for (int64_t k = 0; k < hw; ++k) {
          const long double v = grad.at(b, h, q, k);
          want_h[q * (2 * g.height - 1) + (k / g.width - q / g.width + g.height - 1)] += v;
          want_w[q * (2 * g.width - 1) + (k % g.width - q % g.width + g.width - 1)] += v;
        }
      }
      for (int64_t q = 0; q < hw; ++q) {
        // Sums of at most max(H, W) values in (-1, 1), in double, then one rounding to T.
        const double tol = std::numeric_limits<T>::epsilon() * static_cast<double>(std::max(g.height, g.width));
        for (int64_t c = 0; c < 2 * g.height - 1; ++c) {
          EXPECT_NEAR(rel_h.at(b, h, q, c), static_cast<double>(want_h[q * (2 * g.height - 1) + c]), tol)
              << g.str() << " rel_h b=" << b << " h=" << h << " q=" << q << " c=" << c;
        }
        for (int64_t c = 0; c < 2 * g.width - 1; ++c) {
          EXPECT_NEAR(rel_w.at(b, h, q, c), static_cast<double>(want_w[q * (2 * g.width - 1) + c]), tol)
              << g.str() << " rel_w b=" << b << " h=" << h << " q=" << q << " c=" << c;
        }
      }
    }
  }
  EXPECT_EQ(rel_h.touched_padding(T(9)), 0) << g.str();
  EXPECT_EQ(rel_w.touched_padding(T(9)), 0) << g.str();
}

TEST(Relative2d, ExpandMatchesReferenceFloat) {
  for (const Grid& g : kGrids) check_expand<float>(g);
}
TEST(Relative2d, ExpandMatchesReferenceDouble) {
  for (const Grid& g : kGrids) check_expand<double>(g);
}
TEST(Relative2d, ReduceMatchesReferenceFloat) {
  for (const Grid& g : kGrids) check_reduce<float>(g);
}
TEST(Relative2d, ReduceMatchesReferenceDouble) {
  for (const Grid& g : kGrids) check_reduce<double>(g);
}

TEST(Relative2d, ExpandAndReduceAreAdjoint) {
  // <expand(a, b), g> = <a, reduce_h(g)> + <b, reduce_w(g)>, in double.
  for (const Grid& g : kGrids) {
    const int64_t hw = g.hw();
    Stack<double> a(g.batch, g.heads, hw, 2 * g.height - 1, g.padded, 0.0);
    Stack<double> bw(g.batch, g.heads, hw, 2 * g.width - 1, g.padded, 0.0);
    Stack<double> grad(g.batch, g.heads, hw, hw, g.padded, 0.0);
    a.randomize(4);
    bw.randomize(5);
    grad.randomize(6);
    Stack<double> out(g.batch, g.heads, hw, hw, g.padded, 0.0);
    Stack<double> rh(g.batch, g.heads, hw, 2 * g.height - 1, g.padded, 0.0);
    Stack<double> rw(g.batch, g.heads, hw, 2 * g.width - 1, g.padded, 0.0);
    relative_2d_expand<double>({g.height, g.width}, a.cview(), bw.cview(), out.view);
    relative_2d_reduce<double>({g.height, g.width}, grad.cview(), rh.view, rw.view);
    long double lhs = 0, rhs = 0, scale = 0;
    for (int64_t b = 0; b < g.batch; ++b) {
      for (int64_t h = 0; h < g.heads; ++h) {
        for (int64_t q = 0; q < hw; ++q) {
          for (int64_t k = 0; k < hw; ++k) {
            lhs += static_cast<long double>(out.at(b, h, q, k)) * grad.at(b, h, q, k);
            scale += std::fabs(static_cast<long double>(out.at(b, h, q, k)) * grad.at(b, h, q, k));
          }
          for (int64_t c = 0; c < 2 * g.height - 1; ++c) rhs += static_cast<long double>(a.at(b, h, q, c)) * rh.at(b, h, q, c);
          for (int64_t c = 0; c < 2 * g.width - 1; ++c) rhs += static_cast<long double>(bw.at(b, h, q, c)) * rw.at(b, h, q, c);
        }
      }
    }
    // 1e-13 of sum |terms|: both sides are double roundings of exact bilinear sums.
    EXPECT_NEAR(static_cast<double>(lhs), static_cast<double>(rhs), 1e-13 * static_cast<double>(scale)) << g.str();
  }
}

TEST(Relative2d, ReduceSameBitsWithOneAndTwoThreads) {
  const int saved = omp_get_max_threads();
  const Grid g{2, 4, 12, 12, true};  // 2*4*144^2 = 166k values: above the threading threshold
  Stack<float> grad(g.batch, g.heads, g.hw(), g.hw(), g.padded, 0.0f);
  grad.randomize(7);
  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    Stack<float> rh(g.batch, g.heads, g.hw(), 2 * g.height - 1, false, 0.0f);
    Stack<float> rw(g.batch, g.heads, g.hw(), 2 * g.width - 1, false, 0.0f);
    relative_2d_reduce<float>({g.height, g.width}, grad.cview(), rh.view, rw.view);
    rh.storage.insert(rh.storage.end(), rw.storage.begin(), rw.storage.end());
    return rh.storage;
  };
  const std::vector<float> one = run(1), two = run(2);
  omp_set_num_threads(saved);
  ASSERT_EQ(one.size(), two.size());
  EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0);
}

TEST(Relative2d, EmptyBatchOrHeadsWriteNothing) {
  for (auto [batch, heads] : {std::pair<int64_t, int64_t>{0, 2}, {2, 0}}) {
    const Relative2dParams p{3, 4};
    BatchedMatrix<const float> rel_h{nullptr, batch, heads, 12, 5, 0, 0, 5};
    BatchedMatrix<const float> rel_w{nullptr, batch, heads, 12, 7, 0, 0, 7};
    BatchedMatrix<float> out{nullptr, batch, heads, 12, 12, 0, 0, 12};
    EXPECT_NO_THROW(relative_2d_expand<float>(p, rel_h, rel_w, out));
    BatchedMatrix<const float> grad{nullptr, batch, heads, 12, 12, 0, 0, 12};
    BatchedMatrix<float> wh{nullptr, batch, heads, 12, 5, 0, 0, 5}, ww{nullptr, batch, heads, 12, 7, 0, 0, 7};
    EXPECT_NO_THROW(relative_2d_reduce<float>(p, grad, wh, ww));
  }
}

TEST(Relative2d, Errors) {
  // The header's example: a 4 x 5 grid, B = 1, H = 2 (HW = 20, 2H-1 = 7, 2W-1 = 9).
  std::vector<float> buf(2 * 21 * 21);
  auto view = [&](int64_t batch, int64_t heads, int64_t rows, int64_t cols) {
    return contiguous_matrix<float>(buf.data(), batch, heads, rows, cols);
  };
  auto cview = [&](int64_t batch, int64_t heads, int64_t rows, int64_t cols) {
    return contiguous_matrix<const float>(buf.data(), batch, heads, rows, cols);
  };
  auto expand = [&](Relative2dParams p, BatchedMatrix<const float> rh, BatchedMatrix<const float> rw,
                    BatchedMatrix<float> out, const std::string& message) {
    expect_error([&] { relative_2d_expand<float>(p, rh, rw, out); }, "[relative_2d_expand] " + message);
  };
  const Relative2dParams p{4, 5};
  expand({0, 5}, cview(1, 2, 20, 7), cview(1, 2, 20, 9), view(1, 2, 20, 20), "height must be >= 1, got 0");
  expand({4, 0}, cview(1, 2, 20, 7), cview(1, 2, 20, 9), view(1, 2, 20, 20), "width must be >= 1, got 0");
  expand(p, cview(1, 2, 21, 7), cview(1, 2, 20, 9), view(1, 2, 20, 20),
         "rel_h must have height*width = 20 rows, got 21");
  expand(p, cview(1, 2, 20, 6), cview(1, 2, 20, 9), view(1, 2, 20, 20),
         "rel_h must have 2*height-1 = 7 columns, got 6");
  expand(p, cview(1, 2, 20, 7), cview(1, 2, 21, 9), view(1, 2, 20, 20),
         "rel_w must have height*width = 20 rows, got 21");
  expand(p, cview(1, 2, 20, 7), cview(1, 2, 20, 6), view(1, 2, 20, 20),
         "rel_w must have 2*width-1 = 9 columns, got 6");
  expand(p, cview(1, 2, 20, 7), cview(1, 3, 20, 9), view(1, 2, 20, 20),
         "rel_w must be (B, H) = (1, 2) like rel_h, got (1, 3)");
  expand(p, cview(1, 2, 20, 7), cview(1, 2, 20, 9), view(1, 2, 20, 19),
         "out must be (B, H, HW, HW) = (1, 2, 20, 20), got (1, 2, 20, 19)");
  expand(p, cview(-1, 2, 20, 7), cview(-1, 2, 20, 9), view(-1, 2, 20, 20), "rel_h must have (B, H) >= 0, got (-1, 2)");
  expand({int64_t{1} << 40, int64_t{1} << 40}, cview(1, 2, 20, 7), cview(1, 2, 20, 9), view(1, 2, 20, 20),
         "rel_h must have height*width = 1.2089258196146292e+24 rows, got 20");
  // Strides written out: contiguous_matrix would overflow computing heads * rows * cols.
  const BatchedMatrix<const float> huge_rows{buf.data(), 1, 2, (int64_t{1} << 62) + 1, 7, 0, 0, 7};
  expand({(int64_t{1} << 62) + 1, 1}, huge_rows, cview(1, 2, 20, 9),
         view(1, 2, 20, 20), "rel_h must have 2*height-1 = 9.2233720368547758e+18 columns, got 7");
  expand(p, {nullptr, 1, 2, 20, 7, 280, 140, 7}, cview(1, 2, 20, 9), view(1, 2, 20, 20), "rel_h must not be null");
  expect_error([&] { relative_2d_reduce<float>(p, cview(1, 2, 19, 20), view(1, 2, 20, 7), view(1, 2, 20, 9)); },
               "[relative_2d_reduce] grad must be (B, H, HW, HW) = (1, 2, 20, 20), got (1, 2, 19, 20)");
  expect_error([&] { relative_2d_reduce<float>(p, cview(1, 2, 20, 20), view(1, 2, 20, 8), view(1, 2, 20, 9), "rel2d"); },
               "[rel2d] rel_h must have 2*height-1 = 7 columns, got 8");
}

}  // namespace
}  // namespace posenc::kernels
