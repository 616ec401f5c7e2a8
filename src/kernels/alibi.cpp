// Placeholder: filled in by the issue-4 kernel work.
#include "posenc/kernels/alibi.h"
