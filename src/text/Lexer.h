// Tokens of the Tile IR text format (docs/ir.md). Internal to src/text.
//
// The lexer is pulled one token at a time so that the parser reports the first error in the
// file, whether it is a lexical or a syntactic one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "support/Diagnostic.h"

namespace tessera::text {

enum class Tok : uint8_t {
  Eof,
  Ident,   // bare word: op names, keywords, attribute names, types, dims; also `-inf`
  Value,   // %name (text keeps the '%')
  Global,  // @name (text keeps the '@')
  Int,
  Float,
  String,
  Punct,   // one of ( ) { } [ ] < > , : = ^ + - * /  (the last four in shape expressions)
};

struct Token {
  Tok kind = Tok::Eof;
  std::string_view text;  // spelling in the source
  std::string str;        // a string literal's decoded contents
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
  int col = 1;

  bool is(char c) const { return kind == Tok::Punct && text.size() == 1 && text[0] == c; }
  bool is_word(std::string_view w) const { return kind == Tok::Ident && text == w; }
  // Value and global names without their sigil.
  std::string_view name() const { return text.substr(1); }
};

class Lexer {
 public:
  Lexer(std::string_view src, std::string file) : src_(src), file_(std::move(file)) {}

  Token next();

  Loc loc(int line, int col) const { return Loc::in_file(file_, line, col); }
  [[noreturn]] void error(int line, int col, const std::string& msg) const {
    throw TesseraError(loc(line, col), msg);
  }

 private:
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0';
  }
  bool at_end(size_t ahead = 0) const { return pos_ + ahead >= src_.size(); }
  void advance();
  void skip_space_and_comments();
  Token lex_number(Token t);
  Token lex_string(Token t);

  std::string_view src_;
  std::string file_;
  size_t pos_ = 0;
  int line_ = 1;
  int col_ = 1;
};

// How a piece of source text is named in a message: printable text in quotes, shortened when
// long (fuzzed input can hold megabyte-long tokens).
std::string quote(std::string_view s);
// A string literal as written in the text format, with the escapes the lexer reads back.
std::string escape_string(std::string_view s);

}  // namespace tessera::text
