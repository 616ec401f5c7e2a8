// The torch side of posenc's error convention. The kernels and io throw
// std::invalid_argument (bad argument) and std::runtime_error (well formed
// but unsupported, I/O); torch ops must raise c10 errors so that Python sees
// ValueError and RuntimeError. Every op of posenc::nn and
// posenc::analysis_torch runs its kernel calls through translate_errors.
#pragma once

#include <c10/util/Exception.h>

#include <stdexcept>
#include <utility>

namespace posenc::nn {

// Runs `body`, rethrowing std::invalid_argument as c10::ValueError (Python
// ValueError) and std::runtime_error as c10::Error (RuntimeError), with the
// message unchanged: "[sinusoidal] dim must be even, got 7". c10 errors
// pass through as they are.
template <class Body>
decltype(auto) translate_errors(Body&& body) {
  try {
    return std::forward<Body>(body)();
  } catch (const c10::Error&) {
    throw;
  } catch (const std::invalid_argument& e) {
    C10_THROW_ERROR(ValueError, e.what());
  } catch (const std::runtime_error& e) {
    C10_THROW_ERROR(Error, e.what());
  }
}

}  // namespace posenc::nn
