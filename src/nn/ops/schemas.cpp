// Every posenc op's schema, in one place (torch.ops.posenc.*). Kernels are
// registered per dispatch key next to their code: CPU in ops/cpu/, Autograd
// in ops/autograd/, the routing ops (absolute, absolute_range) as
// CompositeImplicitAutograd in ops/absolute.cpp. Ops without a tensor
// argument (the *_range tables, the grids, translation_matrix) are
// registered under CompositeExplicitAutograd: the dispatcher has no tensor to
// read a backend from, and they produce CPU tensors.
//
// Conventions: positions are integer tensors of any shape S and a table is
// S + [dim]; `dtype` None means float32; layout is "interleaved" | "half" |
// "cos-sin"; precision is "exact" | "fp32" (kernels/sinusoidal.h).
#include <torch/library.h>

TORCH_LIBRARY(posenc, m) {
  // Fixed sinusoidal table (kernels/sinusoidal.h).
  m.def(
      "sinusoidal(Tensor positions, int dim, float base=10000.0, float scale=1.0, "
      "str layout=\"interleaved\", str precision=\"exact\", ScalarType? dtype=None) -> Tensor");
  // Positions start .. start+count-1: [count, dim] (rotation recurrence along positions).
  m.def(
      "sinusoidal_range(int start, int count, int dim, float base=10000.0, float scale=1.0, "
      "str layout=\"interleaved\", str precision=\"exact\", ScalarType? dtype=None) -> Tensor");
  // omega_i = base^(-2i/dim), float64 [dim/2].
  m.def("sinusoidal_frequencies(int dim, float base=10000.0) -> Tensor");

  // The parameter-only kinds of kernels/absolute.h (sinusoidal, index,
  // normalized, binary, signed-binary, sine-binary, sine-only).
  m.def(
      "absolute_table(str kind, Tensor positions, int dim, float base=10000.0, float scale=1.0, "
      "str layout=\"interleaved\", str precision=\"exact\", int length=0, ScalarType? dtype=None) -> Tensor");
  m.def(
      "absolute_table_range(str kind, int start, int count, int dim, float base=10000.0, float scale=1.0, "
      "str layout=\"interleaved\", str precision=\"exact\", int length=0, ScalarType? dtype=None) -> Tensor");
  // Every absolute kind: the table kinds above plus "learned" (needs table,
  // [rows, dim]) and "learnable-sinusoidal" (omega [dim/2], default the fixed
  // frequencies). dtype None: the table's / omega's dtype, else float32.
  m.def(
      "absolute(str kind, Tensor positions, int dim, float base=10000.0, float scale=1.0, "
      "str layout=\"interleaved\", str precision=\"exact\", int length=0, ScalarType? dtype=None, "
      "Tensor? table=None, Tensor? omega=None) -> Tensor");
  m.def(
      "absolute_range(str kind, int start, int count, int dim, float base=10000.0, float scale=1.0, "
      "str layout=\"interleaved\", str precision=\"exact\", int length=0, ScalarType? dtype=None, "
      "Tensor? table=None, Tensor? omega=None) -> Tensor");
  m.def("absolute_kinds() -> str[]");

  // Sinusoids with learnable frequencies (kernels/learnable_sinusoidal.h),
  // differentiable with respect to omega [D/2]; output in omega's dtype.
  m.def("learnable_sinusoidal(Tensor positions, Tensor omega, str layout=\"interleaved\", float scale=1.0) -> Tensor");
  m.def(
      "learnable_sinusoidal_backward(Tensor grad_out, Tensor positions, Tensor omega, str layout, float scale) "
      "-> Tensor");

  // Learned table lookup (kernels/learned.h), differentiable with respect to table [rows, dim].
  m.def("learned(Tensor table, Tensor positions) -> Tensor");
  m.def("learned_backward(Tensor grad_out, Tensor positions, int rows) -> Tensor");

  // 2D / 3D grids (kernels/sinusoidal_nd.h): [height*width, dim] and [frames*height*width, dim].
  m.def(
      "sinusoidal_2d(int height, int width, int dim, float base=10000.0, float scale=1.0, "
      "str layout=\"interleaved\", str precision=\"exact\", bool normalize=False, "
      "float normalize_scale=6.283185307179586, ScalarType? dtype=None) -> Tensor");
  m.def(
      "sinusoidal_3d(int frames, int height, int width, int dim, float base=10000.0, float scale=1.0, "
      "str layout=\"interleaved\", str precision=\"exact\", bool normalize=False, "
      "float normalize_scale=6.283185307179586, ScalarType? dtype=None) -> Tensor");

  // T(delta) with PE[p + delta] = T(delta) PE[p] (kernels/translation.h): float64 [dim, dim].
  m.def("translation_matrix(float delta, int dim, float base=10000.0, str layout=\"interleaved\") -> Tensor");
}
