// A small command-line flag parser shared by the subcommands: `--name value`, `--name=value`
// and boolean `--name`, each flag at most once, with generated help text.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace convjit::cli {

/// Exit statuses of every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the op refused its input, a file was bad, a check failed
inline constexpr int kExitUsage = 2;    // the command line itself was wrong

/// A mistake on the command line; reported with the subcommand's usage hint, exit status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What a flag of a table shared by several subcommands is for: `convjit compile` takes the
/// op descriptor's flags of `convjit run`'s table and refuses the ones only a run reads.
enum class FlagRole : std::uint8_t { kGeneral, kDescriptor, kRunOnly };

/// One accepted flag.
struct FlagSpec {
  std::string_view name;     // without the leading dashes
  std::string_view metavar;  // empty: a boolean flag that takes no value
  std::string_view help;
  FlagRole role = FlagRole::kGeneral;
};

/// The flags given on one command line.
class ParsedFlags {
 public:
  bool has(std::string_view name) const { return values_.count(std::string(name)) != 0; }
  /// The flag's value, or nullopt when it was not given.
  std::optional<std::string> get(std::string_view name) const;
  /// Names of every flag given, in sorted order.
  std::vector<std::string> names() const;

  void set(std::string name, std::string value) { values_[std::move(name)] = std::move(value); }

 private:
  std::map<std::string, std::string> values_;
};

/// Parses `args` (the words after the subcommand) against `specs`. Throws UsageError on an
/// unknown flag, a missing value, a repeated flag or a positional word.
ParsedFlags parse_flags(std::span<const std::string_view> args, std::span<const FlagSpec> specs);

/// The flag table as aligned help lines.
std::string format_flag_help(std::span<const FlagSpec> specs);

/// Parses an integer list: "1,2,2,1", "[1, 2, 2, 1]", "1 2 2 1"; "" and "[]" are empty.
/// `flag` labels the error message.
std::vector<std::int64_t> parse_int_list(std::string_view text, std::string_view flag);
/// Parses one integer (int64) or one positive count.
std::int64_t parse_int(std::string_view text, std::string_view flag);
/// Parses a finite floating-point number.
double parse_double(std::string_view text, std::string_view flag);

}  // namespace convjit::cli
