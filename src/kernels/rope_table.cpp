#include "posenc/kernels/rope.h"
