// Integer options read as plain decimal text. CLI11 reads integers with
// strtoll/strtoull base 0, so "010" would be 8, "0x10" 16, "-1" for an
// unsigned option 2^64-1, and an int64 past its range the largest value.
// require_decimal_integers() puts one check in front of every integer option
// of every (sub)command, so no option can forget it:
//   * an optional '-' (signed options only), then the digits 0-9, nothing else;
//   * leading zeros are decimal ("010" is 10), never octal;
//   * the value must fit the option's type (INT: int64, UINT: uint64, the
//     only integer types the commands bind), else
//     "[train] --seed must be a decimal integer in 0..18446744073709551615, got '-1'".
#pragma once

#include <CLI/CLI.hpp>

namespace posenc::cli {

// Walks `app` and its subcommands (call it after every command is registered).
// Messages name the subcommand ("[table] --positions ..."); a bad value throws
// std::invalid_argument while parsing.
void require_decimal_integers(CLI::App& app);

}  // namespace posenc::cli
