// Parser of the Tile IR text format (docs/ir.md). Ops are read generically from the op table:
// only region keywords (`else`, `do`) are special. Parsing does not verify types or shapes.
#include <algorithm>
#include <deque>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "text/Lexer.h"
#include "text/Syntax.h"
#include "text/Text.h"

namespace tessera {

namespace {

using text::Lexer;
using text::quote;
using text::Tok;
using text::Token;

std::string_view kind_phrase(AttrKind k) {
  switch (k) {
    case AttrKind::Int: return "an integer";
    case AttrKind::Number: return "a number";
    case AttrKind::String: return "a string";
    case AttrKind::IntList: return "a list of integers";
    case AttrKind::Bool: return "true or false";
  }
  return "?";
}

std::string count_of(size_t n, std::string_view what) {
  return std::to_string(n) + " " + std::string(what) + (n == 1 ? "" : "s");
}

class Parser {
 public:
  Parser(std::string_view src, const std::string& file) : lex_(src, file) {}

  std::unique_ptr<Module> module() {
    auto m = std::make_unique<Module>();
    while (peek().kind != Tok::Eof) {
      auto k = kernel();
      if (m->find(k->name)) fail(name_tok_, "duplicate kernel " + quote("@" + k->name));
      m->kernels.push_back(std::move(k));
    }
    return m;
  }

 private:
  // --- tokens ---

  const Token& peek(size_t i = 0) {
    while (buf_.size() <= i) buf_.push_back(lex_.next());
    return buf_[i];
  }
  Token take() {
    peek();
    Token t = std::move(buf_.front());
    buf_.pop_front();
    return t;
  }
  Loc loc(const Token& t) const { return lex_.loc(t.line, t.col); }
  [[noreturn]] void fail(const Token& at, const std::string& msg) const {
    throw TesseraError(loc(at), msg);
  }
  // "expected X" at `at`; at the end of the input the message says so.
  [[noreturn]] void expected(const Token& at, const std::string& what) const {
    if (at.kind == Tok::Eof) fail(at, "unexpected end of input, expected " + what);
    fail(at, "expected " + what);
  }
  Token expect_punct(char c, const std::string& context = {}) {
    Token t = take();
    if (!t.is(c)) expected(t, std::string("'") + c + "'" + (context.empty() ? "" : " " + context));
    return t;
  }
  Token expect_word(std::string_view w) {
    Token t = take();
    if (!t.is_word(w)) expected(t, "'" + std::string(w) + "'");
    return t;
  }
  int64_t expect_int(const std::string& what) {
    Token t = take();
    if (t.kind != Tok::Int) expected(t, what);
    return t.int_value;
  }

  // --- values and scopes ---

  Value* lookup(std::string_view name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(std::string(name));
      if (f != it->end()) return f->second;
    }
    return nullptr;
  }
  Value* use(const Token& t) {
    Value* v = lookup(t.name());
    if (!v && grid_names_.count(std::string(t.name())))
      fail(t, "use of undefined value " + quote(t.text) + ": it is a value of the grid block, and grid values are "
              "visible only in the grid block (compute it again in the body, e.g. with dim or program_id)");
    if (!v) fail(t, "use of undefined value " + quote(t.text));
    return v;
  }
  void check_fresh(const Token& t) const {
    if (lookup(t.name())) fail(t, "redefinition of value " + quote(t.text));
  }
  void define(const Token& t, Value* v) {
    check_fresh(t);
    scopes_.back().emplace(std::string(t.name()), v);
    if (in_grid_) grid_names_.insert(std::string(t.name()));
  }

  // --- kernels ---

