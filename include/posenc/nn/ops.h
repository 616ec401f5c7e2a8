// Every posenc op from C++, one header per op family:
//   absolute_ops.h  sinusoidal, learned, learnable sinusoidal, naive kinds, 2D/3D grids
//   rope_ops.h      RoPE, axial RoPE, M-RoPE, xPos, re-rotation, Hugging Face scalings
//   relative_ops.h  relative logits and values (Shaw, sinusoidal relative, 2D relative)
//   bias_ops.h      ALiBi and T5 biases
//   attention_ops.h attention with positional terms (fused and composed)
#pragma once

#include "posenc/nn/absolute_ops.h"
#include "posenc/nn/attention_ops.h"
#include "posenc/nn/bias_ops.h"
#include "posenc/nn/relative_ops.h"
#include "posenc/nn/rope_ops.h"
