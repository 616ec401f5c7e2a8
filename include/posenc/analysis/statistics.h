// Small-sample statistics for comparing encodings across seeds: the paired
// t-test (two-sided, Student's t with n - 1 degrees of freedom), Pearson and
// Spearman correlations (and the pair a Pearson correlation rests on most),
// the Student t distribution they rest on, and Holm's correction for a family
// of tests.
// Inputs are plain vectors; errors throw std::invalid_argument "[stats] ...".
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace posenc::analysis {

struct MeanSd {
  double mean = 0;
  double sd = 0;  // sample standard deviation (n - 1); 0 for one value
  int64_t n = 0;
};
// "[stats] values must not be empty".
MeanSd mean_sd(const std::vector<double>& values);

// I_x(a, b), the regularized incomplete beta function, for a, b > 0 and x in [0, 1].
double regularized_incomplete_beta(double a, double b, double x);

// P(|T| >= |t|) for T ~ Student t with nu > 0 degrees of freedom (two-sided tail).
double student_t_two_sided_p(double t, double nu);

struct PairedTTest {
  double mean_difference = 0;  // mean of a_i - b_i
  double t = 0;                // mean / (sd / sqrt(n)); +-inf when every difference is the same non-zero value
  double p = 1;                // two-sided; 1 when every difference is 0
  int64_t n = 0;
};
// a and b paired by index (the same seed). "[stats] paired samples must have the same size, got 5 and 4";
// "[stats] a paired t-test needs >= 2 pairs, got 1".
PairedTTest paired_t_test(const std::vector<double>& a, const std::vector<double>& b);

// NaN when either sample is constant. Same size, >= 2 values (errors as above).
double pearson_correlation(const std::vector<double>& x, const std::vector<double>& y);
// Pearson of the ranks (ties share their mean rank).
double spearman_correlation(const std::vector<double>& x, const std::vector<double>& y);

// Two-sided p of "no correlation" for a sample correlation r over n pairs: t = r sqrt((n - 2) / (1 - r^2)) against
// Student's t with n - 2 degrees of freedom (exact for Pearson's r of normal samples; for Spearman's rho the
// usual approximation). 0 when |r| = 1, NaN when r is NaN. "[stats] a correlation test needs >= 3 pairs, got 2";
// "[stats] r must be in [-1, 1], got 1.5".
double correlation_p(double r, int64_t n);
// Two-sided p of "no correlation" for Spearman's rho of x and y: exact up to kExactSpearmanPairs pairs (the share
// of the n! orderings of y's ranks whose |rho| reaches the observed one; ties keep their mean ranks), else
// correlation_p(rho, n). NaN when either sample is constant. Errors as correlation_p and pearson_correlation.
inline constexpr int64_t kExactSpearmanPairs = 10;
double spearman_p(const std::vector<double>& x, const std::vector<double>& y);

// Pearson's r with each pair left out in turn: the pair whose removal moves r the most, and r without it. Across a
// handful of encodings a correlation can rest on one of them; this names it. A NaN r (a sample constant without
// the pair) counts as the largest move. "[stats] leaving one pair out needs >= 4 pairs, got 3" (3 left to
// correlate); sizes as pearson_correlation.
struct LeaveOneOut {
  size_t index = 0;     // the pair left out
  double r_without = 0; // Pearson's r of the others
};
LeaveOneOut most_influential_pair(const std::vector<double>& x, const std::vector<double>& y);

// Holm's step-down adjustment of a family of p-values (controls the chance of any false "p < alpha" among them
// at alpha, whatever their dependence): with the m defined values sorted ascending, the k-th (from 1) becomes
// max over j <= k of min(1, (m - j + 1) p_(j)). Returned in the input's order; a NaN stays NaN and does not count
// in m. "[stats] p-values must be in [0, 1], got 1.5".
std::vector<double> holm_adjusted(const std::vector<double>& p);

}  // namespace posenc::analysis