  std::unique_ptr<Kernel> kernel() {
    Token kw = take();
    if (!kw.is_word("kernel")) expected(kw, "'kernel'");
    auto k = std::make_unique<Kernel>();
    k_ = k.get();
    k->loc = loc(kw);
    Token name = take();
    if (name.kind != Tok::Global) expected(name, "a kernel name ('@name') after 'kernel'");
    k->name = std::string(name.name());
    name_tok_ = name;

    scopes_.clear();
    scopes_.emplace_back();
    expect_punct('(', "after the kernel name");
    if (!peek().is(')')) {
      for (;;) {
        Token p = take();
        if (p.kind != Tok::Value) expected(p, "a parameter name ('%name')");
        check_fresh(p);
        expect_punct(':', "after value name");
        Type t = type();
        define(p, k->add_param(std::move(t), std::string(p.name())));
        Token sep = take();
        if (sep.is(')')) break;
        if (!sep.is(',')) expected(sep, "',' or ')' after a parameter");
      }
    } else {
      take();
    }

    expect_punct('{', "to open the kernel body");
    while (peek().is_word("constexpr")) constexpr_decl(*k);
    Token g = take();
    if (!g.is_word("grid")) expected(g, "'grid'");
    if (!peek().is('{')) expected(peek(), "'{' after 'grid'");
    grid_names_.clear();
    in_grid_ = true;
    region(*k->grid, 1);
    in_grid_ = false;
    scopes_.emplace_back();
    ops_until_close(*k->body, 0);
    scopes_.pop_back();
    k_ = nullptr;
    return k;
  }

  void constexpr_decl(Kernel& k) {
    Token kw = take();
    Token name = take();
    if (name.kind != Tok::Ident) expected(name, "a constexpr name after 'constexpr'");
    if (k.find_constexpr(name.text)) fail(name, "duplicate constexpr " + quote(name.text));
    ConstexprDecl d;
    d.name = std::string(name.text);
    d.loc = loc(kw);
    expect_punct('=', "after the constexpr name");
    d.value = expect_int("an integer value for constexpr " + quote(name.text));
    if (peek().is_word("in")) {
      take();
      expect_punct('[', "after 'in'");
      if (!peek().is(']')) {
        for (;;) {
          d.candidates.push_back(expect_int("an integer candidate value"));
          Token sep = take();
          if (sep.is(']')) break;
          if (!sep.is(',')) expected(sep, "',' or ']' in the candidate list");
        }
      } else {
        take();
      }
    }
    k.constexprs.push_back(std::move(d));
  }

  // --- types ---

  ScalarKind scalar() {
    Token t = take();
    if (t.kind != Tok::Ident) expected(t, "an element type");
    auto s = scalar_from_name(t.text);
    if (!s) fail(t, "unknown type " + quote(t.text));
    return *s;
  }

  // A shape. Tile, buffer and pipe dims may be expressions over constexprs and integers
  // (`HD / 2`); a view's dims are runtime sizes, so they are an integer or a name only.
  Shape shape(bool exprs) {
    expect_punct('[', "to open a shape");
    Shape s;
    if (peek().is(']')) {
      take();
      return s;
    }
    for (;;) {
      if (exprs) {
        dim_ops_ = 0;
        s.push_back(dim_sum(0));
      } else {
        Token d = take();
        if (d.kind == Tok::Int) s.emplace_back(d.int_value);
        else if (d.kind == Tok::Ident) s.emplace_back(std::string(d.text));
        else expected(d, "a dimension (an integer or a name)");
        if (is_operator(peek()))
          fail(peek(), "a view dim is an integer or a name: it is a runtime size (shape expressions are "
                       "for tile, buffer and pipe dims)");
      }
      Token sep = take();
      if (sep.is(']')) return s;
      if (!sep.is(',')) expected(sep, "',' or ']' in a shape");
    }
  }

  // `-` right after an operand: `HD-2` lexes as HD and the integer -2.
  static bool is_glued_minus(const Token& t) { return t.kind == Tok::Int && t.text.size() > 1 && t.text[0] == '-'; }
  static bool is_operator(const Token& t) {
    return t.is('+') || t.is('-') || t.is('*') || t.is('/') || is_glued_minus(t);
  }

