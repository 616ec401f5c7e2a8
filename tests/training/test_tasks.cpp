// The synthetic tasks: every batch is a pure function of its arguments, and
// every row is decoded here plainly (scanning the tokens, not reusing the
// generator) to check that the labels, masks and scored positions follow the
// task's rule at every length. Scores are checked against a float64
// cross-entropy written out by hand.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <tuple>
#include <cstdint>
#include <string>
#include <vector>

#include "../kernels/check.h"
#include "posenc/io/npy.h"
#include "../nn/test_files.h"
#include "posenc/training/tasks.h"
#include "posenc/training/trainer.h"

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

// The synthetic tasks; "text" reads files and has its own tests below.
const std::vector<std::string> kTaskNames = {"order", "span", "lookback", "copy"};

TEST(Tasks, NamesModelsAndMinimumLengths) {
  EXPECT_EQ(Task::names(), (std::vector<std::string>{"order", "span", "lookback", "copy", "text", "mlm", "text-classify",
                                                   "text-span"}));
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
    // The same score from the logits at the scored rows only (masked-LM training's path).
    const at::Tensor rows = Task::scored_rows(b);
    EXPECT_EQ(rows.size(0), n);
    const TaskScore picked = task.score_scored_rows(logits.reshape({12, 5}).index_select(0, rows), b);
    EXPECT_EQ(picked.count, n);
    EXPECT_EQ(picked.correct, s.correct);
    EXPECT_NEAR(picked.loss.item<double>(), loss / static_cast<double>(n), tol);
    // And from the hidden states at those rows with the head fused into the loss (how training scores).
    const at::Tensor hidden = at::randn({12, 3}), weight = at::randn({5, 3}), bias = at::randn({5});
    const at::Tensor hidden_rows = hidden.index_select(0, rows);
    const TaskScore from_logits = task.score_scored_rows(at::linear(hidden_rows, weight, bias), b);
    const TaskScore fused = task.score_head(hidden.view({2, 6, 3}), weight, bias, b);
    EXPECT_EQ(fused.count, n);
    EXPECT_EQ(fused.correct, from_logits.correct);
    EXPECT_NEAR(fused.loss.item<double>(), from_logits.loss.item<double>(), tol);
    expect_error([&] { task.score_head(hidden.view({2, 6, 3}), weight.narrow(0, 0, 4), bias, b); },
                 "[task] the head's weight must be (vocab_size, D) = (5, D), got [4, 3]");
  }
}

