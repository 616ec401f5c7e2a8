#include "posenc/kernels/rope_scaling.h"
