// Private: the check of CoPE's table, shared by the cope_bias op and the
// attention's tile kind "cope" (both in ops/cope.cpp).
#pragma once

#include <ATen/ATen.h>

namespace posenc::nn::detail {

// e floating, on the CPU, 2-D [npos >= 1, Dh] with Dh = q's last size, finite:
// "[attention] cope_e must be [npos, Dh] with npos >= 1 and Dh = 8, got (16, 4)".
void check_cope(const char* op, const char* name, const at::Tensor& e, const at::Tensor& q);

}  // namespace posenc::nn::detail
