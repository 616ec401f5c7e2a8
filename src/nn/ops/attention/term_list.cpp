// The terms as a value (posenc/nn/attention_terms.h): spec entries, the flat
// tensor list and back, and the registry of tile kinds (tile_kind.h).
#include "posenc/nn/attention_terms.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "posenc/nn/tile_kind.h"

namespace posenc::nn {
namespace {

constexpr const char* kOp = "attention";

const char* kind_name(TermKind kind) {
  switch (kind) {
    case TermKind::kOffsetRows: return "offset_rows";
    case TermKind::kGridRows: return "grid_rows";
    case TermKind::kDenseBias: return "dense_bias";
    case TermKind::kRelativeKeys: return "relative_keys";
    case TermKind::kRelativeValues: return "relative_values";
    case TermKind::kRelativeQueries: return "relative_queries";
    case TermKind::kRelativeIndex: return "relative_index";
    case TermKind::kContentShift: return "content_shift";
    case TermKind::kRelativeShift: return "relative_shift";
    case TermKind::kGridTables: return "grid_tables";
    case TermKind::kTile: return "tile";
    case TermKind::kCausal: return "causal";
  }
  return "?";
}

bool is_relative(TermKind kind) {
  return kind == TermKind::kRelativeKeys || kind == TermKind::kRelativeValues ||
         kind == TermKind::kRelativeQueries || kind == TermKind::kRelativeIndex;
}

bool is_grid(TermKind kind) { return kind == TermKind::kGridRows || kind == TermKind::kGridTables; }

// Kinds are kept by name so that a family's registration needs no attention file.
std::map<std::string, std::unique_ptr<TileKind>, std::less<>>& kinds() {
  static std::map<std::string, std::unique_ptr<TileKind>, std::less<>> registry;
  return registry;
}

}  // namespace

std::string term_entry_name(const TermEntry& entry) {
  std::string s = kind_name(entry.kind);
  if (is_relative(entry.kind)) s.append("(K=").append(std::to_string(entry.max_distance)).append(")");
  if (is_grid(entry.kind)) {
    s.append("(").append(std::to_string(entry.grid_height)).append("x");
    s.append(std::to_string(entry.grid_width)).append(")");
  }
  if (entry.kind == TermKind::kTile) s.append("(").append(entry.tile).append(")");
  return s;
}

int64_t term_entry_tensors(const TermEntry& entry) {
  switch (entry.kind) {
    case TermKind::kCausal: return 0;
    case TermKind::kGridTables: return 2;
    case TermKind::kTile: return static_cast<int64_t>(tile_kind(entry.tile).tensor_names().size());
    default: return 1;
  }
}

std::string TermSpec::describe() const {
  std::string s = "[";
  for (size_t i = 0; i < entries.size(); ++i) s.append(i ? ", " : "").append(term_entry_name(entries[i]));
  return s.append("]");
}

namespace {

// A number of an entry's parentheses ("4" of "K=4"), or nullopt; negative ones pass, for the term
// checks to refuse with their own message.
std::optional<int64_t> parse_count(std::string_view text) {
  const bool negative = !text.empty() && text.front() == '-';
  if (negative) text.remove_prefix(1);
  if (text.empty() || text.size() > 18) return std::nullopt;
  int64_t n = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  return negative ? -n : n;
}

TermEntry parse_entry(std::string_view item, std::string_view whole) {
  const size_t open = item.find('(');
  const std::string_view name = item.substr(0, open);
  std::string_view inside;
  if (open != std::string_view::npos) {
    TORCH_CHECK_VALUE(item.back() == ')', "[", kOp, "] spec entry '", item, "' must end with ')', in ", whole);
    inside = item.substr(open + 1, item.size() - open - 2);
  }
  TermEntry entry;
  bool known = false;
  for (int k = 0; k <= static_cast<int>(TermKind::kCausal) && !known; ++k) {
    if (name == kind_name(static_cast<TermKind>(k))) entry.kind = static_cast<TermKind>(k), known = true;
  }
  TORCH_CHECK_VALUE(known, "[", kOp, "] unknown spec entry '", name, "' in ", whole);
  const bool wants_inside = is_relative(entry.kind) || is_grid(entry.kind) || entry.kind == TermKind::kTile;
  TORCH_CHECK_VALUE(wants_inside == (open != std::string_view::npos), "[", kOp, "] spec entry '", item, "' ",
                    wants_inside ? "needs its sizes in parentheses" : "takes no parentheses", ", in ", whole);
  if (is_relative(entry.kind)) {
    const auto k = inside.substr(0, 2) == "K=" ? parse_count(inside.substr(2)) : std::nullopt;
    TORCH_CHECK_VALUE(k.has_value(), "[", kOp, "] spec entry '", item, "' needs (K=max_distance), in ", whole);
    entry.max_distance = *k;
  } else if (is_grid(entry.kind)) {
    const size_t x = inside.find('x');
    const auto h = parse_count(inside.substr(0, x));
    const auto w = x == std::string_view::npos ? std::nullopt : parse_count(inside.substr(x + 1));
    TORCH_CHECK_VALUE(h && w, "[", kOp, "] spec entry '", item, "' needs (HEIGHTxWIDTH), in ", whole);
    entry.grid_height = *h, entry.grid_width = *w;
  } else if (entry.kind == TermKind::kTile) {
    entry.tile = std::string(inside);
  }
  return entry;
}

}  // namespace

TermSpec TermSpec::parse(std::string_view text) {
  TORCH_CHECK_VALUE(text.size() >= 2 && text.front() == '[' && text.back() == ']', "[", kOp,
                    "] spec must be a list of entries like [offset_rows, relative_keys(K=4), tile(fire)], got '",
                    text, "'");
  TermSpec spec;
  std::string_view rest = text.substr(1, text.size() - 2);
  while (!rest.empty()) {
    const size_t comma = rest.find(", ");
    spec.entries.push_back(parse_entry(rest.substr(0, comma), text));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 2);
  }
  return spec;
}

