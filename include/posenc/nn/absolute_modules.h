// Every input-point (absolute) encoding module of posenc::nn.
#pragma once

#include "posenc/nn/input_encoding.h"
#include "posenc/nn/learnable_sinusoidal_encoding.h"
#include "posenc/nn/learned_encoding.h"
#include "posenc/nn/sinusoidal_encoding.h"
#include "posenc/nn/sinusoidal_grid_encoding.h"
