// An indenting line writer for generated CUDA C++.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <utility>

namespace convjit::codegen {

class CodeWriter {
 public:
  /// One line at the current indentation.
  template <typename... Args>
  void line(fmt::format_string<Args...> format, Args&&... args) {
    text_.append(static_cast<std::size_t>(indent_) * 2, ' ');
    fmt::format_to(std::back_inserter(text_), format, std::forward<Args>(args)...);
    text_ += '\n';
  }
  /// "head {" and one level deeper.
  template <typename... Args>
  void open(fmt::format_string<Args...> format, Args&&... args) {
    text_.append(static_cast<std::size_t>(indent_) * 2, ' ');
    fmt::format_to(std::back_inserter(text_), format, std::forward<Args>(args)...);
    text_ += " {\n";
    ++indent_;
  }
  /// One level back, then `tail` ("}" by default, "};" for types).
  void close(std::string_view tail = "}") {
    --indent_;
    text_.append(static_cast<std::size_t>(indent_) * 2, ' ');
    text_ += tail;
    text_ += '\n';
  }
  void blank() { text_ += '\n'; }
  /// Text written verbatim (already indented, ending in a newline).
  void raw(std::string_view text) { text_ += text; }
  const std::string& text() const { return text_; }
  std::string take() { return std::move(text_); }

 private:
  std::string text_;
  int indent_ = 0;
};

}  // namespace convjit::codegen
