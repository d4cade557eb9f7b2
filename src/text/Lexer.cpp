#include "text/Lexer.h"

#include <charconv>
#include <cstdio>

namespace tessera::text {

namespace {

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_char(char c) { return is_alpha(c) || is_digit(c); }
// Value and kernel names may also hold '.', as in `%acc.1`.
bool is_name_char(char c) { return is_ident_char(c) || c == '.'; }
int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string hex_byte(unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", c);
  return buf;
}

}  // namespace

std::string quote(std::string_view s) {
  constexpr size_t kMax = 40;
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < kMax; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c >= 0x7f) out += "\\x" + hex_byte(c).substr(2);
    else out += static_cast<char>(c);
  }
  if (s.size() > kMax) out += "...";
  return out + "'";
}

std::string escape_string(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        // Other control bytes are escaped so that printed text never hides them; bytes from
        // 0x80 up pass through (UTF-8).
        if (c < 0x20 || c == 0x7f) out += "\\x" + hex_byte(c).substr(2);
        else out += ch;
    }
  }
  return out + "\"";
}

void Lexer::advance() {
  if (src_[pos_] == '\n') {
    ++line_;
    col_ = 1;
  } else {
    ++col_;
  }
  ++pos_;
}

void Lexer::skip_space_and_comments() {
  while (!at_end()) {
    char c = peek();
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      advance();
    } else if (c == '/' && peek(1) == '/') {
      while (!at_end() && peek() != '\n') advance();
    } else {
      return;
    }
  }
}

Token Lexer::next() {
  skip_space_and_comments();
  Token t;
  t.line = line_;
  t.col = col_;
  if (at_end()) {
    t.kind = Tok::Eof;
    return t;
  }
  size_t start = pos_;
  char c = peek();
  if (is_alpha(c)) {
    while (!at_end() && is_ident_char(peek())) advance();
    t.kind = Tok::Ident;
  } else if (c == '%' || c == '@') {
    advance();
    if (at_end() || !is_name_char(peek()))
      error(t.line, t.col, c == '%' ? "expected a value name after '%'"
                                    : "expected a kernel name after '@'");
    while (!at_end() && is_name_char(peek())) advance();
    t.kind = c == '%' ? Tok::Value : Tok::Global;
  } else if (is_digit(c) || (c == '-' && is_digit(peek(1)))) {
    return lex_number(std::move(t));
  } else if (c == '-' && src_.substr(pos_ + 1, 3) == "inf" && !is_ident_char(peek(4))) {
    for (int i = 0; i < 4; ++i) advance();
    t.kind = Tok::Ident;
  } else if (c == '"') {
    return lex_string(std::move(t));
  } else if (std::string_view("(){}[]<>,:=^+-*/").find(c) != std::string_view::npos) {
    advance();
    t.kind = Tok::Punct;
  } else {
    auto u = static_cast<unsigned char>(c);
    if (u > 0x20 && u < 0x7f) error(t.line, t.col, std::string("unexpected character '") + c + "'");
    error(t.line, t.col, "unexpected byte " + hex_byte(u));
  }
  t.text = src_.substr(start, pos_ - start);
  return t;
}

Token Lexer::lex_number(Token t) {
  size_t start = pos_;
  bool is_float = false;
  auto digits = [&] {
    while (!at_end() && is_digit(peek())) advance();
  };
  auto invalid = [&] {
    while (!at_end() && (is_name_char(peek()) || peek() == '-' || peek() == '+')) advance();
    error(t.line, t.col, "invalid number " + quote(src_.substr(start, pos_ - start)));
  };
  if (peek() == '-') advance();
  digits();
  if (peek() == '.') {
    is_float = true;
    advance();
    if (!is_digit(peek())) invalid();
    digits();
  }
  if (peek() == 'e' || peek() == 'E') {
    is_float = true;
    advance();
    if (peek() == '+' || peek() == '-') advance();
    if (!is_digit(peek())) invalid();
    digits();
  }
  if (!at_end() && is_name_char(peek())) invalid();
  t.text = src_.substr(start, pos_ - start);
  const char* b = t.text.data();
  const char* e = b + t.text.size();
  if (is_float) {
    t.kind = Tok::Float;
    auto r = std::from_chars(b, e, t.float_value);
    if (r.ec != std::errc() || r.ptr != e)
      error(t.line, t.col, "float literal " + quote(t.text) + " is out of range");
  } else {
    t.kind = Tok::Int;
    auto r = std::from_chars(b, e, t.int_value);
    if (r.ec != std::errc() || r.ptr != e)
      error(t.line, t.col, "integer literal " + quote(t.text) + " is out of range");
  }
  return t;
}

Token Lexer::lex_string(Token t) {
  size_t start = pos_;
  advance();  // the opening quote
  for (;;) {
    // A raw newline ends the line, not the string: reporting it here points at the string
    // that was left open instead of at the end of the file.
    if (at_end() || peek() == '\n') error(t.line, t.col, "unterminated string");
    char c = peek();
    if (c == '"') {
      advance();
      break;
    }
    if (c != '\\') {
      t.str += c;
      advance();
      continue;
    }
    int bl = line_, bc = col_;
    advance();
    if (at_end() || peek() == '\n') error(t.line, t.col, "unterminated string");
    char e = peek();
    switch (e) {
      case 'n': t.str += '\n'; break;
      case 't': t.str += '\t'; break;
      case 'r': t.str += '\r'; break;
      case '"': t.str += '"'; break;
      case '\\': t.str += '\\'; break;
      case 'x': {
        int hi = hex_digit(peek(1)), lo = hi < 0 ? -1 : hex_digit(peek(2));
        if (hi < 0 || lo < 0) error(bl, bc, "expected two hex digits after '\\x'");
        advance();
        advance();
        t.str += static_cast<char>(hi * 16 + lo);
        break;
      }
      default: {
        auto u = static_cast<unsigned char>(e);
        if (u > 0x20 && u < 0x7f)
          error(bl, bc, std::string("unknown escape '\\") + e + "' in string");
        error(bl, bc, "unknown escape '\\' + byte " + hex_byte(u) + " in string");
      }
    }
    advance();
  }
  t.kind = Tok::String;
  t.text = src_.substr(start, pos_ - start);
  return t;
}

}  // namespace tessera::text