  // Shape expressions: sum := term (('+' | '-') term)*, term := atom (('*' | '/') atom)*,
  // atom := INT | NAME | ('cdiv' | 'min' | 'max') '(' sum ',' sum ')' | '(' sum ')'.
  Dim dim_sum(int depth) {
    Dim d = dim_term(depth);
    for (;;) {
      const Token& t = peek();
      if (is_glued_minus(t)) {
        Token n = take();
        count_dim_op(n);
        if (n.int_value == std::numeric_limits<int64_t>::min()) fail(n, "integer literal " + quote(n.text.substr(1)) + " is out of range");
        d = d - Dim(-n.int_value);
      } else if (t.is('+') || t.is('-')) {
        Token o = take();
        count_dim_op(o);
        bool plus = o.is('+');
        Dim r = dim_term(depth);
        d = plus ? d + r : d - r;
      } else {
        return d;
      }
    }
  }
  Dim dim_term(int depth) {
    Dim d = dim_atom(depth);
    while (peek().is('*') || peek().is('/')) {
      Token o = take();
      count_dim_op(o);
      bool mul = o.is('*');
      Dim r = dim_atom(depth);
      d = mul ? d * r : d / r;
    }
    return d;
  }
  Dim dim_atom(int depth) {
    Token t = take();
    if (depth > kMaxDimDepth) fail(t, "shape expression nested deeper than " + std::to_string(kMaxDimDepth) + " levels");
    if (t.kind == Tok::Int) return Dim(t.int_value);
    if (t.is('(')) {
      Dim d = dim_sum(depth + 1);
      expect_punct(')', "to close the parenthesis in a shape expression");
      return d;
    }
    if (t.kind != Tok::Ident) expected(t, "a dimension (an integer, a constexpr name or an expression)");
    if (!peek().is('(') || !(t.text == "cdiv" || t.text == "min" || t.text == "max")) return Dim(std::string(t.text));
    count_dim_op(take());
    Dim a = dim_sum(depth + 1);
    expect_punct(',', "between the operands of " + quote(t.text));
    Dim b = dim_sum(depth + 1);
    expect_punct(')', "to close " + quote(t.text));
    return t.text == "cdiv" ? cdiv(a, b) : t.text == "min" ? min(a, b) : max(a, b);
  }
  // Bounds that keep the tree's printer and evaluator (recursive) far from the stack's end.
  // The grid block's value names, for the message when the body uses one.
  bool in_grid_ = false;
  std::unordered_set<std::string> grid_names_;
  static constexpr int kMaxDimDepth = 64;
  static constexpr int kMaxDimOps = 256;
  int dim_ops_ = 0;
  void count_dim_op(const Token& t) {
    if (++dim_ops_ > kMaxDimOps) fail(t, "shape expression has more than " + std::to_string(kMaxDimOps) + " operators");
  }

  Type type() {
    Token t = take();
    if (t.kind != Tok::Ident) expected(t, "a type");
    if (t.text == "tile" || t.text == "view" || t.text == "ptr" || t.text == "buffer" || t.text == "pipe") {
      expect_punct('<', "after " + quote(t.text));
      ScalarKind e = scalar();
      if (t.text == "ptr") {
        expect_punct('>', "to close the pointer type");
        return Type::ptr(e);
      }
      expect_punct(',', "after the element type");
      Shape s = shape(t.text != "view");
      if (t.text == "view") {
        expect_punct('>', "to close the view type");
        return Type::view(e, std::move(s));
      }
      // Tiles and the Struct layer's buffers and pipes share one form: element type, shape,
      // then optional layout and memory space.
      Type tile = Type::tile(e, std::move(s));
      if (t.text == "buffer") tile.kind = Type::Kind::Buffer;
      if (t.text == "pipe") tile.kind = Type::Kind::Pipe;
      const std::string kind_word = std::string(t.text);
      bool seen_layout = false, seen_space = false;
      while (peek().is(',')) {
        take();
        Token key = take();
        bool is_layout = key.is_word("layout"), is_space = key.is_word("space");
        if (!is_layout && !is_space) expected(key, "'layout' or 'space' in a " + kind_word + " type");
        bool& seen = is_layout ? seen_layout : seen_space;
        if (seen) fail(key, "duplicate " + quote(key.text) + " in a " + kind_word + " type");
        seen = true;
        expect_punct('=', "after " + quote(key.text));
        if (is_layout) {
          tile.layout = layout();
          continue;
        }
        Token v = take();
        if (v.kind != Tok::String) expected(v, "a string after " + quote(key.text) + " =");
        tile.space = v.str;
      }
      expect_punct('>', "to close the " + kind_word + " type");
      return tile;
    }
    auto s = scalar_from_name(t.text);
    if (!s) fail(t, "unknown type " + quote(t.text));
    return Type::scalar(*s);
  }

