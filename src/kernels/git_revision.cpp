#include "posenc/kernels/build_info.h"
#include "posenc_git_revision.h"

namespace posenc::kernels {

std::string_view git_revision() noexcept { return POSENC_GIT_REVISION; }

}  // namespace posenc::kernels
