// Every posenc op's schema, in one place (torch.ops.posenc.*). Kernels are
// registered per dispatch key next to their code: CPU in ops/<family>/cpu*.cpp,
// Autograd in ops/<family>/autograd*.cpp, the routing ops (absolute,
// absolute_range) as CompositeImplicitAutograd in ops/absolute/routing.cpp. Ops without a tensor
// argument (the *_range tables, the grids, translation_matrix) are
// registered under CompositeExplicitAutograd: the dispatcher has no tensor to
// read a backend from, and they produce CPU tensors.
//
// Conventions: positions are integer tensors of any shape S and a table is
// S + [dim]; `dtype` None means float32; layout is "interleaved" | "half" |
// "cos-sin"; precision is "exact" | "fp32" (kernels/sinusoidal.h).
//
// RoPE (kernels/rope*.h): x is (..., T, D) and positions (T) or (B, T) with x
// (B, ..., T, D); rope layout is "half" | "interleaved"; rotary_dim None is D;
// seq_len None is max position + 1 (it selects the regime of dynamic and
// longrope). A scaling is a torch.classes.posenc.RopeScaling (one keyword
// per Hugging Face rope_scaling key), None meaning unscaled RoPE. Tables
// cos/sin are S + [R/2], attention factor included, float32 unless dtype
// says otherwise.
#include <torch/custom_class.h>
#include <torch/library.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "ops/attention/term_spec_object.h"
#include "ops/rope/support.h"

