// Learned absolute table (BERT, GPT-2): out[k, :] = table[positions[k], :].
// The backward scatter-adds: grad_table[positions[k], :] += grad_out[k, :].
// Layouts: table [rows, dim] row-major, out/grad_out [N, dim].
#pragma once

#include <cstdint>
#include <span>

namespace posenc::kernels {

// Throws "[learned] position P is outside the table of R rows (valid 0..R-1)"
// for the first offending position.
void validate_learned_positions(std::span<const int64_t> positions, int64_t rows);

template <class T>
void learned_forward(std::span<const T> table, int64_t rows, int64_t dim,
                     std::span<const int64_t> positions, std::span<T> out);

// grad_table: rows*dim, accumulated into (zero it first for a fresh gradient).
template <class T>
void learned_backward(std::span<const T> grad_out, std::span<const int64_t> positions,
                      int64_t rows, int64_t dim, std::span<T> grad_table);

}  // namespace posenc::kernels
