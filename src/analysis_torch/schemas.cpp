// The analysis ops' schemas (torch.ops.posenc.*), in one place. They extend
// the posenc namespace of libposenc_nn.so (a fragment), from a library of
// their own so the op library stays free of the analysis and io layers.
//
// Analysis is measurement, not a model: the ops run on the CPU in float64
// and have no autograd kernel (their outputs never require grad). A tensor
// argument may have any real dtype (bool, integer, floating point) and any
// strides; it is converted to float64 once. Kernels: analysis_ops.cpp (CPU),
// tensor_file_ops.cpp and identical_word.cpp (CompositeExplicitAutograd:
// they take no tensor, or a list that may be empty).
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(posenc, m) {
  // S [n, n] = table [n, d] . table^T (dot) or the cosine of the rows (analysis/proximity.h).
  m.def("proximity(Tensor table, str kind=\"dot\") -> Tensor");
  // (monotonicity, translation_invariance, symmetry, monotonicity_violation_rate,
  // within_diagonal_variance_share, window) of a square matrix (analysis/indicators.h).
  m.def("indicators(Tensor matrix, int? window=None) -> (float, float, float, float, float, int)");
  // (range, all_censored, min, max, mean, uncensored_rows, per_row int64 [n]) (analysis/monotone_range.h).
  m.def("monotone_range(Tensor matrix) -> (int, bool, int, int, float, int, Tensor)");
  // Least-squares translation operator, judged out of sample (analysis/translation_fit.h):
  // (method, deltas, residuals, max_residual); deltas None: 1, 2, 4, ... up to n / 4.
  m.def("translation_residual(Tensor table, int[]? deltas=None, int folds=5, int seed=0) "
        "-> (str, int[], float[], float)");
  // (absolute_mae, relative_error, folds, seed, pairs, protocol) (analysis/probes.h); pairs None: the protocol's.
  m.def("probe(Tensor table, int folds=5, int seed=0, int? pairs=None, str protocol=\"default\") "
        "-> (float, float, int, int, int, str)");

  // .npy / .safetensors files (io/tensor_file.h): every tensor, in file order; one
  // tensor (name None: the only one, or the position table); writing (metadata: .safetensors only).
  m.def("load_tensors(str path) -> (str[], Tensor[])");
  m.def("load_tensor(str path, str? name=None) -> (str, Tensor)");
  m.def("save_tensors(str path, str[] names, Tensor[] tensors, Dict(str, str)? metadata=None) -> ()");

  // A dumped tensor against posenc's values, the report as JSON (check/check.h, check_op.cpp).
  m.def("check(Tensor? tensor, str? path, str? tensor_name, Tensor? input, str? input_path, str? input_name, "
        "str kind, str? what, int[]? positions, str options) -> str");

  // Identical-word probing of a trained run (analysis/identical_word.h): float64 [T, T].
  m.def("identical_word_attention(str run_dir, int length=0, int words=64) -> Tensor");
}