#define POSENC_SCALING "__torch__.torch.classes.posenc.RopeScaling"
#define POSENC_TERM_SPEC "__torch__.torch.classes.posenc.TermSpec"

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

  // ---- RoPE --------------------------------------------------------------
  // The scaling object, built once from a rope_scaling dict's keys.
  using posenc::nn::detail::RopeScalingObject;
  m.class_<RopeScalingObject>("RopeScaling")
      .def(torch::init([](const c10::optional<std::string>& rope_type, const c10::optional<std::string>& type,
                          c10::optional<double> factor, c10::optional<int64_t> original_max_position_embeddings,
                          c10::optional<int64_t> max_position_embeddings, c10::optional<double> beta_fast,
                          c10::optional<double> beta_slow, c10::optional<double> mscale,
                          c10::optional<double> mscale_all_dim, c10::optional<bool> truncate,
                          c10::optional<double> attention_factor,
                          const c10::optional<std::vector<double>>& short_factor,
                          const c10::optional<std::vector<double>>& long_factor,
                          c10::optional<double> low_freq_factor, c10::optional<double> high_freq_factor,
                          c10::optional<double> partial_rotary_factor) {
             return c10::make_intrusive<RopeScalingObject>(posenc::nn::detail::make_rope_scaling(
                 rope_type, type, factor, original_max_position_embeddings, max_position_embeddings, beta_fast,
                 beta_slow, mscale, mscale_all_dim, truncate, attention_factor, short_factor, long_factor,
                 low_freq_factor, high_freq_factor, partial_rotary_factor));
           }),
           "",
           {torch::arg("rope_type") = torch::arg::none(), torch::arg("type") = torch::arg::none(),
            torch::arg("factor") = torch::arg::none(),
            torch::arg("original_max_position_embeddings") = torch::arg::none(),
            torch::arg("max_position_embeddings") = torch::arg::none(), torch::arg("beta_fast") = torch::arg::none(),
            torch::arg("beta_slow") = torch::arg::none(), torch::arg("mscale") = torch::arg::none(),
            torch::arg("mscale_all_dim") = torch::arg::none(), torch::arg("truncate") = torch::arg::none(),
            torch::arg("attention_factor") = torch::arg::none(), torch::arg("short_factor") = torch::arg::none(),
            torch::arg("long_factor") = torch::arg::none(), torch::arg("low_freq_factor") = torch::arg::none(),
            torch::arg("high_freq_factor") = torch::arg::none(),
            torch::arg("partial_rotary_factor") = torch::arg::none()})
      .def("rope_type", [](const c10::intrusive_ptr<RopeScalingObject>& self) {
        return std::string(posenc::kernels::rope_type_name(self->scaling.type));
      });
  // The keys the RopeScaling constructor accepts.
  m.def("rope_scaling_keys() -> str[]");
  // Hugging Face config.json text -> the normalized positional scheme as JSON (ops/hf_config.cpp).
  m.def("hf_config(str text, str source=\"config.json\") -> str");
  // The "goes to" message for an HF key misplaced in a rope_scaling dict, or "".
  m.def("hf_misplaced_scaling_key(str key, str op=\"rope\") -> str");

  // Frequencies: (inv_freq float64 [dim/2], attention factor); seq_len None is the original length.
  m.def("rope_inv_freq(int dim, float base=10000.0, " POSENC_SCALING "? scaling=None, int? seq_len=None) "
        "-> (Tensor, float)");
  // cos/sin tables: positions S -> S + [dim/2] each.
  m.def("rope_cos_sin(Tensor positions, int dim, float base=10000.0, " POSENC_SCALING "? scaling=None, "
        "int? seq_len=None, str precision=\"exact\", ScalarType? dtype=None) -> (Tensor, Tensor)");
  // Positions start .. start+count-1 -> [count, dim/2] (rotation recurrence); seq_len None is start+count.
  m.def("rope_cos_sin_range(int start, int count, int dim, float base=10000.0, " POSENC_SCALING "? scaling=None, "
        "int? seq_len=None, str precision=\"exact\", ScalarType? dtype=None) -> (Tensor, Tensor)");
  // Axial: coords S + [n_axes] -> S + [R/2]; dims_per_axis [] is the even split of rotary_dim;
  // scaling None, one shared, or one per axis; seq_len None is max coordinate + 1 per axis.
  m.def("rope_axial_cos_sin(Tensor coords, int rotary_dim, int[] dims_per_axis=[], float base=10000.0, "
        POSENC_SCALING "[]? scaling=None, int[]? seq_len=None, str precision=\"exact\", ScalarType? dtype=None) "
        "-> (Tensor, Tensor)");
  // M-RoPE: positions3 [3] + S (t, h, w) -> S + [R/2].
  m.def("mrope_cos_sin(Tensor positions3, int rotary_dim, int[] mrope_section, bool interleaved=False, "
        "float base=10000.0, " POSENC_SCALING "? scaling=None, int? seq_len=None, str precision=\"exact\", "
        "ScalarType? dtype=None) -> (Tensor, Tensor)");
  // xPos: the tables of queries (keys=False, zeta^((p-center)/scale_base)) or keys (its inverse).
  m.def("xpos_cos_sin(Tensor positions, int rotary_dim, float scale_base=512.0, float gamma=0.4, "
        "float center=0.0, bool keys=False, float base=10000.0, str precision=\"exact\", ScalarType? dtype=None) "
        "-> (Tensor, Tensor)");
  // Re-rotation: angle to*omega_to - from*omega_from, factor af_to/af_from; to_* None: the from ones
  // (to_seq_len: seq_len when given, else max(to_positions) + 1).
  m.def("rope_rerotate_cos_sin(Tensor from_positions, Tensor to_positions, int dim, float base=10000.0, "
        POSENC_SCALING "? scaling=None, int? seq_len=None, float? to_base=None, " POSENC_SCALING
        "? to_scaling=None, int? to_seq_len=None, str precision=\"exact\", ScalarType? dtype=None) "
        "-> (Tensor, Tensor)");

  // Rotation by given tables, cos/sin (T, R/2) or (B, T, R/2): differentiable wrt x, cos and sin;
  // the backward wrt x is the inverse rotation. The in-place form is not differentiable.
  m.def("rope_rotate(Tensor x, Tensor cos, Tensor sin, str layout=\"half\", bool inverse=False) -> Tensor");
  m.def("rope_rotate_(Tensor(a!) x, Tensor cos, Tensor sin, str layout=\"half\", bool inverse=False) "
        "-> Tensor(a!)");
  // Rotation by learned frequencies omega [R/2] (angle p*omega): differentiable wrt x and omega
  // (the in-place form is not).
  m.def("rope_rotate_omega(Tensor x, Tensor positions, Tensor omega, str layout=\"half\", bool inverse=False, "
        "str precision=\"exact\") -> Tensor");
  m.def("rope_rotate_omega_(Tensor(a!) x, Tensor positions, Tensor omega, str layout=\"half\", "
        "bool inverse=False, str precision=\"exact\") -> Tensor(a!)");
  m.def("rope_rotate_omega_backward(Tensor grad, Tensor x, Tensor positions, Tensor omega, str layout, "
        "bool inverse, str precision, bool[2] output_mask) -> (Tensor, Tensor)");

  // The whole operations: tables, then rotation (differentiable wrt x, and omega when given).
  m.def("rope(Tensor x, Tensor positions, float base=10000.0, str layout=\"half\", int? rotary_dim=None, "
        POSENC_SCALING "? scaling=None, int? seq_len=None, bool inverse=False, str precision=\"exact\", "
        "Tensor? omega=None) -> Tensor");
  m.def("rope_(Tensor(a!) x, Tensor positions, float base=10000.0, str layout=\"half\", int? rotary_dim=None, "
        POSENC_SCALING "? scaling=None, int? seq_len=None, bool inverse=False, str precision=\"exact\", "
        "Tensor? omega=None) -> Tensor(a!)");
  // coords (T, n_axes) or (B, T, n_axes).
  m.def("rope_axial(Tensor x, Tensor coords, int[] dims_per_axis=[], float base=10000.0, str layout=\"half\", "
        "int? rotary_dim=None, " POSENC_SCALING "[]? scaling=None, int[]? seq_len=None, bool inverse=False, "
        "str precision=\"exact\") -> Tensor");
  // positions3 (3, T) or (3, B, T).
  m.def("mrope(Tensor x, Tensor positions3, int[] mrope_section, bool interleaved=False, float base=10000.0, "
        "str layout=\"half\", int? rotary_dim=None, " POSENC_SCALING "? scaling=None, int? seq_len=None, "
        "bool inverse=False, str precision=\"exact\") -> Tensor");
  // (q', k'): q scaled by zeta^((p-center)/scale_base), k by its inverse, both rotated.
  m.def("xpos(Tensor q, Tensor k, Tensor positions, float scale_base=512.0, float gamma=0.4, float center=0.0, "
        "float base=10000.0, str layout=\"half\", int? rotary_dim=None, str precision=\"exact\") "
        "-> (Tensor, Tensor)");
  // Keys rotated at from_positions become keys rotated at to_positions, in one rotation.
  m.def("rerotate(Tensor k, Tensor from_positions, Tensor to_positions, float base=10000.0, "
        "str layout=\"half\", int? rotary_dim=None, " POSENC_SCALING "? scaling=None, int? seq_len=None, "
        "float? to_base=None, " POSENC_SCALING "? to_scaling=None, int? to_seq_len=None, "
        "str precision=\"exact\") -> Tensor");
  m.def("rerotate_(Tensor(a!) k, Tensor from_positions, Tensor to_positions, float base=10000.0, "
        "str layout=\"half\", int? rotary_dim=None, " POSENC_SCALING "? scaling=None, int? seq_len=None, "
        "float? to_base=None, " POSENC_SCALING "? to_scaling=None, int? to_seq_len=None, "
        "str precision=\"exact\") -> Tensor(a!)");

  // ---- Relative position vectors (kernels/relative.h, relative_2d.h; docs/relative.md) ----------
  // Table row r holds offset r - k, k = max_distance; query i and key j use row
  // clip(j - (i + query_offset), -k, k) + k. A table is [2k+1, Dh] (shared by the heads) or
  // [H, 2k+1, Dh]. Inputs float32/float64/bfloat16/float16; the output has the input's dtype.
  // q (B, H, Tq, Dh) -> (B, H, Tq, Tk), k_len None meaning Tq; differentiable wrt q and table.
  m.def("relative_logits(Tensor q, Tensor table, int max_distance, int? k_len=None, int query_offset=0) -> Tensor");
  // probs (B, H, Tq, Tk) -> (B, H, Tq, Dh): sum_j probs[i, j] table[row(i, j)]; differentiable wrt both.
  m.def("relative_values(Tensor probs, Tensor table, int max_distance, int query_offset=0) -> Tensor");
  // The table gradient of both: weights (B, H, Tq, Tk), x (B, H, Tq, Dh) -> [tables, 2k+1, Dh]
  // (tables 1: summed over heads). Differentiable (its derivatives are the two ops above).
  m.def("relative_table_grad(Tensor weights, Tensor x, int max_distance, int tables, int query_offset=0) -> Tensor");
  // 2D (BoTNet): rel_h (B, H, HW, 2*height-1), rel_w (B, H, HW, 2*width-1) -> (B, H, HW, HW), and its adjoint.
  m.def("relative_2d_expand(Tensor rel_h, Tensor rel_w, int height, int width) -> Tensor");
  m.def("relative_2d_reduce(Tensor grad, int height, int width) -> (Tensor, Tensor)");
  // q (B, H, HW, Dh), table_h [2*height-1, Dh] | [H, 2*height-1, Dh], table_w likewise over width:
  // the term q_(y,x) . (table_h[y'-y+height-1] + table_w[x'-x+width-1]); differentiable.
  m.def("relative_logits_2d(Tensor q, Tensor table_h, Tensor table_w, int height, int width) -> Tensor");
  // [2k+1, dim], row r the sinusoid of offset r - k (NEZHA); omega [dim/2]: learnable frequencies
  // (Wang et al. 2021), differentiable. dtype None: omega's dtype, else float32.
  m.def("sinusoidal_relative_table(int max_distance, int dim, float base=10000.0, Tensor? omega=None, "
        "str layout=\"interleaved\", ScalarType? dtype=None) -> Tensor");

  // ---- Attention biases (kernels/alibi.h, t5.h; docs/relative.md) -------------------------------
  // Queries are the last q_len of the k_len keys: query i sits at key position i + k_len - q_len.
  // ALiBi slopes [num_heads] (dtype None: float32) and the bias [num_heads, q_len, k_len],
  // -m_h |i' - j|, causal: -inf after the query.
  m.def("alibi_slopes(int num_heads, ScalarType? dtype=None) -> Tensor");
  m.def("alibi_bias(int num_heads, int q_len, int k_len, bool causal=False, ScalarType? dtype=None) -> Tensor");
  m.def("alibi_bias.out(int num_heads, int q_len, int k_len, bool causal=False, *, Tensor(a!) out) -> Tensor(a!)");
  // [num_heads, HW, HW], -m_h dist((y,x), (y',x')); distance "euclidean" | "manhattan".
  m.def("alibi_bias_2d(int num_heads, int height, int width, str distance=\"euclidean\", ScalarType? dtype=None) "
        "-> Tensor");
  // T5 buckets of relative positions (key - query), any integer tensor -> int64 of the same shape.
  m.def("t5_bucket(Tensor relative_position, bool bidirectional=True, int num_buckets=32, int max_distance=128) "
        "-> Tensor");
  // table [num_buckets, H] -> [H, q_len, k_len], differentiable wrt table; backward: grad -> [num_buckets, H].
  m.def("t5_bias(Tensor table, int q_len, int k_len, bool bidirectional=True, int max_distance=128) -> Tensor");
  m.def("t5_bias_backward(Tensor grad, int num_buckets, bool bidirectional, int max_distance) -> Tensor");
  // 2D: table_h[bucket(y'-y), h] + table_w[bucket(x'-x), h] -> [H, HW, HW]; differentiable wrt both tables.
  m.def("t5_bias_2d(Tensor table_h, Tensor table_w, int height, int width, bool bidirectional=True, "
        "int max_distance=128) -> Tensor");
  m.def("t5_bias_2d_backward(Tensor grad, int num_buckets, int height, int width, bool bidirectional, "
        "int max_distance) -> (Tensor, Tensor)");

  // ---- Attention (kernels/attention.h, posenc/nn/attention_ops.h; docs/attention.md) -------------
  // q (B, H, Tq, Dh), k (B, H, Tk, Dh), v (B, H, Tk, Dv) -> (out (B, H, Tq, Dv), weights (B, H, Tq, Tk),
  // or an empty tensor unless return_weights). Query i sits at key position i + Tk - Tq; scale None is
  // 1/sqrt(Dh) and multiplies q.k and the relative terms, not the biases; key_padding_mask (B, Tk) bool,
  // true = padding; a row with every key masked gives 0.
  // The public op (CompositeImplicitAutograd): ALiBi slopes [H], a T5 table [num_buckets, H]
  // (t5_bidirectional None: not causal), Shaw tables rel_k/rel_v [2K+1, D] | [H, 2K+1, D] (max_distance
  // None: read from rel_k), 2D relative tables over a rel_2d_height x rel_2d_width grid, Transformer-XL's
  // u/v [H, Dh], a dense bias broadcastable to (B, H, Tq, Tk). path "auto" (fused unless a gradient is
  // needed) | "composed" (differentiable) | "fused". Terms by point, for any family: offset_bias
  // [H, Tq + Tk - 1] (added to ALiBi's and T5's rows), grid_bias [H, 2Hg-1, 2Wg-1] (Tq = Tk = Hg*Wg), and
  // FIRE's per-tile bias (fire_*: the six tensors of the tile kind "fire", all six or none); CoPE's table
  // cope_e (the tile kind "cope"); DeBERTa's p2c table rel_q (as rel_k, k_j . rel_q[row]) and rel_index
  // int64 [2K+1] (rows of rel_k / rel_q for clip(j - i', -K, K) + K; max_distance None: read from it).
  // This op is the keyword sugar of posenc.attention (ops/attention/keywords.cpp): it builds the terms
  // and calls attention_fused below, or the composed path.
  m.def("attention(Tensor q, Tensor k, Tensor v, bool causal=False, Tensor? key_padding_mask=None, "
        "float? scale=None, Tensor? alibi_slopes=None, Tensor? t5_table=None, int t5_num_buckets=32, "
        "int t5_max_distance=128, bool? t5_bidirectional=None, Tensor? rel_k=None, Tensor? rel_v=None, "
        "int? max_distance=None, Tensor? rel_2d_h=None, Tensor? rel_2d_w=None, int rel_2d_height=0, "
        "int rel_2d_width=0, Tensor? xl_u=None, Tensor? xl_v=None, Tensor? bias=None, bool return_weights=False, "
        "str path=\"auto\", Tensor? offset_bias=None, Tensor? grid_bias=None, Tensor? fire_w1=None, "
        "Tensor? fire_b1=None, Tensor? fire_w2=None, Tensor? fire_b2=None, Tensor? fire_c=None, "
        "Tensor? fire_threshold=None, Tensor? cope_e=None, Tensor? rel_q=None, Tensor? rel_index=None) "
        "-> (Tensor, Tensor)");
  // The terms as a value (posenc/nn/attention_terms.h): a TermSpec lists typed entries, each
  // taking its tensors from the term list in order; the builder methods append one entry each
  // and return the spec.
  using posenc::nn::TermKind;
  using posenc::nn::detail::TermSpecObject;
  using Spec = c10::intrusive_ptr<TermSpecObject>;
  using posenc::nn::detail::append;
  m.class_<TermSpecObject>("TermSpec")
      .def(torch::init<>())
      .def("offset_rows", [](const Spec& self) { return append(self, TermKind::kOffsetRows); })
      .def("grid_rows", [](const Spec& self, int64_t height, int64_t width) {
        return append(self, TermKind::kGridRows, 0, height, width);
      })
      .def("dense_bias", [](const Spec& self) { return append(self, TermKind::kDenseBias); })
      .def("relative_keys", [](const Spec& self, int64_t max_distance) {
        return append(self, TermKind::kRelativeKeys, max_distance);
      })
      .def("relative_values", [](const Spec& self, int64_t max_distance) {
        return append(self, TermKind::kRelativeValues, max_distance);
      })
      .def("relative_queries", [](const Spec& self, int64_t max_distance) {
        return append(self, TermKind::kRelativeQueries, max_distance);
      })
      .def("relative_index", [](const Spec& self, int64_t max_distance) {
        return append(self, TermKind::kRelativeIndex, max_distance);
      })
      .def("content_shift", [](const Spec& self) { return append(self, TermKind::kContentShift); })
      .def("relative_shift", [](const Spec& self) { return append(self, TermKind::kRelativeShift); })
      .def("grid_tables", [](const Spec& self, int64_t height, int64_t width) {
        return append(self, TermKind::kGridTables, 0, height, width);
      })
      .def("tile", [](const Spec& self, const std::string& kind) {
        return append(self, TermKind::kTile, 0, 0, 0, kind);
      })
      .def("causal", [](const Spec& self) { return append(self, TermKind::kCausal); })
      // "[offset_rows, relative_keys(K=4), tile(fire)]"
      .def("describe", [](const Spec& self) { return self->spec.describe(); })
      .def("tensor_count", [](const Spec& self) { return self->spec.tensor_count(); })
      // Per entry, its name ("offset_rows", "tile(fire)") and how many tensors it takes from the list.
      .def("entry_names", [](const Spec& self) {
        std::vector<std::string> names;
        for (const auto& e : self->spec.entries) names.push_back(posenc::nn::term_entry_name(e));
        return names;
      })
      .def("entry_tensors", [](const Spec& self) {
        std::vector<int64_t> counts;
        for (const auto& e : self->spec.entries) counts.push_back(posenc::nn::term_entry_tensors(e));
        return counts;
      })
      // Per entry, its sizes as [max_distance, grid_height, grid_width] (0 where the kind has none).
      .def("entry_sizes", [](const Spec& self) {
        std::vector<std::vector<int64_t>> sizes;
        for (const auto& e : self->spec.entries) sizes.push_back({e.max_distance, e.grid_height, e.grid_width});
        return sizes;
      })
      // Pickled as its entries, (kind, max_distance, grid_height, grid_width) each and the tile kinds'
      // names in entry order (empty for the other kinds): copy.deepcopy, torch.save and TorchScript keep a spec.
      .def_pickle(
          [](const Spec& self) {
            std::tuple<std::vector<std::vector<int64_t>>, std::vector<std::string>> state;
            for (const auto& e : self->spec.entries) {
              std::get<0>(state).push_back({static_cast<int64_t>(e.kind), e.max_distance, e.grid_height, e.grid_width});
              std::get<1>(state).push_back(e.tile);
            }
            return state;
          },
          [](std::tuple<std::vector<std::vector<int64_t>>, std::vector<std::string>> state) {
            auto self = c10::make_intrusive<TermSpecObject>();
            auto& [numbers, tiles] = state;
            TORCH_CHECK_VALUE(numbers.size() == tiles.size(), "[attention] a pickled TermSpec must have one tile "
                              "name per entry, got ", numbers.size(), " entries and ", tiles.size(), " names");
            for (size_t i = 0; i < numbers.size(); ++i) {
              const std::vector<int64_t>& n = numbers[i];
              TORCH_CHECK_VALUE(n.size() == 4 && n[0] >= 0 && n[0] <= static_cast<int64_t>(TermKind::kCausal),
                                "[attention] a pickled TermSpec entry must be (kind, max_distance, grid_height, "
                                "grid_width) with a known kind, got ", c10::IntArrayRef(n));
              append(self, static_cast<TermKind>(n[0]), n[1], n[2], n[3], std::move(tiles[i]));
            }
            return self;
          });
  // The fused attention on a term list: q, k, v as attention's; terms the tensors of `spec`, entry by
  // entry; CPU forward and backward (gradients of the list in its order), no (Tq, Tk) buffer.
  m.def("attention_fused(Tensor q, Tensor k, Tensor v, Tensor[] terms, " POSENC_TERM_SPEC " spec, "
        "bool causal=False, Tensor? key_padding_mask=None, float? scale=None, bool return_weights=False) "
        "-> (Tensor, Tensor)");
  // The same with the spec as its text (TermSpec.describe(): "[offset_rows, tile(fire)]"), the op that
  // torch.compile and torch.export record (their graphs hold no script object; attention_fused and
  // posenc.attention come here). It also returns each row's log-sum-exp (B, H, Tq) in the compute dtype
  // (float32, float64 for float64), which its backward reads.
  m.def("attention_streamed(Tensor q, Tensor k, Tensor v, Tensor[] terms, str spec, bool causal=False, "
        "Tensor? key_padding_mask=None, float? scale=None, bool return_weights=False) -> (Tensor, Tensor, Tensor)");
  // Its backward from the forward's out and logsumexp: the gradients of those of q, k, v and the term
  // list's tensors whose `needs` entry is true (3 + len(terms) entries), in that order, each in its input's
  // shape and dtype.
  m.def("attention_streamed_backward(Tensor grad_out, Tensor q, Tensor k, Tensor v, Tensor[] terms, str spec, "
        "bool causal, Tensor? key_padding_mask, float scale, Tensor out, Tensor logsumexp, bool[] needs) "
        "-> Tensor[]");

  // The family contracts (posenc/nn/family_contract.h, ops/family.cpp): what the one Python holder
  // of every generated posenc.nn class calls. settings is JSON ({"num_heads": 4, "kind": "log"}),
  // state the module's tensors in its contract's order; the ops are CompositeImplicitAutograd, so
  // gradients reach the state through the ops the family calls.
  m.def("family_catalog() -> str");
  m.def("family_settings(str module, str settings) -> str");
  m.def("family_preset(str family, int num_heads, int head_dim, bool causal) -> str");
  m.def("family_init(str module, str settings) -> Tensor[]");
  m.def("family_layout(str module, str settings) -> str");
  m.def("family_reset(str module, str settings, Tensor(a!)[] state) -> ()");
  m.def("family_dense(str module, str settings, Tensor[] state, int q_len, int k_len) -> Tensor");
  m.def("family_dense_qk(str module, str settings, Tensor[] state, Tensor q, Tensor k, float scale, "
        "Tensor? key_padding_mask=None) -> Tensor");
  m.def("family_terms(str module, str settings, Tensor[] state, int q_len, int k_len, ScalarType compute) "
        "-> (Tensor[], " POSENC_TERM_SPEC ")");
  // family_terms' tensors alone (torch.compile's graphs hold no TermSpec).
  m.def("family_term_tensors(str module, str settings, Tensor[] state, int q_len, int k_len, ScalarType compute) "
        "-> Tensor[]");
  m.def("family_call(str module, str settings, Tensor[] state, str method, int q_len=0, int k_len=0, "
        "ScalarType? dtype=None, Tensor? positions=None, int max_distance=0) -> Tensor");
  m.def("family_rotate(str module, str settings, Tensor[] state, Tensor[] inputs, Tensor? positions=None) "
        "-> Tensor[]");
  m.def("family_embed(str module, str settings, Tensor[] state, int[] sizes, Tensor? positions=None, int start=0, "
        "int? count=None, ScalarType dtype=float) -> Tensor");
  m.def("family_describe(str module, str settings) -> str");
  m.def("family_keyword_names(str module, str settings) -> str");
  m.def("family_keywords(str module, str settings, Tensor[] state, int q_len, int k_len, ScalarType dtype) "
        "-> Tensor[]");
  m.def("family_adopt(str module, str settings, str name, Tensor value) -> Tensor");
  m.def("family_relative_logits(str module, str settings, Tensor[] state, Tensor q, Tensor k) -> Tensor");
  m.def("family_relative_values(str module, str settings, Tensor[] state, Tensor probs) -> Tensor");
  m.def("family_pretrained(str module, Tensor weight, str settings) -> (str, Tensor)");
}
