// Runs the registered benchmarks and keeps each one's time per iteration, so
// that a benchmark binary can print ratios measured within the same run.
#pragma once

#include <map>
#include <string>

namespace posenc::bench {

// Seconds per iteration (real time), keyed by benchmark name; the fastest
// repetition when a benchmark is repeated.
std::map<std::string, double> run_benchmarks(int argc, char** argv);

// Time of the benchmark whose name starts with `prefix`; throws if absent.
double seconds_of(const std::map<std::string, double>& times, const std::string& prefix);

}  // namespace posenc::bench
