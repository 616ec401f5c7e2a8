// Files written by numpy 1.24's np.save, byte for byte: an outside source
// for what the reader must accept and what the writer must reproduce.
#pragma once

#include <string>

namespace posenc::io::testing {

// np.array([[1.5, -2, 0.25], [3, 4, 5]], dtype=np.float32)
inline std::string numpy_float32_2x3() {
  return std::string("\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 69) +
         std::string(58, ' ') + "\n" +
         std::string("\x00\x00\xc0?\x00\x00\x00\xc0\x00\x00\x80>\x00\x00@@\x00\x00\x80@\x00\x00\xa0@", 24);
}

// np.array(-7, dtype=np.int64): a 0-d array.
inline std::string numpy_int64_scalar() {
  return std::string("\x93NUMPY\x01\x00v\x00{'descr': '<i8', 'fortran_order': False, 'shape': (), }", 65) +
         std::string(62, ' ') + "\n" + std::string("\xf9\xff\xff\xff\xff\xff\xff\xff", 8);
}

// np.array([0.1, -1e300], dtype=np.float64)
inline std::string numpy_float64_pair() {
  return std::string("\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 67) +
         std::string(60, ' ') + "\n" +
         std::string(
             "\x9a\x99\x99\x99\x99\x99\xb9?\x9cu\x00\x88<\xe4"
             "7\xfe",
             16);
}

// np.zeros((2, 0), dtype=np.float32)
inline std::string numpy_float32_empty() {
  return std::string("\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 0), }", 69) +
         std::string(58, ' ') + "\n";
}

}  // namespace posenc::io::testing