  // A layout encoding (ir/Layout.h): a kind, then its fields in the printed order.
  Layout layout(int depth = 0) {
    Token w = take();
    if (depth > 8) fail(w, "layouts nested deeper than 8 parents");
    if (w.kind == Tok::String)
      fail(w, "a layout is an encoding (replicated, blocked<...>, mma<...>, dot_operand<...>, slice<...>, "
              "permuted<...> or shared<...>), not a string");
    Layout::Kind kind = w.kind == Tok::Ident ? layout_kind_from_name(std::string(w.text)) : Layout::Kind::None;
    if (kind == Layout::Kind::None)
      expected(w, "a layout encoding (replicated, blocked, mma, dot_operand, slice, permuted or shared)");
    if (kind == Layout::Kind::Replicated) return Layout::replicated();
    const std::string what = quote(std::string(w.text)) + " layout";
    expect_punct('<', "after " + what);
    int fields = 0;  // read so far
    auto field = [&](std::string_view name) {
      if (fields++) expect_punct(',', "between the fields of a " + what);
      Token f = take();
      if (!f.is_word(name)) expected(f, quote(std::string(name)) + " in a " + what);
      expect_punct('=', "after " + quote(std::string(name)));
    };
    auto ints = [&](std::string_view name) {
      field(name);
      expect_punct('[', "to open the list " + quote(std::string(name)));
      std::vector<int64_t> v;
      if (peek().is(']')) return take(), v;
      for (;;) {
        v.push_back(expect_int("an integer in " + quote(std::string(name))));
        Token sep = take();
        if (sep.is(']')) return v;
        if (!sep.is(',')) expected(sep, "',' or ']' in " + quote(std::string(name)));
      }
    };
    auto one = [&](std::string_view name) {
      field(name);
      return expect_int("an integer for " + quote(std::string(name)));
    };
    auto parent = [&](std::string_view name) {
      field(name);
      return layout(depth + 1);
    };
    Layout l;
    switch (kind) {
      case Layout::Kind::Blocked: {
        auto pt = ints("per_thread"), th = ints("threads"), wp = ints("warps"), ord = ints("order");
        l = Layout::blocked(pt, th, wp, ord);
        break;
      }
      case Layout::Kind::Mma: {
        int64_t v = one("version");
        auto wp = ints("warps"), in = ints("instr");
        l = Layout::mma(v, wp, in);
        break;
      }
      case Layout::Kind::DotOperand: {
        int64_t op = one("operand"), kw = one("k_width");
        Layout p = parent("parent");
        l = Layout::dot_operand(p, op, kw);
        break;
      }
      case Layout::Kind::Slice: {
        int64_t d = one("dim");
        Layout p = parent("parent");
        l = Layout::slice(p, d);
        break;
      }
      case Layout::Kind::Permuted: {
        auto ds = ints("dims");
        Layout p = parent("parent");
        // (As written: the verifier says what is wrong with it, where Layout::permuted would
        // compose or drop it.)
        l = Layout::of(Layout::Kind::Permuted);
        l.dims = ds;
        l.parent = std::make_shared<const Layout>(p);
        break;
      }
      default: {
        int64_t sw = one("swizzle"), pad = one("pad");
        l = Layout::shared(sw, pad, peek().is(',') ? ints("order") : std::vector<int64_t>{});
        break;
      }
    }
    expect_punct('>', "to close the " + what);
    return l;
  }

  // --- regions and ops ---

