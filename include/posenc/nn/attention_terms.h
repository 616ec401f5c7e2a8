// The terms of one attention call as a value (DESIGN.md section 2): what the
// encodings contribute inside attention, by point, without naming a family.
//
//   AttentionTerms  the C++ form the modules fill (add_terms) and the ops read;
//   TermSpec        an ordered list of typed entries, one per term;
//   TermList        the spec with its tensors as one flat list, entry by entry:
//                   what torch.ops.posenc.attention_fused takes, and what its
//                   backward answers with (a gradient per tensor, same order).
//
// Entries (the tensors each takes, in order):
//   offset_rows            1  [H, Tq + Tk - 1], element d + Tk - 1 for d = j - i' (ALiBi, T5, KERPLE, DPB rows)
//   grid_rows(Hg, Wg)      1  [H, 2Hg - 1, 2Wg - 1] by (dy, dx) (2D ALiBi / T5, Swin's CPB)
//   dense_bias             1  broadcastable to (B, H, Tq, Tk)
//   relative_keys(K)       1  rel_k [rows, Dh] | [H, rows, Dh]: (q_i + w) . rel_k[row(d)]
//   relative_values(K)     1  rel_v [2K+1, Dv] | [H, 2K+1, Dv]: sum_j p_ij rel_v[clip(d) + K]
//   relative_queries(K)    1  rel_q as rel_k: k_j . rel_q[row(d)] (DeBERTa's p2c)
//   relative_index         1  int64 [2K+1]: row(d) = rel_index[clip(d) + K] (else clip(d) + K)
//   content_shift          1  u [H, Dh]: (q + u) . k (Transformer-XL)
//   relative_shift         1  w [H, Dh]: (q + w) . rel_k (Transformer-XL's v)
//   grid_tables(Hg, Wg)    2  table_h [2Hg-1, Dh], table_w [2Wg-1, Dh] (or per head): 2D relative
//   tile(kind)             n  a bias computed per tile by a kind its family registered (posenc/nn/tile_kind.h:
//                             "fire", "cope"); n is the kind's tensor count
//   causal                 0  the family asks for the causal mask (causal ALiBi, FIRE, CoPE)
// Each entry appears at most once (tiles: once per kind); the relative
// entries share K, the grid entries one grid.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace posenc::nn {

// A bias computed per tile by a registered kind: its name and its tensors in
// the kind's order (FIRE: w1, b1, w2, b2, c, threshold).
struct TileTerm {
  std::string kind;
  std::vector<at::Tensor> tensors;
};

// The terms an encoding contributes inside attention, by point of DESIGN.md
// section 2 (the attention layer collects them from its encodings without
// knowing the families). Undefined tensors are absent terms.
struct AttentionTerms {
  // ---- logit bias
  at::Tensor offset_bias;  // [H, Tq + Tk - 1], element d + Tk - 1 for offset d = j - i' in [-(Tk-1), Tq-1] (ALiBi, T5)
  at::Tensor grid_bias;    // [H, 2*grid_height - 1, 2*grid_width - 1] by (dy, dx) (2D ALiBi, 2D T5)
  at::Tensor bias;         // dense, broadcastable to (B, H, Tq, Tk): [H, Tq, Tk] or (B, H, Tq, Tk)
  bool causal = false;     // a family may ask for the causal mask (e.g. causal ALiBi)
  std::vector<TileTerm> tiles;  // computed per tile by registered kinds (FIRE, CoPE); the kernel takes one
  // ---- relative vectors
  at::Tensor rel_k;             // [2K+1, Dh] or [H, 2K+1, Dh]
  at::Tensor rel_v;             // [2K+1, Dv] or [H, 2K+1, Dv]
  at::Tensor rel_q;             // [2K+1, Dh] or [H, 2K+1, Dh]: k_j . rel_q[row(d)] added like rel_k (DeBERTa's p2c)
  at::Tensor rel_index;         // int64 [2K+1]: the row of rel_k / rel_q for clip(d, -K, K) + K (then the tables
                                // have any row count; rel_v must be absent). Undefined: that row itself
  int64_t max_distance = 0;     // K
  at::Tensor content_shift;     // u [H, Dh]: (q + u) . k (Transformer-XL)
  at::Tensor relative_shift;    // w [H, Dh]: (q + w) . rel_k (Transformer-XL's v)
  at::Tensor grid_h, grid_w;    // 2D relative: [2*grid_height-1, Dh] / [2*grid_width-1, Dh] (or [H, ., Dh])
  int64_t grid_height = 0, grid_width = 0;
  // ---- the layer's scale: 1/sqrt(Dh * scale_factor) (DeBERTa: 1 + its number of position terms)
  double scale_factor = 1.0;
};

enum class TermKind {
  kOffsetRows,
  kGridRows,
  kDenseBias,
  kRelativeKeys,
  kRelativeValues,
  kRelativeQueries,
  kRelativeIndex,
  kContentShift,
  kRelativeShift,
  kGridTables,
  kTile,
  kCausal,
};

// One entry of a TermSpec; the fields its kind does not use stay at their defaults.
struct TermEntry {
  TermKind kind = TermKind::kOffsetRows;
  int64_t max_distance = 0;              // the relative entries' K
  int64_t grid_height = 0, grid_width = 0;  // the grid entries' grid
  std::string tile;                      // kTile: the registered kind
  bool operator==(const TermEntry&) const = default;
};

// "offset_rows", "relative_keys(K=4)", "grid_tables(3x3)", "tile(fire)".
std::string term_entry_name(const TermEntry& entry);
// Tensors the entry takes from the list (a tile: its kind's count; an unknown kind throws).
int64_t term_entry_tensors(const TermEntry& entry);

struct TermSpec {
  std::vector<TermEntry> entries;
  // "[offset_rows, relative_keys(K=4), tile(fire)]"
  std::string describe() const;
  // describe()'s text back (the spec as torch.ops.posenc.attention_streamed takes it); refuses
  // another text naming the entry: "[attention] spec entry 'relative_keys' needs (K=...), in
  // [offset_rows, relative_keys]".
  static TermSpec parse(std::string_view text);
  int64_t tensor_count() const;
  bool operator==(const TermSpec&) const = default;
};

struct TermList {
  std::vector<at::Tensor> tensors;
  TermSpec spec;
};

// AttentionTerms -> TermList, entries in the order of the table above (tiles in their order).
TermList pack_terms(const AttentionTerms& terms);
// Where each tensor of a list with this spec lives in `terms`, in list order
// (terms.tiles resized to the spec's tiles, named by kind): the backward
// writes its gradients through them.
std::vector<at::Tensor*> term_slots(AttentionTerms& terms, const TermSpec& spec);
// TermList -> AttentionTerms; refuses a list that does not match its spec, naming the entry:
//   "[attention] the term list must have 7 tensors for its spec [offset_rows, tile(fire)], got 6"
//   "[attention] the spec has offset_rows twice"
//   "[attention] relative_values(K=3) must share max_distance with relative_keys(K=4)"
//   "[attention] unknown tile kind 'foo' (known: cope, fire)"
AttentionTerms unpack_terms(const std::vector<at::Tensor>& tensors, const TermSpec& spec);

}  // namespace posenc::nn