int64_t TermSpec::tensor_count() const {
  int64_t n = 0;
  for (const TermEntry& e : entries) n += term_entry_tensors(e);
  return n;
}

TermList pack_terms(const AttentionTerms& terms) {
  TermList list;
  const auto add = [&](TermKind kind, std::initializer_list<const at::Tensor*> tensors, TermEntry entry = {}) {
    entry.kind = kind;
    list.spec.entries.push_back(std::move(entry));
    for (const at::Tensor* t : tensors) list.tensors.push_back(*t);
  };
  TermEntry relative, grid;
  relative.max_distance = terms.max_distance;
  grid.grid_height = terms.grid_height, grid.grid_width = terms.grid_width;
  if (terms.offset_bias.defined()) add(TermKind::kOffsetRows, {&terms.offset_bias});
  if (terms.grid_bias.defined()) add(TermKind::kGridRows, {&terms.grid_bias}, grid);
  if (terms.bias.defined()) add(TermKind::kDenseBias, {&terms.bias});
  if (terms.rel_k.defined()) add(TermKind::kRelativeKeys, {&terms.rel_k}, relative);
  if (terms.rel_v.defined()) add(TermKind::kRelativeValues, {&terms.rel_v}, relative);
  if (terms.rel_q.defined()) add(TermKind::kRelativeQueries, {&terms.rel_q}, relative);
  if (terms.rel_index.defined()) add(TermKind::kRelativeIndex, {&terms.rel_index}, relative);
  if (terms.content_shift.defined()) add(TermKind::kContentShift, {&terms.content_shift});
  if (terms.relative_shift.defined()) add(TermKind::kRelativeShift, {&terms.relative_shift});
  if (terms.grid_h.defined() || terms.grid_w.defined()) {
    TORCH_CHECK_VALUE(terms.grid_h.defined() && terms.grid_w.defined(), "[", kOp,
                      "] grid_h and grid_w (rel_2d table_h and table_w) come together, got only ",
                      terms.grid_h.defined() ? "grid_h" : "grid_w");
    add(TermKind::kGridTables, {&terms.grid_h, &terms.grid_w}, grid);
  }
  for (const TileTerm& tile : terms.tiles) {
    TermEntry entry;
    entry.kind = TermKind::kTile, entry.tile = tile.kind;
    list.spec.entries.push_back(std::move(entry));
    list.tensors.insert(list.tensors.end(), tile.tensors.begin(), tile.tensors.end());
  }
  if (terms.causal) add(TermKind::kCausal, {});
  return list;
}

