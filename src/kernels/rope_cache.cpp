#include "posenc/kernels/rope_cache.h"
