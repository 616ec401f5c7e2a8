// Internal to the descriptors: the builders of parameters the family files
// share. Each family file defines one add_*(std::vector<EncodingFamily>&)
// that catalog.cpp declares and calls.
#pragma once

#include <string>
#include <vector>

#include "posenc/nn/encoding_family.h"

namespace posenc::nn::families {

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