std::vector<at::Tensor*> term_slots(AttentionTerms& terms, const TermSpec& spec) {
  std::vector<at::Tensor*> slots;
  size_t tiles = 0;
  for (const TermEntry& entry : spec.entries) {
    if (entry.kind == TermKind::kTile) ++tiles;
  }
  terms.tiles.resize(tiles);  // before any address into it is taken
  size_t tile = 0;
  for (const TermEntry& entry : spec.entries) {
    switch (entry.kind) {
      case TermKind::kOffsetRows: slots.push_back(&terms.offset_bias); break;
      case TermKind::kGridRows: slots.push_back(&terms.grid_bias); break;
      case TermKind::kDenseBias: slots.push_back(&terms.bias); break;
      case TermKind::kRelativeKeys: slots.push_back(&terms.rel_k); break;
      case TermKind::kRelativeValues: slots.push_back(&terms.rel_v); break;
      case TermKind::kRelativeQueries: slots.push_back(&terms.rel_q); break;
      case TermKind::kRelativeIndex: slots.push_back(&terms.rel_index); break;
      case TermKind::kContentShift: slots.push_back(&terms.content_shift); break;
      case TermKind::kRelativeShift: slots.push_back(&terms.relative_shift); break;
      case TermKind::kGridTables:
        slots.push_back(&terms.grid_h);
        slots.push_back(&terms.grid_w);
        break;
      case TermKind::kTile: {
        TileTerm& t = terms.tiles[tile++];
        t.kind = entry.tile;
        t.tensors.resize(static_cast<size_t>(term_entry_tensors(entry)));
        for (at::Tensor& x : t.tensors) slots.push_back(&x);
        break;
      }
      case TermKind::kCausal: break;
    }
  }
  return slots;
}

AttentionTerms unpack_terms(const std::vector<at::Tensor>& tensors, const TermSpec& spec) {
  const int64_t want = spec.tensor_count();  // an unknown tile kind is refused here
  TORCH_CHECK_VALUE(static_cast<int64_t>(tensors.size()) == want, "[", kOp, "] the term list must have ", want,
                    " tensors for its spec ", spec.describe(), ", got ", tensors.size());
  AttentionTerms terms;
  const TermEntry* relative = nullptr;
  const TermEntry* grid = nullptr;
  for (size_t e = 0; e < spec.entries.size(); ++e) {
    const TermEntry& entry = spec.entries[e];
    for (size_t before = 0; before < e; ++before) {
      const TermEntry& other = spec.entries[before];
      const bool same = other.kind == entry.kind && (entry.kind != TermKind::kTile || other.tile == entry.tile);
      TORCH_CHECK_VALUE(!same, "[", kOp, "] the spec has ", term_entry_name(entry), " twice");
    }
    if (is_relative(entry.kind)) {
      TORCH_CHECK_VALUE(!relative || relative->max_distance == entry.max_distance, "[", kOp, "] ",
                        term_entry_name(entry), " must share max_distance with ", term_entry_name(*relative));
      relative = relative ? relative : &entry;
      terms.max_distance = entry.max_distance;
    }
    if (is_grid(entry.kind)) {
      TORCH_CHECK_VALUE(!grid || (grid->grid_height == entry.grid_height && grid->grid_width == entry.grid_width),
                        "[", kOp, "] ", term_entry_name(entry), " must share its grid with ", term_entry_name(*grid));
      grid = grid ? grid : &entry;
      terms.grid_height = entry.grid_height, terms.grid_width = entry.grid_width;
    }
    if (entry.kind == TermKind::kCausal) terms.causal = true;
  }
  const std::vector<at::Tensor*> slots = term_slots(terms, spec);
  for (size_t i = 0; i < slots.size(); ++i) *slots[i] = tensors[i];
  return terms;
}

TileKindRegistration::TileKindRegistration(std::unique_ptr<TileKind> kind) {
  const std::string name = kind->name();
  TORCH_INTERNAL_ASSERT(kinds().find(name) == kinds().end(), "tile kind '", name, "' registered twice");
  kinds().emplace(name, std::move(kind));
}

const TileKind& tile_kind(std::string_view name) {
  const auto found = kinds().find(name);
  if (found == kinds().end()) {
    std::string known;
    for (const auto& [k, _] : kinds()) known.append(known.empty() ? "" : ", ").append(k);
    TORCH_CHECK_VALUE(false, "[", kOp, "] unknown tile kind '", name, "' (known: ", known, ")");
  }
  return *found->second;
}

std::vector<std::string> tile_kind_names() {
  std::vector<std::string> names;
  for (const auto& [k, _] : kinds()) names.push_back(k);
  return names;
}

}  // namespace posenc::nn