  // Parses `{ [^(args):] op* }` into `b`; the caller has checked that '{' is next.
  void region(Block& b, int depth) {
    Token open = take();
    if (depth > text::kMaxRegionDepth)
      fail(open, "regions nested deeper than " + std::to_string(text::kMaxRegionDepth) + " levels");
    scopes_.emplace_back();
    if (peek().is('^')) {
      take();
      expect_punct('(', "after '^'");
      if (!peek().is(')')) {
        for (;;) {
          Token a = take();
          if (a.kind != Tok::Value) expected(a, "a region argument name ('%name')");
          check_fresh(a);
          expect_punct(':', "after value name");
          Type t = type();
          define(a, k_->add_block_arg(b, std::move(t), std::string(a.name())));
          Token sep = take();
          if (sep.is(')')) break;
          if (!sep.is(',')) expected(sep, "',' or ')' after a region argument");
        }
      } else {
        take();
      }
      expect_punct(':', "after the region arguments");
    }
    ops_until_close(b, depth);
    scopes_.pop_back();
  }

  void ops_until_close(Block& b, int depth) {
    for (;;) {
      const Token& t = peek();
      if (t.is('}')) break;
      if (t.kind == Tok::Eof) expected(t, "'}'");
      op(b, depth);
    }
    take();
  }

  void op(Block& b, int depth) {
    Token first = peek();
    std::vector<Token> names;
    if (first.kind == Tok::Value) {
      for (;;) {
        names.push_back(take());
        if (!peek().is(',')) break;
        take();
        if (peek().kind != Tok::Value) expected(peek(), "a result name after ','");
      }
      expect_punct('=', "after the result names");
    }
    Token name = take();
    if (name.kind != Tok::Ident)
      expected(name, names.empty() ? "an op or '}'" : "an op name after '='");
    auto kind = op_from_name(name.text);
    if (!kind && names.empty()) {
      // Keywords out of place: say what the structure expects instead of "unknown op".
      if (name.is_word("kernel")) fail(name, "expected '}' before 'kernel'");
      if (name.is_word("constexpr")) fail(name, "constexpr declarations must come before 'grid'");
      if (name.is_word("grid")) fail(name, "a kernel has one 'grid', before its ops");
    }
    if (!kind) fail(name, "unknown op " + quote(name.text));
    const OpInfo& info = op_info(*kind);

    std::vector<Value*> operands;
    // An op without operands (`async_wait`) may be followed by the next op's result name.
    if (info.max_operands == 0 && peek().kind == Tok::Value && peek().line == name.line)
      fail(peek(), "op " + quote(info.name) + " takes no operands");
    if (info.max_operands != 0 && peek().kind == Tok::Value) {
      for (;;) {
        Token v = take();
        operands.push_back(use(v));
        // A value right after an operand on the same line is a missing comma, not the start
        // of the next op.
        if (peek().kind == Tok::Value && peek().line == v.line)
          expected(peek(), "',' between operands");
        if (!peek().is(',')) break;
        take();
        if (peek().kind != Tok::Value) expected(peek(), "an operand after ','");
      }
    }

    std::vector<NamedAttr> attrs;
    if (peek().is('{') && peek(1).kind == Tok::Ident && peek(2).is('=')) attrs = attributes(info);
    for (const auto& spec : info.attrs) {
      bool have = std::any_of(attrs.begin(), attrs.end(), [&](const NamedAttr& a) { return a.name == spec.name; });
      if (spec.required && !have)
        fail(name, "op " + quote(info.name) + " needs attribute " + quote(spec.name));
    }

    std::vector<Type> types;
    if (peek().is(':')) {
      take();
      for (;;) {
        types.push_back(type());
        if (!peek().is(',')) break;
        take();
      }
    }
    Op* o = k_->create_op(b, *kind, std::move(operands), types, std::move(attrs), loc(first),
                          static_cast<size_t>(info.num_regions));
    for (size_t i = 0; i < o->regions.size(); ++i) {
      std::string_view kw = text::region_keyword(*kind, i);
      if (!kw.empty()) {
        const Token& t = peek();
        if (!t.is_word(kw))
          fail(t.kind == Tok::Eof ? t : name,
               "op " + quote(info.name) + " needs " + std::string(kw == "else" ? "an " : "a ") +
                   quote(kw) + " region");
        take();
      }
      if (!peek().is('{')) {
        if (i == 0) fail(name, "op " + quote(info.name) + " needs a region");
        expected(peek(), "'{' after " + quote(kw));
      }
      region(*o->regions[i], depth + 1);
    }
    const Token& after = peek();
    if (after.is('{') || after.is_word("else") || after.is_word("do")) {
      if (info.num_regions == 0) fail(after, "op " + quote(info.name) + " takes no region");
      fail(after, "op " + quote(info.name) + " takes only " +
                      count_of(static_cast<size_t>(info.num_regions), "region"));
    }
    // Checked after the regions so that a stray region after a region-less op is reported
    // as such rather than as missing result types.
    if (names.size() != types.size())
      fail(name, "op " + quote(info.name) + " has " + count_of(names.size(), "result name") +
                     " but " + count_of(types.size(), "result type"));
    for (size_t i = 0; i < names.size(); ++i) {
      o->results[i]->name = std::string(names[i].name());
      define(names[i], o->results[i]);
    }
  }

