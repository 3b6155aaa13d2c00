// convjit-bench: the benchmark against oneDNN as a program of its own, so that neither the
// library nor the `convjit` binary depends on oneDNN. `convjit bench ARGS` runs it.
#include <iostream>
#include <string_view>
#include <vector>

#include "tools/bench/bench_command.hpp"

int main(int argc, char** argv) {
  const std::vector<std::string_view> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  return convjit::bench::bench_command(args, std::cout, std::cerr);
}
