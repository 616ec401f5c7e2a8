#include "posenc/kernels/positions.h"

#include "posenc/error.h"

namespace posenc::kernels {

void validate_table_size(const char* op, const Positions& positions, int64_t dim) {
  if (positions.is_range()) {
    require(positions.count >= 1, op, "positions must be at least 1, got ", positions.count);
  } else {
    require(positions.count >= 0, op, "positions count must be >= 0, got ", positions.count);
  }
  require(dim >= 1, op, "dim must be positive, got ", dim);
  require(positions.count <= kMaxTableValues / dim, op, "positions x dim must be at most ",
          kMaxTableValues, " values, got ", positions.count, " x ", dim);
}

}  // namespace posenc::kernels
