// Internal to the descriptors: the builders the family files share and the
// functions catalog.cpp calls, one per file, in catalog order.
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

void add_no_encoding(std::vector<EncodingFamily>& out);  // none, nope
void add_input(std::vector<EncodingFamily>& out);        // sinusoidal, learned, learnable-sinusoidal
void add_rotary(std::vector<EncodingFamily>& out);       // rope, p-rope, rope-xpos
void add_bias(std::vector<EncodingFamily>& out);         // alibi, t5
void add_kerple(std::vector<EncodingFamily>& out);       // kerple, kerple-power
void add_relative(std::vector<EncodingFamily>& out);     // shaw, shaw-sinusoidal, shaw-learnable-sinusoidal, xl

}  // namespace posenc::nn::families
