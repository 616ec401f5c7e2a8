// The synthetic tasks: every batch is a pure function of its arguments, and
// every row is decoded here plainly (scanning the tokens, not reusing the
// generator) to check that the labels, masks and scored positions follow the
// task's rule at every length. Scores are checked against a float64
// cross-entropy written out by hand.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "../kernels/check.h"
#include "posenc/nn/tasks.h"

namespace posenc::nn::test {
namespace {

using posenc::test::expect_error;

std::vector<int64_t> row_of(const at::Tensor& t, int64_t r) {
  const at::Tensor row = t[r].to(at::kLong).contiguous();
  return {row.data_ptr<int64_t>(), row.data_ptr<int64_t>() + row.numel()};
}

bool equal(const Batch& a, const Batch& b) {
  auto same = [](const at::Tensor& x, const at::Tensor& y) {
    return x.defined() == y.defined() && (!x.defined() || x.equal(y));
  };
  return same(a.tokens, b.tokens) && same(a.key_padding_mask, b.key_padding_mask) && same(a.labels, b.labels) &&
         same(a.loss_mask, b.loss_mask);
}

const std::vector<std::string> kTaskNames = {"order", "span", "lookback", "copy"};

TEST(Tasks, NamesModelsAndMinimumLengths) {
  EXPECT_EQ(Task::names(), kTaskNames);
  const Task order = Task::parse("order"), span = Task::parse("span", {.max_span = 5});
  const Task lookback = Task::parse("lookback", {.lookback = 4}), copy = Task::parse("copy");
  EXPECT_EQ(order.model(), ModelKind::kEncoder);
  EXPECT_EQ(span.model(), ModelKind::kEncoder);
  EXPECT_EQ(lookback.model(), ModelKind::kDecoder);
  EXPECT_EQ(copy.model(), ModelKind::kDecoder);
  EXPECT_EQ(order.min_seq_len(), 3);
  EXPECT_EQ(span.min_seq_len(), 8);
  EXPECT_EQ(lookback.min_seq_len(), 5);
  EXPECT_EQ(copy.min_seq_len(), 2);
  EXPECT_EQ(lookback.name(), "lookback");
}

TEST(Tasks, BatchIsAPureFunctionOfItsArguments) {
  for (const std::string& name : kTaskNames) {
    const Task task = Task::parse(name);
    const Batch b5 = task.batch(7, DataStream::kTrain, 5, 4, 16);
    for (int64_t i = 0; i < 5; ++i) task.batch(7, DataStream::kTrain, i, 4, 16);  // no hidden state
    EXPECT_TRUE(equal(b5, task.batch(7, DataStream::kTrain, 5, 4, 16))) << name;
    EXPECT_TRUE(equal(b5, Task::parse(name).batch(7, DataStream::kTrain, 5, 4, 16))) << name;
    // Each row has its own generator: a larger batch starts with the same rows.
    const Batch b8 = task.batch(7, DataStream::kTrain, 5, 8, 16);
    EXPECT_TRUE(b8.tokens.slice(0, 0, 4).equal(b5.tokens)) << name;
    // Any other seed, index or stream gives other data.
    EXPECT_FALSE(b5.tokens.equal(task.batch(8, DataStream::kTrain, 5, 4, 16).tokens)) << name;
    EXPECT_FALSE(b5.tokens.equal(task.batch(7, DataStream::kTrain, 6, 4, 16).tokens)) << name;
    EXPECT_FALSE(b5.tokens.equal(task.batch(7, DataStream::kEval, 5, 4, 16).tokens)) << name;
  }
}

TEST(Tasks, OrderLabelsFollowTheMarkersAtEveryLength) {
  const Task task = Task::parse("order", {.vocab_size = 12});
  int64_t ones = 0, rows = 0;
  for (int64_t T = 3; T <= 40; ++T) {
    const Batch b = task.batch(3, DataStream::kTrain, T, 24, T);
    ASSERT_EQ(b.tokens.sizes(), (at::IntArrayRef{24, T}));
    ASSERT_EQ(b.labels.sizes(), (at::IntArrayRef{24}));
    ASSERT_FALSE(b.loss_mask.defined());
    for (int64_t r = 0; r < 24; ++r) {
      const std::vector<int64_t> tok = row_of(b.tokens, r), pad = row_of(b.key_padding_mask, r);
      int64_t n = 0;
      while (n < T && tok[n] != kPadToken) ++n;
      EXPECT_GE(n, std::max<int64_t>((T + 1) / 2, 3));
      int64_t a = -1, bpos = -1, count_a = 0, count_b = 0;
      for (int64_t t = 0; t < T; ++t) {
        EXPECT_EQ(pad[t], t >= n ? 1 : 0) << "T=" << T << " row " << r << " t=" << t;
        if (t >= n) {
          EXPECT_EQ(tok[t], kPadToken);
        } else if (t == 0) {
          EXPECT_EQ(tok[t], kClsToken);
        } else if (tok[t] == kMarkerA) {
          a = t, ++count_a;
        } else if (tok[t] == kMarkerB) {
          bpos = t, ++count_b;
        } else {
          EXPECT_GE(tok[t], kFirstFiller);
          EXPECT_LT(tok[t], 12);
        }
      }
      ASSERT_EQ(count_a, 1);
      ASSERT_EQ(count_b, 1);
      EXPECT_EQ(b.labels[r].item<int64_t>(), a < bpos ? 1 : 0) << "T=" << T << " row " << r;
      ones += a < bpos;
      ++rows;
    }
  }
  // Balanced classes: 912 rows, binomial sd 0.017, so +-0.07 is ~4 sd.
  EXPECT_NEAR(static_cast<double>(ones) / static_cast<double>(rows), 0.5, 0.07);
}

TEST(Tasks, SpanTargetsAreTheTokensBetweenQueryAndTerminator) {
  const int64_t max_span = 5;
  const Task task = Task::parse("span", {.vocab_size = 16, .max_span = max_span});
  std::vector<int64_t> lengths_seen(max_span + 1, 0);
  for (int64_t T = 8; T <= 40; ++T) {
    const Batch b = task.batch(11, DataStream::kEval, 0, 16, T);
    ASSERT_EQ(b.labels.sizes(), (at::IntArrayRef{16, 2}));
    for (int64_t r = 0; r < 16; ++r) {
      const std::vector<int64_t> tok = row_of(b.tokens, r), pad = row_of(b.key_padding_mask, r);
      int64_t q = -1, term = -1, n = 0;
      while (n < T && tok[n] != kPadToken) ++n;
      for (int64_t t = 0; t < T; ++t) {
        EXPECT_EQ(pad[t], t >= n ? 1 : 0);
        if (tok[t] == kQueryToken) {
          EXPECT_EQ(q, -1) << "two query tokens";
          q = t;
        }
        if (tok[t] == kTerminatorToken) {
          EXPECT_EQ(term, -1) << "two terminators";
          term = t;
        }
      }
      ASSERT_GE(q, 1);
      ASSERT_GT(term, q + 1) << "the span holds at least one token";
      ASSERT_LT(term, n);
      EXPECT_EQ(tok[0], kClsToken);
      EXPECT_EQ(b.labels[r][0].item<int64_t>(), q + 1);
      EXPECT_EQ(b.labels[r][1].item<int64_t>(), term - 1);
      const int64_t length = term - q - 1;
      ASSERT_LE(length, max_span);
      ++lengths_seen[length];
      for (int64_t t = q + 1; t < term; ++t) EXPECT_GE(tok[t], kFirstFiller);
    }
  }
  for (int64_t L = 1; L <= max_span; ++L) EXPECT_GT(lengths_seen[L], 0) << "span length " << L << " never drawn";
}

// x = tokens[r] followed by labels[r][T-1]: the T+1 generated symbols.
std::vector<int64_t> sequence_of(const Batch& b, int64_t r) {
  std::vector<int64_t> x = row_of(b.tokens, r);
  const std::vector<int64_t> next = row_of(b.labels, r);
  for (size_t t = 0; t + 1 < x.size(); ++t) EXPECT_EQ(next[t], x[t + 1]) << "labels are the next tokens";
  x.push_back(next.back());
  return x;
}

TEST(Tasks, LookbackRepeatsTheTokenKBackAndScoresFromK) {
  for (const int64_t k : {1, 3, 5}) {
    const Task task = Task::parse("lookback", {.vocab_size = 9, .lookback = k});
    for (int64_t T = k + 1; T <= 40; ++T) {
      const Batch b = task.batch(1, DataStream::kTrain, 2, 6, T);
      EXPECT_FALSE(b.key_padding_mask.defined());
      ASSERT_EQ(b.labels.sizes(), (at::IntArrayRef{6, T}));
      for (int64_t r = 0; r < 6; ++r) {
        const std::vector<int64_t> x = sequence_of(b, r), scored = row_of(b.loss_mask, r);
        for (int64_t i = 0; i <= T; ++i) {
          EXPECT_GE(x[i], 0);
          EXPECT_LT(x[i], 9);
          if (i >= k) {
            EXPECT_EQ(x[i], x[i - k]) << "k=" << k << " T=" << T << " i=" << i;
          }
        }
        for (int64_t t = 0; t < T; ++t) EXPECT_EQ(scored[t], t + 1 >= k ? 1 : 0);
      }
    }
  }
}

TEST(Tasks, CopyRepeatsTheFirstHalfAndScoresTheSecond) {
  const Task task = Task::parse("copy", {.vocab_size = 7});
  for (int64_t T = 2; T <= 40; ++T) {
    const Batch b = task.batch(5, DataStream::kTrain, 0, 4, T);
    const int64_t h = (T + 1) / 2;
    for (int64_t r = 0; r < 4; ++r) {
      const std::vector<int64_t> x = sequence_of(b, r), scored = row_of(b.loss_mask, r);
      for (int64_t i = h; i <= T; ++i) EXPECT_EQ(x[i], x[i - h]) << "T=" << T << " i=" << i;
      for (int64_t t = 0; t < T; ++t) EXPECT_EQ(scored[t], t + 1 >= h ? 1 : 0);
    }
  }
}

// Plain float64 cross-entropy of one row of logits.
double cross_entropy(const std::vector<double>& logits, int64_t target) {
  double m = -INFINITY, s = 0;
  for (double v : logits) m = std::max(m, v);
  for (double v : logits) s += std::exp(v - m);
  return m + std::log(s) - logits[target];
}

std::vector<double> row_values(const at::Tensor& t) {
  const at::Tensor d = t.to(at::kDouble).contiguous();
  return {d.data_ptr<double>(), d.data_ptr<double>() + d.numel()};
}

TEST(Tasks, ScoresMatchAPlainCrossEntropy) {
  at::manual_seed(0);
  // 1e-5: float32 log-softmax of O(1) logits against the float64 sum.
  const double tol = 1e-5;
  {
    const Task task = Task::parse("order");
    const Batch b = task.batch(0, DataStream::kTrain, 0, 6, 10);
    const at::Tensor logits = at::randn({6, 2});
    const TaskScore s = task.score_classification(logits, b);
    double loss = 0;
    int64_t correct = 0;
    for (int64_t r = 0; r < 6; ++r) {
      const std::vector<double> l = row_values(logits[r]);
      const int64_t y = b.labels[r].item<int64_t>();
      loss += cross_entropy(l, y) / 6;
      correct += (l[1] > l[0] ? 1 : 0) == y;
    }
    EXPECT_NEAR(s.loss.item<double>(), loss, tol);
    EXPECT_EQ(s.correct, correct);
    EXPECT_EQ(s.count, 6);
  }
  {
    const Task task = Task::parse("span");
    const Batch b = task.batch(0, DataStream::kTrain, 0, 5, 12);
    at::Tensor start = at::randn({5, 12}), end = at::randn({5, 12});
    // Make row 0 exactly right and row 1 right at the start only.
    for (int64_t r = 0; r < 2; ++r) start[r][b.labels[r][0].item<int64_t>()] = 50.0;
    end[0][b.labels[0][1].item<int64_t>()] = 50.0;
    end[1][(b.labels[1][1].item<int64_t>() + 1) % 12] = 50.0;
    const TaskScore s = task.score_span(start, end, b);
    double loss = 0;
    int64_t correct = 0;
    for (int64_t r = 0; r < 5; ++r) {
      const std::vector<double> ls = row_values(start[r]), le = row_values(end[r]);
      const int64_t ys = b.labels[r][0].item<int64_t>(), ye = b.labels[r][1].item<int64_t>();
      loss += (cross_entropy(ls, ys) + cross_entropy(le, ye)) / 2 / 5;
      const auto arg = [](const std::vector<double>& v) { return std::max_element(v.begin(), v.end()) - v.begin(); };
      correct += arg(ls) == ys && arg(le) == ye;
    }
    EXPECT_NEAR(s.loss.item<double>(), loss, tol * 10);  // logits of 50: the sum's float32 rounding scales with them
    EXPECT_EQ(s.correct, correct);
    EXPECT_GE(s.correct, 1);
  }
  {
    const Task task = Task::parse("lookback", {.vocab_size = 5, .lookback = 3});
    const Batch b = task.batch(0, DataStream::kTrain, 0, 2, 6);
    const at::Tensor logits = at::randn({2, 6, 5});
    const TaskScore s = task.score_language_model(logits, b);
    double loss = 0;
    int64_t n = 0;
    for (int64_t r = 0; r < 2; ++r) {
      for (int64_t t = 2; t < 6; ++t) {  // target positions t+1 >= 3
        loss += cross_entropy(row_values(logits[r][t]), b.labels[r][t].item<int64_t>());
        ++n;
      }
    }
    EXPECT_EQ(s.count, n);
    EXPECT_NEAR(s.loss.item<double>(), loss / static_cast<double>(n), tol);
  }
}

TEST(Tasks, BadArgumentsAreRefusedWithExactMessages) {
  expect_error([] { Task::parse("sort"); }, "[task] unknown task 'sort'; known: order, span, lookback, copy");
  expect_error([] { Task::parse("order", {.vocab_size = 7}); }, "[task] vocab_size must be >= 8 for 'order', got 7");
  expect_error([] { Task::parse("copy", {.vocab_size = 1}); }, "[task] vocab_size must be >= 2 for 'copy', got 1");
  expect_error([] { Task::parse("lookback", {.lookback = 0}); }, "[task] lookback must be >= 1, got 0");
  expect_error([] { Task::parse("span", {.max_span = 0}); }, "[task] max_span must be >= 1, got 0");
  const Task span = Task::parse("span");
  expect_error([&] { span.batch(0, DataStream::kTrain, 0, 2, 6); }, "[task] seq_len must be >= 7 for 'span', got 6");
  expect_error([&] { span.batch(0, DataStream::kTrain, 0, 0, 16); }, "[task] batch_size must be >= 1, got 0");
  const Batch b = span.batch(0, DataStream::kTrain, 0, 2, 8);
  expect_error([&] { span.score_span(at::zeros({2, 7}), at::zeros({2, 8}), b); },
               "[task] start_logits must have shape [2, 8], got [2, 7]");
}

}  // namespace
}  // namespace posenc::nn::test