TEST(Tasks, BadArgumentsAreRefusedWithExactMessages) {
  expect_error([] { Task::parse("sort"); }, "[task] unknown task 'sort'; known: order, span, lookback, copy, text, mlm, text-classify, text-span");
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

// ---------------------------------------------------------------------------
// text: windows of a token stream written by posenc corpus --out.

// A data directory with splits 0 .. n-1 (train, ids i % vocab), 1000 + i (validation)
// and 2000 + i (test), so a window's split and start can be read off its first token.
// declared_vocab goes to corpus.json (the ids stay below 3000).
std::filesystem::path text_dir(const std::string& name, int64_t declared_vocab = 3000) {
  const int64_t vocab = 3000, train = 500, validation = 300, test = 200;
  const std::filesystem::path dir = fresh_test_dir("posenc_text_task_" + name);
  std::filesystem::create_directories(dir);
  const auto write = [&](const char* split, int64_t n, int64_t offset) {
    std::vector<int64_t> ids(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = (offset + i) % vocab;
    io::write_npy((dir / (std::string(split) + ".ids.npy")).string(), ids, {n});
  };
  write("train", train, 0);
  write("validation", validation, 1000);
  write("test", test, 2000);
  std::ofstream(dir / "corpus.json") << "{\"format\": \"posenc-text-ids-1\", \"vocab_size\": " << declared_vocab
                                      << "}";
  return dir;
}

TEST(TextTask, WindowsAreConsecutiveTokensOfTheSplit) {
  const std::filesystem::path dir = text_dir("windows");
  const Task task = Task::parse("text", {.vocab_size = 0, .data = dir.string()});
  EXPECT_EQ(task.vocab_size(), 3000);  // 0: the data's
  EXPECT_EQ(task.model(), ModelKind::kDecoder);
  EXPECT_EQ(task.min_seq_len(), 1);
  const int64_t T = 64;
  const std::tuple<DataStream, int64_t, int64_t> streams[] = {{DataStream::kTrain, 0, 500},
                                                              {DataStream::kEval, 1000, 1300}};
  for (const auto& [stream, lo, hi] : streams) {
    const Batch b = task.batch(3, stream, 2, 8, T);
    ASSERT_EQ(b.tokens.sizes(), (std::vector<int64_t>{8, T}));
    EXPECT_TRUE(b.loss_mask.all().item<bool>());  // every position is scored
    for (int64_t r = 0; r < 8; ++r) {
      const std::vector<int64_t> row = row_of(b.tokens, r), y = row_of(b.labels, r);
      EXPECT_GE(row[0], lo);
      EXPECT_LE(row[0] + T, hi - 1);  // the label window ends inside the split
      for (int64_t t = 0; t < T; ++t) {
        EXPECT_EQ(row[static_cast<size_t>(t)], row[0] + t);
        EXPECT_EQ(y[static_cast<size_t>(t)], row[0] + t + 1);
      }
    }
    EXPECT_TRUE(b.tokens.equal(task.batch(3, stream, 2, 8, T).tokens));  // a pure function
  }
  // eval_split test reads the test split; the whole split fits one window exactly.
  const Task test = Task::parse("text", {.vocab_size = 3000, .data = dir.string(), .eval_split = "test"});
  const Batch b = test.batch(0, DataStream::kEval, 0, 2, 199);
  EXPECT_EQ(row_of(b.tokens, 0)[0], 2000);
  EXPECT_EQ(row_of(b.labels, 1)[198], 2199);
}

TEST(TextTask, RefusesWhatItCannotRead) {
  const std::filesystem::path dir = text_dir("refusals");
  expect_error([] { Task::parse("text", {}); },
               "[task] data must name a directory written by posenc corpus --out for 'text', got none");
  expect_error([&] { Task::parse("text", {.vocab_size = 32, .data = dir.string()}); },
               "[task] vocab_size must be the data's (3000, " + dir.string() + "/corpus.json) for 'text', got 32");
  expect_error([&] { Task::parse("text", {.vocab_size = 0, .data = dir.string(), .eval_split = "dev"}); },
               "[task] eval_split must be 'validation' or 'test', got 'dev'");
  expect_error([&] { Task::parse("text", {.vocab_size = 0, .data = (dir / "none").string()}); },
               "[task] data must be a directory written by posenc corpus --out (with corpus.json), got '" +
                   (dir / "none").string() + "'");
  const Task task = Task::parse("text", {.vocab_size = 0, .data = dir.string()});
  expect_error([&] { task.batch(0, DataStream::kEval, 0, 1, 300); },
               "[task] seq_len 300 needs 301 tokens; the validation split of " + dir.string() + " holds 300");
  const std::filesystem::path bad = text_dir("bad_ids", 1500);  // the test split's ids start at 2000
  expect_error<std::runtime_error>([&] { Task::parse("text", {.vocab_size = 0, .data = bad.string()}); },
                                   "[task] " + (bad / "test.ids.npy").string() +
                                       ": token id 2000 at 0 is outside the vocabulary [0, 1500)");
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(bad);
}

// ---------------------------------------------------------------------------
// mlm: BERT masking of windows of the same stream.

TEST(MaskedLmTask, RowsAreClsThenTheStreamWithBertMasking) {
  const std::filesystem::path dir = text_dir("mlm");
  const Task task = Task::parse("mlm", {.vocab_size = 0, .data = dir.string()});
  EXPECT_EQ(task.model(), ModelKind::kEncoder);
  EXPECT_EQ(task.min_seq_len(), 2);
  const int64_t B = 64, T = 32;
  const Batch b = task.batch(5, DataStream::kTrain, 1, B, T);
  EXPECT_FALSE(b.key_padding_mask.defined());  // windows have no padding
  int64_t chosen = 0, masked = 0, kept = 0, positions = 0;
  for (int64_t r = 0; r < B; ++r) {
    const std::vector<int64_t> x = row_of(b.tokens, r), y = row_of(b.labels, r);
    const std::vector<int64_t> pick = row_of(b.loss_mask.to(at::kLong), r);
    EXPECT_EQ(x[0], kTextClsId);
    EXPECT_EQ(y[0], kTextClsId);
    EXPECT_EQ(pick[0], 0);  // [CLS] is never scored
    int64_t row_chosen = 0;
    for (int64_t t = 1; t < T; ++t) {
      // Labels are the stream itself: consecutive ids after [CLS].
      EXPECT_EQ(y[static_cast<size_t>(t)], y[1] + t - 1);
      ++positions;
      if (pick[static_cast<size_t>(t)] == 0) {
        EXPECT_EQ(x[static_cast<size_t>(t)], y[static_cast<size_t>(t)]);  // unchosen tokens are untouched
        continue;
      }
      ++row_chosen;
      if (x[static_cast<size_t>(t)] == kTextMaskId) {
        ++masked;
      } else if (x[static_cast<size_t>(t)] == y[static_cast<size_t>(t)]) {
        ++kept;
      } else {
        EXPECT_GE(x[static_cast<size_t>(t)], kTextFirstPiece);  // a random ordinary piece
      }
    }
    EXPECT_GE(row_chosen, 1);
    chosen += row_chosen;
  }
  // 1984 positions at 0.15: 298 +- 16 chosen; of those 80 % masked, about 10 % kept.
  EXPECT_NEAR(static_cast<double>(chosen) / static_cast<double>(positions), 0.15, 0.03);
  EXPECT_NEAR(static_cast<double>(masked) / static_cast<double>(chosen), 0.8, 0.08);
  EXPECT_NEAR(static_cast<double>(kept) / static_cast<double>(chosen), 0.1, 0.06);
  EXPECT_TRUE(b.tokens.equal(task.batch(5, DataStream::kTrain, 1, B, T).tokens));
  EXPECT_FALSE(b.tokens.equal(task.batch(5, DataStream::kTrain, 2, B, T).tokens));
  std::filesystem::remove_all(dir);
}

// ---------------------------------------------------------------------------
// text-classify, text-span: labelled sets of DIR/tasks/NAME.

// A corpus directory (vocab 3000) with tasks/cls (classes a, b, c) and tasks/span, rows of width 8:
// row i of a split is [2, 100 + i, ...] padded after 2 + i % 5 tokens; class i % 3; span (1, 1 + i % 4).
std::filesystem::path labelled_dir(const std::string& name) {
  const std::filesystem::path dir = text_dir("labelled_" + name);
  const int64_t T = 8;
  for (const char* kind : {"cls", "span"}) {
    const std::filesystem::path task = dir / "tasks" / kind;
    std::filesystem::create_directories(task);
    for (const auto& [split, rows] : {std::pair{"train", 20}, std::pair{"validation", 7}, std::pair{"test", 5}}) {
      std::vector<int64_t> tokens, labels;
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t length = 2 + i % 5;
        for (int64_t t = 0; t < T; ++t) tokens.push_back(t == 0 ? kTextClsId : t < length ? 100 + i + t : kTextPadId);
        if (std::string(kind) == "cls") {
          labels.push_back(i % 3);
        } else {
          labels.insert(labels.end(), {1, 1 + i % 4});
        }
      }
      io::write_npy((task / (std::string(split) + ".tokens.npy")).string(), tokens, {rows, T});
      const std::vector<int64_t> shape = std::string(kind) == "cls" ? std::vector<int64_t>{rows}
                                                                     : std::vector<int64_t>{rows, 2};
      io::write_npy((task / (std::string(split) + ".labels.npy")).string(), labels, shape);
    }
    std::ofstream(task / "task.json") << (std::string(kind) == "cls"
                                              ? R"({"format": "posenc-task-2", "kind": "classification", "seq_len": 8, "classes": ["a", "b", "c"]})"
                                              : R"({"format": "posenc-task-2", "kind": "span", "seq_len": 8})");
  }
  return dir;
}

TEST(LabelledTasks, EvaluationReadsEveryRowOnceAndTrainingSamplesRows) {
  const std::filesystem::path dir = labelled_dir("rows");
  const Task cls = Task::parse("text-classify", {.vocab_size = 0, .data = (dir / "tasks/cls").string()});
  EXPECT_EQ(cls.vocab_size(), 3000);  // the corpus's, two levels up
  EXPECT_EQ(cls.num_classes(), 3);
  EXPECT_EQ(cls.class_names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(cls.fixed_seq_len(), 8);
  EXPECT_EQ(cls.eval_examples(), 7);
  // Validation: batches of 3 rows read rows 0-2, 3-5, 6 in order.
  std::vector<int64_t> seen;
  for (int64_t i = 0; i < 3; ++i) {
    const Batch b = cls.batch(0, DataStream::kEval, i, 3, 8);
    for (int64_t r = 0; r < b.tokens.size(0); ++r) {
      const std::vector<int64_t> row = row_of(b.tokens, r);
      const int64_t index = row[1] - 101;
      seen.push_back(index);
      EXPECT_EQ(b.labels[r].item<int64_t>(), index % 3);
      const std::vector<int64_t> pad = row_of(b.key_padding_mask.to(at::kLong), r);
      for (int64_t t = 0; t < 8; ++t) EXPECT_EQ(pad[static_cast<size_t>(t)], t < 2 + index % 5 ? 0 : 1);
    }
  }
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
  // A sample of 3 of the 7 rows is spread over the split: rows floor(k 7 / 3) = 0, 2, 4.
  const Task sampled = Task::parse("text-classify", {.vocab_size = 0, .data = (dir / "tasks/cls").string(),
                                                     .eval_rows = 3});
  EXPECT_EQ(sampled.eval_examples(), 3);
  const Batch sample = sampled.batch(0, DataStream::kEval, 0, 8, 8);
  ASSERT_EQ(sample.tokens.size(0), 3);
  for (int64_t r = 0; r < 3; ++r) EXPECT_EQ(row_of(sample.tokens, r)[1] - 101, 2 * r);
  expect_error([&] { cls.batch(0, DataStream::kEval, 3, 3, 8); },
               "[task] eval batch 3 of 3 rows starts past the 7 rows of the validation split of " +
                   (dir / "tasks/cls").string());
  // Training draws rows of the train split, a pure function of (seed, index).
  const Batch t = cls.batch(1, DataStream::kTrain, 4, 16, 8);
  EXPECT_EQ(t.tokens.size(0), 16);
  EXPECT_TRUE(t.tokens.equal(cls.batch(1, DataStream::kTrain, 4, 16, 8).tokens));
  for (int64_t r = 0; r < 16; ++r) {
    const int64_t index = row_of(t.tokens, r)[1] - 101;
    EXPECT_GE(index, 0);
    EXPECT_LT(index, 20);
    EXPECT_EQ(t.labels[r].item<int64_t>(), index % 3);
  }
  const Task span = Task::parse("text-span", {.vocab_size = 0, .data = (dir / "tasks/span").string(),
                                              .eval_split = "test"});
  EXPECT_EQ(span.eval_examples(), 5);
  const Batch s = span.batch(0, DataStream::kEval, 0, 5, 8);
  EXPECT_EQ(s.labels.sizes(), (std::vector<int64_t>{5, 2}));
  EXPECT_EQ(s.labels[3][1].item<int64_t>(), 4);
  std::filesystem::remove_all(dir);
}

TEST(LabelledTasks, RefusesWhatItCannotRead) {
  const std::filesystem::path dir = labelled_dir("refusals");
  const std::string cls = (dir / "tasks/cls").string();
  expect_error([&] { Task::parse("text-span", {.vocab_size = 0, .data = cls}); },
               "[task] 'text-span' needs a span task directory, " + cls + " holds a classification task");
  expect_error([&] { Task::parse("text-classify", {.vocab_size = 0, .data = dir.string()}); },
               "[task] data must be a task directory written by posenc corpus --out (DIR/tasks/NAME with "
               "task.json), got '" + dir.string() + "'");
  const Task task = Task::parse("text-classify", {.vocab_size = 0, .data = cls});
  expect_error([&] { task.batch(0, DataStream::kTrain, 0, 2, 16); },
               "[task] seq_len must be the data's row width (8, " + cls + "/task.json) for 'text-classify', got 16");
  // A directory of format 1 (definition passages without delimiters) is refused, not read as if current.
  const std::string span = (dir / "tasks/span").string();
  std::ofstream(span + "/task.json") << R"({"format": "posenc-task-1", "kind": "span", "seq_len": 8})";
  expect_error<std::runtime_error>(
      [&] { Task::parse("text-span", {.vocab_size = 0, .data = span}); },
      "[task] " + span + "/task.json: task format must be 'posenc-task-2', got 'posenc-task-1' (written by an older "
      "posenc corpus --out; write the directory again)");
  std::ofstream(span + "/task.json") << R"({"format": "posenc-task-2", "kind": "span", "seq_len": 8})";
  // A label outside the classes is named with its file.
  io::write_npy((dir / "tasks/span/test.labels.npy").string(), std::vector<int64_t>(10, 9), {5, 2});
  expect_error<std::runtime_error>(
      [&] { Task::parse("text-span", {.vocab_size = 0, .data = (dir / "tasks/span").string()}); },
      "[task] " + (dir / "tasks/span/test").string() + ".labels.npy: label 9 at 0 is outside [0, 8)");
  std::filesystem::remove_all(dir);
}

TEST(LabelledTasks, FineTuningStartsFromThePretrainedBody) {
  const std::filesystem::path dir = labelled_dir("init_from");
  TrainConfig pre;
  pre.task = "mlm";
  pre.encoding = "learned+shaw";
  pre.task_options = {.vocab_size = 0, .data = dir.string()};
  pre.layers = 1, pre.dim = 16, pre.heads = 2, pre.seq_len = 8, pre.batch = 4, pre.steps = 3, pre.warmup = 1;
  pre.checkpoint_every = 3, pre.log_every = 1, pre.seed = 7;
  const std::filesystem::path run = dir / "pretrain";
  train(pre, run);
  TrainConfig fine = pre;
  fine.task = "text-classify";
  fine.task_options.data = (dir / "tasks/cls").string();
  fine.seed = 8;
  const TrainConfig resolved = resolve_train_config(fine);
  TaskModel model(Task::parse(resolved.task, resolved.task_options), resolved);
  initialize_from(model, resolved, run);
  TaskModel source = load_task_model(run);
  const auto theirs = source.module().named_parameters();
  int64_t copied = 0;
  for (const auto& item : model.module().named_parameters()) {
    const bool head = item.key().starts_with("cls_head") || item.key().starts_with("span_head");
    const at::Tensor* from = theirs.find(item.key());
    if (head) {
      continue;  // the task's own, freshly initialised (the pretrained cls_head has 2 classes, this one 3)
    }
    ASSERT_NE(from, nullptr) << item.key();
    EXPECT_TRUE(item.value().equal(*from)) << item.key();
    ++copied;
  }
  EXPECT_GT(copied, 8);  // embeddings, table, Shaw tables, attention, FFN, norms
  EXPECT_EQ(model.module().named_parameters().find("cls_head.weight")->size(0), 3);
  // Another width is refused, naming both.
  TrainConfig wide = fine;
  wide.dim = 32;
  const TrainConfig wide_resolved = resolve_train_config(wide);
  TaskModel other(Task::parse(wide_resolved.task, wide_resolved.task_options), wide_resolved);
  expect_error([&] { initialize_from(other, wide_resolved, run); },
               "[train] init_from: " + run.string() + " has dim 16, this run 32");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace posenc::nn::test
