// Every validation message of the RoPE scalings, word for word: shape and
// base, keys a rope_type does not use, missing keys, ranges, and the caller's
// name in the prefix.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "check.h"
#include "posenc/kernels/rope_scaling.h"

namespace posenc::kernels {
namespace {

using test::expect_error;

RopeScaling make(RopeType type) {
  RopeScaling s;
  s.type = type;
  return s;
}

TEST(RopeScaling, ShapeAndBaseErrors) {
  const RopeScaling plain;
  expect_error([&] { validate(plain, 7, 10000.0); }, "[rope] dim must be even, got 7");
  expect_error([&] { validate(plain, 0, 10000.0); }, "[rope] dim must be positive, got 0");
  expect_error([&] { validate(plain, -4, 10000.0); }, "[rope] dim must be positive, got -4");
  expect_error([&] { validate(plain, 8, 0.0); }, "[rope] base must be finite and > 0, got 0");
  expect_error([&] { validate(plain, 8, -1.0); }, "[rope] base must be finite and > 0, got -1");
  expect_error([&] { validate(plain, 8, NAN); }, "[rope] base must be finite and > 0, got nan");
  expect_error([&] { validate(plain, 8, INFINITY); }, "[rope] base must be finite and > 0, got inf");
  expect_error([&] { rope_frequencies(8, 10000.0, plain, 0); }, "[rope] seq_len must be positive, got 0");
  expect_error([&] { rope_frequencies(8, 10000.0, plain, -5, "mrope"); }, "[mrope] seq_len must be positive, got -5");
  expect_error([&] { rope_frequencies(9, 10000.0, plain, {}, "rope-axial"); }, "[rope-axial] dim must be even, got 9");
  EXPECT_NO_THROW(validate(plain, 2, 0.5));  // any positive base is a spectrum
}

TEST(RopeScaling, UnusedKeysAreRefused) {
  RopeScaling s = make(RopeType::kLinear);
  s.factor = 2.0;
  s.beta_fast = 32.0;
  expect_error([&] { validate(s, 64, 10000.0); }, "[rope] key 'beta_fast' is not used by rope_type 'linear'");
  RopeScaling d;
  d.factor = 2.0;
  expect_error([&] { validate(d, 64, 10000.0); }, "[rope] key 'factor' is not used by rope_type 'default'");
  d = make(RopeType::kDefault);
  d.truncate = false;
  expect_error([&] { validate(d, 64, 10000.0); }, "[rope] key 'truncate' is not used by rope_type 'default'");
  RopeScaling n = make(RopeType::kNtk);
  n.factor = 2.0;
  n.original_max_position_embeddings = 4096;
  expect_error([&] { validate(n, 64, 10000.0); },
               "[rope] key 'original_max_position_embeddings' is not used by rope_type 'ntk'");
  RopeScaling dyn = make(RopeType::kDynamic);
  dyn.factor = 2.0;
  dyn.original_max_position_embeddings = 4096;
  dyn.max_position_embeddings = 8192;
  expect_error([&] { validate(dyn, 64, 10000.0); },
               "[rope] key 'max_position_embeddings' is not used by rope_type 'dynamic'");
  RopeScaling y = make(RopeType::kYarn);
  y.factor = 2.0;
  y.original_max_position_embeddings = 4096;
  y.short_factor = std::vector<double>(32, 1.0);
  expect_error([&] { validate(y, 64, 10000.0); }, "[rope] key 'short_factor' is not used by rope_type 'yarn'");
  RopeScaling l = make(RopeType::kLongrope);
  l.factor = 2.0;
  l.original_max_position_embeddings = 4096;
  l.short_factor = l.long_factor = std::vector<double>(32, 1.0);
  l.mscale = 1.0;
  expect_error([&] { validate(l, 64, 10000.0); }, "[rope] key 'mscale' is not used by rope_type 'longrope'");
  RopeScaling ll = make(RopeType::kLlama3);
  ll.factor = 8.0;
  ll.original_max_position_embeddings = 8192;
  ll.low_freq_factor = 1.0;
  ll.high_freq_factor = 4.0;
  ll.attention_factor = 1.0;
  expect_error([&] { validate(ll, 64, 10000.0); }, "[rope] key 'attention_factor' is not used by rope_type 'llama3'");
  // The first unused key, in field order, is named.
  RopeScaling two = make(RopeType::kLinear);
  two.factor = 2.0;
  two.low_freq_factor = 1.0;
  two.beta_slow = 1.0;
  expect_error([&] { validate(two, 64, 10000.0); }, "[rope] key 'beta_slow' is not used by rope_type 'linear'");
}

TEST(RopeScaling, MissingKeys) {
  expect_error([] { validate(make(RopeType::kLinear), 64, 10000.0); }, "[rope] linear needs factor");
  expect_error([] { validate(make(RopeType::kNtk), 64, 10000.0); }, "[rope] ntk needs factor");
  RopeScaling dyn = make(RopeType::kDynamic);
  expect_error([&] { validate(dyn, 64, 10000.0); }, "[rope] dynamic needs factor");
  dyn.factor = 2.0;
  expect_error([&] { validate(dyn, 64, 10000.0); }, "[rope] dynamic needs original_max_position_embeddings");
  RopeScaling y = make(RopeType::kYarn);
  y.original_max_position_embeddings = 4096;
  expect_error([&] { validate(y, 64, 10000.0); }, "[rope] yarn needs factor (or max_position_embeddings)");
  y = make(RopeType::kYarn);
  y.factor = 4.0;
  expect_error([&] { validate(y, 64, 10000.0); }, "[rope] yarn needs original_max_position_embeddings");
  RopeScaling l = make(RopeType::kLongrope);
  l.original_max_position_embeddings = 4096;
  l.short_factor = l.long_factor = std::vector<double>(32, 1.0);
  expect_error([&] { validate(l, 64, 10000.0); },
               "[rope] longrope needs factor, max_position_embeddings or attention_factor");
  l.attention_factor = 1.2;
  EXPECT_NO_THROW(validate(l, 64, 10000.0));
  l.original_max_position_embeddings.reset();
  expect_error([&] { validate(l, 64, 10000.0); }, "[rope] longrope needs original_max_position_embeddings");
  l.original_max_position_embeddings = 4096;
  l.short_factor.clear();
  expect_error([&] { validate(l, 64, 10000.0); }, "[rope] longrope needs short_factor");
  l.short_factor = std::vector<double>(32, 1.0);
  l.long_factor.clear();
  expect_error([&] { validate(l, 64, 10000.0); }, "[rope] longrope needs long_factor");
  RopeScaling ll = make(RopeType::kLlama3);
  expect_error([&] { validate(ll, 64, 10000.0); }, "[rope] llama3 needs factor");
  ll.factor = 8.0;
  expect_error([&] { validate(ll, 64, 10000.0); }, "[rope] llama3 needs original_max_position_embeddings");
  ll.original_max_position_embeddings = 8192;
  expect_error([&] { validate(ll, 64, 10000.0); }, "[rope] llama3 needs low_freq_factor");
  ll.low_freq_factor = 1.0;
  expect_error([&] { validate(ll, 64, 10000.0); }, "[rope] llama3 needs high_freq_factor");
  ll.high_freq_factor = 4.0;
  EXPECT_NO_THROW(validate(ll, 64, 10000.0));
}

TEST(RopeScaling, RangeErrors) {
  RopeScaling lin = make(RopeType::kLinear);
  for (auto [value, text] : {std::pair{0.0, "0"}, std::pair{-2.0, "-2"}, std::pair{double(NAN), "nan"},
                             std::pair{double(INFINITY), "inf"}}) {
    lin.factor = value;
    expect_error([&] { validate(lin, 64, 10000.0); }, std::string("[rope] factor must be finite and > 0, got ") + text);
  }
  RopeScaling dyn = make(RopeType::kDynamic);
  dyn.factor = 2.0;
  dyn.original_max_position_embeddings = 0;
  expect_error([&] { validate(dyn, 64, 10000.0); }, "[rope] original_max_position_embeddings must be positive, got 0");
  dyn.original_max_position_embeddings = 4096;
  expect_error([&] { validate(dyn, 2, 10000.0); }, "[rope] dim must be > 2 for rope_type 'dynamic', got 2");
  RopeScaling ntk = make(RopeType::kNtk);
  ntk.factor = 2.0;
  expect_error([&] { validate(ntk, 2, 10000.0); }, "[rope] dim must be > 2 for rope_type 'ntk', got 2");

  RopeScaling y = make(RopeType::kYarn);
  y.original_max_position_embeddings = 4096;
  y.max_position_embeddings = -1;
  expect_error([&] { validate(y, 64, 10000.0); }, "[rope] max_position_embeddings must be positive, got -1");
  y.max_position_embeddings.reset();
  y.factor = 4.0;
  y.beta_fast = 0.0;
  expect_error([&] { validate(y, 64, 10000.0); }, "[rope] beta_fast must be finite and > 0, got 0");
  y.beta_fast = 32.0;
  y.beta_slow = NAN;
  expect_error([&] { validate(y, 64, 10000.0); }, "[rope] beta_slow must be finite and > 0, got nan");
  y.beta_slow = 32.0;
  EXPECT_NO_THROW(validate(y, 64, 10000.0));  // equal betas: accepted as HF does (tests/hf)
  y.beta_fast.reset();
  y.beta_slow = 40.0;  // against the default beta_fast = 32
  expect_error([&] { validate(y, 64, 10000.0); }, "[rope] beta_fast must be at least beta_slow (40), got 32");
  y.beta_slow.reset();
  y.mscale = -1.0;
  expect_error([&] { validate(y, 64, 10000.0); }, "[rope] mscale must be finite and >= 0, got -1");
  y.mscale = 1.0;
  y.mscale_all_dim = INFINITY;
  expect_error([&] { validate(y, 64, 10000.0); }, "[rope] mscale_all_dim must be finite and >= 0, got inf");
  y.mscale_all_dim = 0.0;
  y.attention_factor = 0.0;
  expect_error([&] { validate(y, 64, 10000.0); }, "[rope] attention_factor must be finite and > 0, got 0");
  y.attention_factor.reset();
  expect_error([&] { validate(y, 64, 1.0); }, "[rope] base must be > 1 for rope_type 'yarn', got 1");
  EXPECT_NO_THROW(validate(y, 64, 10000.0));

  RopeScaling l = make(RopeType::kLongrope);
  l.factor = 4.0;
  l.original_max_position_embeddings = 4096;
  l.short_factor = std::vector<double>(31, 1.0);
  l.long_factor = std::vector<double>(32, 1.0);
  expect_error([&] { validate(l, 64, 10000.0); }, "[rope] longrope short_factor must have dim/2 = 32 values, got 31");
  l.short_factor = std::vector<double>(32, 1.0);
  l.long_factor = std::vector<double>(33, 1.0);
  expect_error([&] { validate(l, 64, 10000.0); }, "[rope] longrope long_factor must have dim/2 = 32 values, got 33");
  l.long_factor = std::vector<double>(32, 1.0);
  l.long_factor[5] = 0.0;
  expect_error([&] { validate(l, 64, 10000.0); }, "[rope] longrope long_factor[5] must be finite and > 0, got 0");
  l.long_factor[5] = 1.0;
  l.short_factor[0] = NAN;
  expect_error([&] { validate(l, 64, 10000.0); }, "[rope] longrope short_factor[0] must be finite and > 0, got nan");
  l.short_factor[0] = 1.0;
  l.original_max_position_embeddings = 1;
  expect_error([&] { validate(l, 64, 10000.0); },
               "[rope] original_max_position_embeddings must be > 1 for the longrope attention factor, got 1");
  l.factor = 1.0;  // no attention scaling needed: ln(L0) is never used
  EXPECT_NO_THROW(validate(l, 64, 10000.0));

  RopeScaling ll = make(RopeType::kLlama3);
  ll.factor = 8.0;
  ll.original_max_position_embeddings = 8192;
  ll.low_freq_factor = 0.0;
  ll.high_freq_factor = 4.0;
  expect_error([&] { validate(ll, 64, 10000.0); }, "[rope] low_freq_factor must be finite and > 0, got 0");
  ll.low_freq_factor = 4.0;
  expect_error([&] { validate(ll, 64, 10000.0); },
               "[rope] high_freq_factor must be finite and greater than low_freq_factor (4), got 4");
  ll.high_freq_factor = INFINITY;
  expect_error([&] { validate(ll, 64, 10000.0); },
               "[rope] high_freq_factor must be finite and greater than low_freq_factor (4), got inf");
}

TEST(RopeScaling, ErrorsNameTheCaller) {
  RopeScaling lin = make(RopeType::kLinear);
  lin.factor = 0.0;
  expect_error([&] { rope_frequencies(64, 10000.0, lin, {}, "mrope"); },
               "[mrope] factor must be finite and > 0, got 0");
}

}  // namespace
}  // namespace posenc::kernels
