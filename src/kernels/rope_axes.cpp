#include "posenc/kernels/rope_axes.h"
