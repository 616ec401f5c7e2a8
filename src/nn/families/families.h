// Internal to the descriptors: how a descriptor file enters the catalog, and
// the builders of parameters the family files share.
#pragma once

#include <string>
#include <vector>

#include "posenc/nn/encoding_family.h"

namespace posenc::nn::families {

// A file that defines families registers them at load time with one
// namespace-scope `const Registration registered(rank, add);`, so adding a
// family edits no list. add appends the file's families; rank orders the
// files in `posenc encodings` (ascending, each rank once; none 10, input 20,
// query/key 30, logit bias 40-80, relative vectors 90-100).
using AddFamilies = void (*)(std::vector<EncodingFamily>&);
struct Registration {
  Registration(int rank, AddFamilies add);
};

// A real setting in [lower, upper] (open ends as flagged); no upper bound by default.
EncodingParameter real(std::string name, double EncodingConfig::*field, std::string meaning, double lower,
                       bool lower_open, double upper = 1e300, bool upper_open = false);
// An integer setting >= lower.
EncodingParameter integer(std::string name, int64_t EncodingConfig::*field, std::string meaning, int64_t lower);

// Settings several families read.
EncodingParameter base_parameter(std::string meaning);  // "base", > 0
EncodingParameter init_std_parameter();                 // "init_std", >= 0
EncodingParameter max_distance_parameter();             // "max_distance", >= 0

}  // namespace posenc::nn::families