  std::vector<NamedAttr> attributes(const OpInfo& info) {
    take();  // '{'
    std::vector<NamedAttr> attrs;
    for (;;) {
      Token an = take();
      if (an.kind != Tok::Ident) expected(an, "an attribute name");
      const AttrSpec* spec = info.find_attr(an.text);
      if (!spec) fail(an, "op " + quote(info.name) + " has no attribute " + quote(an.text));
      for (const auto& a : attrs)
        if (a.name == an.text) fail(an, "duplicate attribute " + quote(an.text));
      expect_punct('=', "after the attribute name");
      attrs.push_back({std::string(an.text), attr_value(info, *spec)});
      Token sep = take();
      if (sep.is('}')) break;
      if (!sep.is(',')) expected(sep, "',' or '}' after an attribute");
    }
    // Stored in the op table's order, so that equal ops hold equal attribute lists.
    auto rank = [&](const NamedAttr& a) { return info.find_attr(a.name) - info.attrs.data(); };
    std::stable_sort(attrs.begin(), attrs.end(),
                     [&](const NamedAttr& a, const NamedAttr& b) { return rank(a) < rank(b); });
    return attrs;
  }

  Attr attr_value(const OpInfo& info, const AttrSpec& spec) {
    Token v = take();
    if (v.kind == Tok::Eof) expected(v, "a value for attribute " + quote(spec.name));
    auto wrong = [&](const Token& at) {
      fail(at, "attribute " + quote(spec.name) + " of " + quote(info.name) + " must be " +
                   std::string(kind_phrase(spec.kind)));
    };
    switch (spec.kind) {
      case AttrKind::Int:
        if (v.kind == Tok::Int) return v.int_value;
        break;
      case AttrKind::Number:
        if (v.kind == Tok::Int) return v.int_value;
        if (v.kind == Tok::Float) return v.float_value;
        if (v.is_word("inf")) return std::numeric_limits<double>::infinity();
        if (v.is_word("-inf")) return -std::numeric_limits<double>::infinity();
        if (v.is_word("nan")) return std::numeric_limits<double>::quiet_NaN();
        break;
      case AttrKind::String:
        if (v.kind == Tok::String) return v.str;
        break;
      case AttrKind::Bool:
        if (v.is_word("true")) return true;
        if (v.is_word("false")) return false;
        break;
      case AttrKind::IntList: {
        if (!v.is('[')) break;
        std::vector<int64_t> list;
        if (peek().is(']')) {
          take();
          return list;
        }
        for (;;) {
          Token e = take();
          if (e.kind == Tok::Eof) expected(e, "']'");
          if (e.kind != Tok::Int) wrong(e);
          list.push_back(e.int_value);
          Token sep = take();
          if (sep.is(']')) return list;
          if (!sep.is(',')) expected(sep, "',' or ']' in a list");
        }
      }
    }
    wrong(v);
    return {};
  }

  Lexer lex_;
  std::deque<Token> buf_;
  Kernel* k_ = nullptr;
  Token name_tok_;  // the current kernel's name, for the duplicate-kernel error
  std::vector<std::unordered_map<std::string, Value*>> scopes_;
};

}  // namespace

std::unique_ptr<Module> parse_module(std::string_view text, const std::string& filename) {
  return Parser(text, filename).module();
}

}  // namespace tessera
